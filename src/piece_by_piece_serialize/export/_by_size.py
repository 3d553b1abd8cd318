"""A piece with a program per domain of sizes, where no one program computes it at every size it is called with.

Note [programs by size]
~~~~~~~~~~~~~~~~~~~~~~~
Code that computes in chunks takes its branches from its inputs' sizes: a Mamba mixer pads its sequence to a
multiple of its chunk size only when it is not one, a gated delta-net loops once per chunk of 64. Traced, such a
piece gives a program that is right on the sizes that take the branches its trace took, and torch.export says
which: exported with hint dimensions, the program keeps those assumptions as its domain (Note [domains] in
:mod:`..domains`); with named ``Dim`` s, the export raises instead, and the piece has no program of its own.
Such a piece comes here three ways: automatic mode cut it for a constraint violation blamed on its own code
(:mod:`._blame`); its export alone, which declares ``Dim.DYNAMIC`` the dimensions that differ between its
recorded calls, raised a constraint violation (a piece given by ``classes=``: a Jamba Mamba layer, whose mixer's
reference scan loops over the sequence in Python, is specialized to each length it is traced at); or its
program refused one of its recorded calls.

So such a piece gets a program per domain. The first of its recorded calls (of the structure its operator carries)
is exported with hints; its domain takes every recorded call it holds for, the program is checked on them as any own
program is; the first call it does not hold for is exported next, and so on, up to :data:`MOST` programs. At the
points of the declared ranges (:mod:`._ranges`), and at the edges of its domains between the examples' sizes
(Note [edges of a domain] in :mod:`._edges`), the piece's call goes to the program whose domain holds for it, and is
checked on it, or, when none does, gets a program of its own. A call is always computed by the first program whose
domain holds for it; one no domain holds for is refused, by name, where the programs run: the ONNX function of the
piece (Note [pieces by size] in :mod:`..onnx_export`) and the loaded archive's operator (:mod:`..artifact._ops`),
which runs the piece's module there instead when the user gives its class or an instance in ``implementations=``.
Inside the export the piece runs its module, as every piece behind an operator does.

Note [one size per program]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A piece whose code loops over a dimension in Python (Jamba's reference Mamba scan over its sequence) is traced
with the loop unrolled: its program holds one size of that dimension, and its graph grows with that size. When
two or more of its programs by size each hold one size of a varying dimension, each its own, a point of the
declared ranges past the largest of those sizes gets no program: it would hold that point's size alone, and at
the end of a range declared to 4,096 it would unroll 4,096 steps (a tiny Jamba's export and ONNX conversion took
46 s with the sequence declared up to 64, 69 s to 128, 117 s to 256, most of it the programs at the range's
middle and end). So the cost is bounded by the piece's own calls, the user's sizes: the points up to them get
their programs (a decode step's single new token, below the examples' 2 and 3), those past them are named in the
report (``none made at ...``), and calls at them are refused by name where the programs run, as every size no
domain holds for is.

Imports: :mod:`..domains` and the modules of this package below :mod:`._job`; torch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import torch

from ..domains import Domain, DomainError, domain_of
from ..serialize import make_copy
from ._alone import check_alone, contiguous, export_program, flat_result, input_labels, runnable_of, weights_of
from ._blame import Failure
from ._examples import Example
from ._flat import FlatCall
from ._record import Recorded, tracing_path
from ._verdict import Verdict

MOST = 8  # programs a piece may get by size: past that, its sizes are too many to be worth one each


@dataclasses.dataclass
class BySize:
    """A piece's programs by size (Note [programs by size]): each with its domain and the sizes it came from."""

    key: str  # the call structure they compute
    names: tuple[str, ...]  # the piece's weights, its programs' first inputs
    specs: list[Any]  # the dimensions that vary between its recorded calls, exported with hints
    programs: list[tuple[Any, Domain, str]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    worst: float | None = 0.0  # the largest difference over the calls they were checked on (None: no values)
    # points of the declared ranges left without a program, and why (Note [one size per program])
    skipped: list[str] = dataclasses.field(default_factory=list)
    why_skipped: str = ""
    # the sizes of the looped dimensions at those points: a point of another example at the same sizes (Note [points
    # of every example] in ._ranges) is the same point for the piece, named once
    skipped_sizes: set[tuple[tuple[int, int, int], ...]] = dataclasses.field(default_factory=set)
    # the piece's submodule whose code specialized a size in its export alone ("mamba (JambaMambaMixer)"), if any
    inside: str = ""

    def choose(self, shapes: Sequence[tuple[int, ...]]) -> Any | None:
        """The program that computes a call of these flat input shapes (weights first), or None."""
        return next((program for program, domain, _ in self.programs if domain.holds(shapes)), None)

    def describe(self) -> str:
        made = f"{len(self.programs)} program{'s' * (len(self.programs) != 1)} by size (from calls at {'; '.join(s for _, _, s in self.programs)})"
        if not self.skipped:
            return made
        translation = "of its operator" if not self.inside else (
            f"of its submodule {self.inside}'s, that submodule behind an operator of its own in its place (classes= "
            "its class)"
        )  # fmt: skip
        return (
            f"{made}; none made at {', '.join(self.skipped)} ({self.why_skipped}): calls at those sizes are refused "
            f"(a translation {translation} can hold the loop: docs/onnx.md, 'A loop in a translation')"
        )

    def one_size_each(self) -> dict[tuple[int, int], int]:
        """The varying dimensions (tensor input, dimension) each of two or more programs holds at one size, each
        program at its own, and the largest of those sizes (Note [one size per program])."""
        if len(self.programs) < 2:
            return {}
        offset = len(self.names)
        found = {}
        for i, dims in enumerate(self.specs):
            for d in dims or {}:
                sizes = [domain.one_size(offset + i, d) for _, domain, _ in self.programs]
                if None not in sizes and len(set(sizes)) == len(sizes):
                    found[i, d] = max(s for s in sizes if s is not None)
        return found


def shapes_of(weights: Sequence[Any], tensors: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in (*weights, *tensors)]


def _where(example: Example) -> str:
    return " ".join("x".join(map(str, t.shape)) for t in example.tensors if t.dim())


def _export(module: torch.nn.Module, path: str, names: tuple[str, ...], example: Example, specs: list[Any]) -> tuple[Any, Domain]:
    """One call exported with ``Dim.AUTO`` on the dimensions that vary (less those of size 0 or 1 in it, which
    torch specializes), and its domain: torch keeps a dimension the trace specializes (a loop over the sequence,
    as a Mamba mixer's slow path runs) as a constant of the domain, where ``Dim.DYNAMIC`` would raise."""
    from torch.export import Dim

    weights = weights_of(module, names)
    flat = FlatCall(module, example.call, path, names)
    tensors = contiguous(example.tensors)
    hints = [None if s is None else {d: Dim.AUTO for d in s if tensors[i].shape[d] > 1} or None for i, s in enumerate(specs)]
    with tracing_path():
        flat(*weights, *make_copy(list(example.tensors)))  # learns the output's structure
    shapes = None if all(s is None for s in hints) else {"tensors": (*[None] * len(weights), *hints)}
    program = export_program(flat, (*weights, *tensors), shapes)
    return program, domain_of(program)


def export_by_size(module: torch.nn.Module, path: str, calls: list[Recorded], names: tuple[str, ...], runnables: dict[int, Any],
                   described: list[Example], specs: list[Any], verdict: Verdict) -> BySize | Failure:  # fmt: skip
    """The piece's programs by size from its recorded calls (Note [programs by size]), or why it has none."""
    start = time.perf_counter()
    weights = weights_of(module, names)
    key = described[0].key
    pending = [i for i, e in enumerate(described) if e.key == key]
    result = BySize(key, names, specs)
    while pending:
        if len(result.programs) == MOST:
            return Failure("other", f"its recorded calls need more than {MOST} programs by size")
        first = pending[0]
        try:
            program, domain = _export(module, path, names, described[first], specs)
        except DomainError as exc:
            return Failure("other", f"its program by size has a domain this library cannot read: {exc}")
        except Exception as exc:
            return Failure.of(exc)
        taken = [i for i in pending if domain.holds(shapes_of(weights, described[i].tensors))]
        if first not in taken:
            return Failure("other", "its program by size does not take the call it was exported from")
        order = [first, *(i for i in taken if i != first)]
        try:
            worst = check_alone(program, module, path, [calls[i] for i in order], [described[i] for i in order], names, runnables, verdict)
        except Exception as exc:
            return Failure.of(exc)
        result.worst = None if worst is None or result.worst is None else max(worst, result.worst)
        result.programs.append((program, domain, _where(described[first])))
        pending = [i for i in pending if i not in taken]
    result.seconds = time.perf_counter() - start
    return result


def share_by_size(donor: BySize, module: torch.nn.Module, path: str, calls: list[Recorded], described: list[Example],
                  runnables: dict[int, Any], verdict: Verdict) -> BySize | None:  # fmt: skip
    """An identical piece's programs by size for ``module`` (Note [shared programs] in :mod:`._reuse`), if each of
    its recorded calls falls in one of their domains and equals eager there (each program run as :func:`judge`
    runs it); None otherwise."""
    weights = weights_of(module, donor.names)
    key = described[0].key
    trial = Verdict(verdict.atol, verdict.rtol)
    for recorded, example in zip(calls, described, strict=True):
        if example.key != key:
            continue
        program = donor.choose(shapes_of(weights, example.tensors))
        want = flat_result(path, recorded, example.call)
        if program is None or judge(program, module, path, donor.names, runnables, example.tensors, want, trial, "its recorded calls") is not None:
            return None
    return BySize(key, donor.names, donor.specs, list(donor.programs), 0.0, donor.worst, list(donor.skipped), donor.why_skipped, set(donor.skipped_sizes))


def add_at(by_size: BySize, module: torch.nn.Module, path: str, example: Example, want: list[Any], runnables: dict[int, Any],
           verdict: Verdict, where: str) -> str | None:  # fmt: skip
    """A call at a point of the declared ranges that no domain of ``by_size`` holds for: its own program, checked
    on it (:func:`judge`), added; or why not (then the piece has no programs by size). None too when the point is
    left without a program: each program holds one size of a dimension, and the point's is past them all (Note [one
    size per program])."""
    beyond = {(i, d): most for (i, d), most in by_size.one_size_each().items() if example.tensors[i].shape[d] > most}
    if beyond:
        sizes = tuple(sorted((i, d, int(example.tensors[i].shape[d])) for i, d in beyond))
        if sizes in by_size.skipped_sizes:
            return None
        by_size.skipped_sizes.add(sizes)
        labels = input_labels(module, example)
        dims = ", ".join(f"{labels[i]} dim {d}" for i, d in beyond)
        by_size.skipped.append(where)
        by_size.why_skipped = (
            f"each program holds one size of {dims}, as a loop over it unrolled in the trace does, and one past its "
            f"calls' largest ({', '.join(map(str, dict.fromkeys(beyond.values())))}) would cost more with each step"
        )
        return None
    if len(by_size.programs) == MOST:
        return f"its calls need more than {MOST} programs by size (at {where})"
    start = time.perf_counter()
    try:
        program, domain = _export(module, path, by_size.names, example, by_size.specs)
    except Exception as exc:
        return f"its program by size at {where} failed: {Failure.of(exc).message}"
    shapes = shapes_of(weights_of(module, by_size.names), example.tensors)
    if not domain.holds(shapes):
        return f"its program by size at {where} does not take the call it was exported from"
    error = judge(program, module, path, by_size.names, runnables, example.tensors, want, verdict, where)
    if error is not None:
        return error
    by_size.programs.append((program, domain, _where(example)))
    by_size.seconds += time.perf_counter() - start
    return None


def judge(program: Any, module: torch.nn.Module, path: str, names: tuple[str, ...], runnables: dict[int, Any], tensors: Sequence[Any],
          want: list[Any], verdict: Verdict, where: str) -> str | None:  # fmt: skip
    """``program`` against eager's outputs ``want`` on one call; why it is not kept, or None. The program runs as
    its runnable module, made once per program in ``runnables`` (:func:`._alone.runnable_of`), whose guards refuse
    a call outside its domain: that refusal is a reason here too."""
    trial = Verdict(verdict.atol, verdict.rtol)
    try:
        with torch.no_grad():
            got = runnable_of(program, runnables)(*weights_of(module, names), *contiguous(make_copy(list(tensors))))
        worst = trial.compare(path, want, list(got), f"the program by size of {path}")
    except Exception as exc:
        return f"its program by size fails at {where}: {Failure.of(exc).message}"
    if trial.passed(path) is False:
        return f"its program by size differs from its module at {where}: max |diff| {worst or 0.0:.3g}"
    return None
