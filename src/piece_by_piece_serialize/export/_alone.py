"""A piece on its own: its recorded calls as its operator carries them, its program exported alone from them,
and that program checked against them.

Each piece behind an operator, with ``classes=`` or cut by the automatic search, is also exported alone
(:meth:`._job.Job.own_programs`): its weights are the program's first inputs (Note [weights as inputs] in
:mod:`..custom_op`), its dynamic dimensions those that differ between its recorded calls. A program is kept
only if it equals eager on every recorded call of its structure; the job also checks it at the points of the
declared ranges (:meth:`._ranges.RangeChecks._judge_own`), as a loaded archive runs it. Nothing here changes a
recorded call (Note [shared copies]).

Note [exported without grad]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every program is exported with grad disabled (:func:`export_program`), as every eager call of this package
runs (Note [the tracing path] in :mod:`._record`). Exported with grad enabled, a model that turns grad off
inside itself (LongCat-Flash's router picks its experts under ``@torch.no_grad()``) gives a program holding a
``wrap_with_set_grad_enabled`` higher-order operator and its nested graph, which an archive refuses to load
(Note [program documents] in :mod:`..artifact._program`): the export saved a file its own load rejected. With
grad already off, the model's switch changes nothing and torch records none. The programs compute the same
values; what they lose is gradients, which pieces behind operators never had.

Imports: :mod:`..custom_op`, :mod:`..serialize`, and the modules of this package below :mod:`._job`; torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..custom_op._calls import Call, flat_outputs
from ..onnx_export._names import input_names, output_names
from ..serialize import make_copy
from ..serialize._cache_slice import cut_copy
from ._blame import CONSTRAINT, Failure, Specialized, Watch
from ._examples import Example, describe, varying_dims
from ._flat import FlatCall
from ._record import Recorded, Recording, tracing_path
from ._verdict import Verdict


def worse(a: float | None, b: float | None) -> float | None:
    """The larger of two differences; None (not compared) if either is."""
    return None if a is None or b is None else max(a, b)


def weights_of(module: torch.nn.Module, names: Sequence[str]) -> list[torch.Tensor]:
    """``module``'s parameters and buffers named ``names`` (its own names, ``proj.weight``), in that order: a
    piece's weights, its programs' first inputs (Note [weights as inputs] in :mod:`..custom_op`). Raises
    ``KeyError`` for a name it has neither of; a buffer shadows a parameter of the same name."""
    own = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    return [own[n] for n in names]


def _caches_of(recorded: Recorded, call: Call | None) -> list[Any]:
    """The caches after a recorded call; for a cut ``call``, with only the cache layers it carries (Note [cut
    calls] in :mod:`..custom_op._slices`)."""
    caches = recorded.caches_after
    if call is not None and call.slices:
        cut = {arg: positions for arg, _, positions in call.slices}
        caches = [cut_copy(c, cut[i]) if i in cut else c for i, c in zip(call.caches, caches, strict=True)]
    return list(caches)


def flat_result(name: str, recorded: Recorded, call: Call | None = None) -> list[Any]:
    """The flat outputs eager gave for a recorded call, as ``call`` carries them (:func:`_caches_of`)."""
    return flat_outputs(name, recorded.output, _caches_of(recorded, call))[1]


def as_carried(example: Example, op: Any) -> Example:
    """``example``, a call of an operator's piece, as the operator carries it: a cache argument cut to the layers
    the structure touches, if it is cut (Note [cut calls] in :mod:`..custom_op._slices`)."""
    whole = op.calls.get(example.key)
    if whole is None or whole.sliced is None:
        return example
    cut, key, kept = whole.sliced
    fresh = dataclasses.replace(cut, out_kinds=None, out_constants={}, out_n_flat=0, out_aliases=(), out_dtypes=(),
                                out_devices=(), shapes=[], rules=None, spare={})  # fmt: skip
    return Example(example.args, example.kwargs, fresh, key, [example.tensors[i] for i in kept])


def shapes_of(path: str, calls: Sequence[Recorded], described: Sequence[Example]) -> list[Any]:
    """Each recorded call's tensors as its operator carries them, in (``described``) and out (its recorded eager
    outputs), to the shape and dtype: all that a check compares when there are no values (Note [identical pieces
    without values] in :mod:`._job`)."""
    def of(tensors: Sequence[Any]) -> list[tuple[tuple[int, ...], Any]]:
        return [(tuple(t.shape), t.dtype) for t in tensors]

    return [(of(e.tensors), of(flat_result(path, r, e.call))) for r, e in zip(calls, described, strict=True)]


def piece_output_names(recorded: Recorded, call: Call | None = None) -> list[str]:
    """The names of a piece's flat outputs (``output.0``, ``cache0.updated.layers.0.keys``) for its verdict."""
    return output_names(recorded.output, [(f"cache{i}", c) for i, c in enumerate(_caches_of(recorded, call))])


@contextlib.contextmanager
def quiet(logger: str) -> Iterator[None]:
    """``logger``'s warnings held back (errors still show) while torch.export runs."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        log.setLevel(level)


def contiguous(tensors: Sequence[Any]) -> tuple[Any, ...]:
    """Programs are exported and run on contiguous tensors: a view (a sliding window's keys) would otherwise make
    torch.export guard on its strides, and the program refuse the same values laid out otherwise."""
    return tuple(t.contiguous() for t in tensors)


def export_program(fn: Any, args: tuple[Any, ...], shapes: Any) -> Any:
    """``torch.export.export(fn, args)`` with grad disabled (Note [exported without grad]), torch's printing of a
    failed export's partial graph and its warnings held back (a failure is the caller's to report)."""
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()), quiet("torch.fx.experimental.symbolic_shapes"):
        return torch.export.export(fn, args, dynamic_shapes=shapes, strict=False)


def relax_ones(program: Any) -> Any:
    """``program`` with the range of each expression of one dimension whose range starts at 2 (a hint's) starting
    where that dimension at 1 puts it (Note [sizes of one] in :mod:`._examples`); changed in place, returned."""
    ranges = program.range_constraints
    for expr, value_range in list(ranges.items()):
        if expr.is_Symbol or len(expr.free_symbols) != 1:
            continue
        (root,) = expr.free_symbols
        if root not in ranges or ranges[root].lower != 2:
            continue
        low = expr.subs(root, 1)
        if low.is_Integer and 0 <= low < value_range.lower:
            ranges[expr] = type(value_range)(low, value_range.upper)
    return program


def described_calls(calls: list[Recorded], op: Any) -> tuple[list[Example], list[Any]]:
    """A piece's recorded calls described as its operator ``op`` carries them (cut: :func:`as_carried`), and
    its dynamic dimensions: those that differ between the calls of the first call's structure."""
    described = [as_carried(describe(tuple(c.args), dict(c.kwargs)), op) for c in calls]
    same = [d for d in described if d.key == described[0].key]
    return described, varying_dims(same) if len(same) > 1 else [None] * len(described[0].tensors)


def first_calls(recordings: Sequence[Recording], path: str) -> list[Recorded]:
    """The first call of the piece at ``path`` in each recording that made one (the examples' calls it is exported
    and checked on)."""
    return [r.calls[path][0] for r in recordings if r.calls.get(path)]


def first_call(recording: Recording, path: str, op: Any, key: str | None) -> tuple[Recorded, Example] | None:
    """The first call of the piece at ``path`` in ``recording``, with its description as ``op`` carries it, if it is
    of the structure ``key`` (the one its program or programs by size compute); None otherwise."""
    calls = recording.calls.get(path, [])[:1]
    if not calls:
        return None
    described, _ = described_calls(calls, op)
    return (calls[0], described[0]) if described[0].key == key else None


def export_alone(module: torch.nn.Module, path: str, calls: list[Recorded], names: tuple[str, ...], runnables: dict[int, Any],
                 described: list[Example], specs: list[Any], verdict: Verdict) -> tuple[Any, Failure | None, float, float | None, str | None]:  # fmt: skip
    """A piece exported on its own, its weights as its first inputs (Note [weights as inputs]), its dynamic
    dimensions those that differ between its recorded calls (``described``, ``specs``: :func:`described_calls`);
    with the key of the call structure it computes."""
    start = time.perf_counter()
    weights = weights_of(module, names)
    flat = FlatCall(module, described[0].call, path, names)
    flat_specs = (*[None] * len(weights), *specs)  # the weights are static
    watch = Watch(module, flat_specs)
    specialized = Specialized(specs, len(weights), watch)
    try:
        with tracing_path():
            flat(*weights, *make_copy(list(described[0].tensors)))  # learns the output's structure
        shapes = None if all(s is None for s in specs) else {"tensors": flat_specs}
        flat.on_enter = specialized.enter  # which enters the watch too
        # torch's warnings held back as in the attempts: a piece cut for a data-dependent branch fails here again
        with watch.watching():
            program = relax_ones(export_program(flat, (*weights, *contiguous(described[0].tensors)), shapes))
    except Exception as exc:  # the piece stays behind its operator; the report says why it has no program
        return None, _failed(exc, specialized, module, described[0]), time.perf_counter() - start, None, None
    seconds = time.perf_counter() - start
    try:
        worst = check_alone(program, module, path, calls, described, names, runnables, verdict)
    except Exception as exc:  # its program refuses one of its own recorded calls (a guard): no program of its own
        return None, _refusing(exc), time.perf_counter() - start, None, None
    return program, None, seconds, worst, described[0].key


def _failed(exc: BaseException, specialized: Specialized, module: torch.nn.Module, example: Example) -> Failure:
    """Why a piece's export alone failed; for a constraint violation, the dimensions its code specialized, named
    by the piece's inputs, and where (Note [specialized dimensions] in :mod:`._blame`)."""
    failure = Failure.of(exc)
    if failure.kind != CONSTRAINT:
        return failure
    detail, where, inside = specialized.describe(input_labels(module, example), module)
    return dataclasses.replace(failure, detail=detail, where=where or failure.where, inside=inside)


def input_labels(module: torch.nn.Module, example: Example) -> list[str]:
    """The names of a piece's flat input tensors in a call (``hidden_states``, ``past.layers.0.keys``), by
    their place (``input 3``) for a cache cut to the layers it touches."""
    labels = input_names(module.forward, example.args, example.kwargs)
    return labels if len(labels) == len(example.tensors) else [f"input {i}" for i in range(len(example.tensors))]


def runnable_of(program: Any, runnables: dict[int, Any], check_guards: bool = True) -> Any:
    """``program.module(check_guards=check_guards)`` (about 18 ms for a tiny layer), made once and kept in
    ``runnables`` by the program's id for every later run of it. With ``check_guards``, each call of the runnable
    still checks its inputs against the program's guards, and raises on a size outside them.

    Kept beside a weak reference to its program, and used only while that is the same program: a runnable does not
    hold its program, and a program refused by its checks is freed, so its id may come back as a later program's,
    which must not run the first one's graph. The weak reference keeps a refused program from living as long as the
    job."""
    held = runnables.get(id(program))
    if held is None or held[0]() is not program:
        held = runnables[id(program)] = (weakref.ref(program), program.module(check_guards=check_guards))
    return held[1]


@dataclasses.dataclass(frozen=True)
class RefusedCall(Failure):
    """Why a piece's own program is not kept: torch exported it, and it failed on one of the piece's recorded
    calls. An identical piece, whose calls are its own, may pass: this failure is not shared (Note [shared
    programs] in :mod:`._reuse`), where one of torch.export itself is."""


def _refusing(exc: BaseException) -> Failure:
    """Why a piece's own program is not kept: it failed on one of the piece's recorded calls."""
    failure = Failure.of(exc)
    return RefusedCall(**{**dataclasses.asdict(failure), "message": f"its program fails on one of its recorded calls: {failure.message}"})


def check_alone(program: Any, module: torch.nn.Module, path: str, calls: list[Recorded], described: list[Example], names: tuple[str, ...],
                runnables: dict[int, Any], verdict: Verdict) -> float | None:  # fmt: skip
    """The largest difference between ``program`` run on ``module``'s weights and its recorded calls of the
    program's structure, and the eager outputs recorded for them; ``runnables`` keeps each program's runnable
    module (:func:`runnable_of`) for the identical pieces that run it too."""
    weights = weights_of(module, names)
    runnable = runnable_of(program, runnables)
    worst: float | None = 0.0
    for recorded, example in zip(calls, described, strict=True):
        if example.key == described[0].key:
            with torch.no_grad():
                # on a copy: a program may change a cache in place, and recorded calls are shared (Note [shared copies])
                got = runnable(*weights, *contiguous(make_copy(list(example.tensors))))
            want = flat_result(path, recorded, example.call)
            worst = worse(worst, verdict.compare(path, want, list(got), f"the program of {path}", piece_output_names(recorded, example.call)))
    return worst
