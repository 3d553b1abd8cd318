"""The program and the pieces' own programs checked at the points of the declared ranges (Note [every declared
range] in :mod:`._examples`), in bounded memory (Note [checks in bounded memory] there): a mixin of
:class:`._job.Job`, which holds what these methods read.

Note [guards on a hint]
~~~~~~~~~~~~~~~~~~~~~~~
torch.export raises when its trace guards a dimension declared by a named ``Dim`` in a way its range cannot say
(``seq % 4 != 0``, from code that pads to chunks of 4): the automatic search reads that failure, blames the
module whose code made the guard and puts it behind an operator (Note [blame]). A dimension declared by a hint
(``Dim.DYNAMIC``, ``Dim.AUTO``, and every one ``torch.export.AdditionalInputs`` makes) lets the same guard into
the program without a word, and the program then refuses sizes of the range that eager takes: the checks here find
them (``guarded_hints``; where none does, an example the program refuses by a guard counts every hint it moves
from the first example, :meth:`RangeChecks.hints_at_guarded_examples`), and the export fails its verdict. So the automatic search runs again with each such
hint declared by a named ``Dim`` (:func:`named_hints`, in :func:`..export.export_piece_by_piece`) and
keeps that export if it passes; otherwise (and with ``classes=``) the first such refusal of a hint says what
changes the outcome: the dimension declared by a named ``Dim``. On a toy that pads to chunks of 4 (in the tests),
with the hints of ``AdditionalInputs`` the first search fails at 4 and 7 tokens, and the second puts the module
that pads behind an operator and passes. Granite-MoE-hybrid's decode step, its examples given by
``AdditionalInputs``, fails the same way at 4 and 7 new tokens. With ``classes=`` there is no search to run
again, but one attempt of the same cut with the hints named fails at the guard and is blamed on the module
outside the classes that took it (``_guard_owner`` in :mod:`..export`): the error opens with that module, the
guard, the line of Python that branched, and torch's suggested fix, where a generic "does not match eager"
said none of them. Llama 4's decode step (issue 31) is one: the chunked mask, made in ``Llama4TextModel``'s own
forward, asks the sliding cache layer ``cumulative_length >= sliding_window`` (16), its program refuses 16
past tokens, and no value differs from eager on the examples.

Note [points of every example]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The points of the declared ranges move one dimension of the first example (Note [every declared range] in
:mod:`._examples`): enough to check one program, which computes the same code at every size. A piece with programs
by size computes other code on the other side of a branch, and the points are also where it gets the programs its
examples did not give it (Note [programs by size] in :mod:`._by_size`). Llama 4's decode step, its examples 3 new
tokens after 6 past, 2 after 8 and 1 after 20 (past its chunk of 16), got programs for those two sides only: the
points moved the first example, below the chunk, and a past moved alone (its cache's keys without its count) is a
cache eager refuses. Its archive refused 40 of the 92 calls of 1 to 23 past and 1, 2, 3 or 5 new tokens (batch 2)
that eager runs. So when a piece has programs by size, the points are also moved from each other example, and a
point eager refuses is tried again with every dimension of its example's size moved alike (a cache's keys with its
count: the first example's refused points too); points of the same sizes as an example or an earlier point are
tried once, those at 1 of a hint (which the first example's points try) not again, those over ``check_bytes``
counted and not checked. Each is checked as the first example's points are, and a piece gets a program by size
where none of its domains holds. The step then has 4 programs by size (more than one new token past the chunk, and
a call crossing it) and its archive refuses 5 of the 92 calls, by name: the 4 whose 15 positions end one short of
the chunk (12 past and 3 new), and one new token after 13 past, sides of the branches no point reached (Note [edges
of a domain] in :mod:`._edges` reaches them). Without a piece by size the first example's points stay the only
ones: more would multiply the checks with no program to gain.

Imports: :mod:`..serialize`, and the modules of this package below :mod:`._job`; torch.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..domains import DomainError, domain_of
from ..serialize import make_copy
from ._alone import contiguous, described_calls, first_call, first_calls, flat_result, runnable_of
from ._blame import OTHER, Failure
from ._by_size import BySize, add_at, judge, shapes_of
from ._edges import ROUNDS, edge_points, followed
from ._errors import PieceByPieceExportError
from ._examples import (
    DimSpec,
    Example,
    describe,
    groups,
    guard_points,
    input_bytes,
    largest_within,
    range_points,
    resized,
    size_partition,
)
from ._examples import _name as hint_group
from ._record import module_paths, run_recording
from ._verdict import GUARD_FAILED, Verdict

_log = logging.getLogger("piece_by_piece_serialize.export")
# what the first guard failure at a point of a hint adds (Note [guards on a hint])
_ON_A_HINT = (
    "; {0} is declared by a hint (Dim.DYNAMIC, Dim.AUTO, or AdditionalInputs), which lets torch.export accept a guard "
    "on it without error: declare it with a named torch.export.Dim, and the export fails at the guard instead, naming "
    "the module that made it, which the automatic search (classes=None) puts behind an operator"
)


class RangeChecks:
    """The checks at the points of the declared ranges, for :class:`._job.Job`."""

    # what the job holds (see its __init__)
    examples: list[Example]
    recordings: list[Any]
    unchecked: str | None
    specs: list[DimSpec | None]
    verdict: Verdict
    check_bytes: int | None
    suggested: list[str]
    runnable: Any
    own: dict[str, tuple[Any, Failure | None, float, float | None, str | None]]
    own_runnables: dict[int, Any]
    unguarded: dict[int, Any]
    by_size: dict[str, BySize]
    by_size_failed: dict[str, str]
    guarded_hints: set[str]
    guarded_examples: list[int]
    wrappers: dict[str, Any]
    flat: Any
    copy: torch.nn.Module

    if TYPE_CHECKING:

        def report(self, whole_diff: float | None, mode: str) -> Any: ...  # the job's

    def check_ranges(self, program: Any, eager: Any, names: list[str] | None, label: Any, partition: dict[str, str] | None) -> str | None:
        """``program`` against eager at the points of the declared ranges (Note [every declared range] in
        :mod:`._examples`), after :meth:`check_program`; ``eager`` gives the model's flat outputs for an example.
        Returns a note for the report; raises :class:`PieceByPieceExportError` for a dimension declared dynamic
        whose every other size eager refuses."""
        from torch.export.dynamic_shapes import _DimHint, _DimHintType

        first = self.examples[0]
        points = range_points(first, self.specs, partition)
        edges = {(*p.items(),): place for p, place in guard_points(first, self.specs, program, partition)}
        points, moved = self._affordable(points + [dict(e) for e in edges if dict(e) not in points], partition, label)
        if not points:
            return "; ".join(moved) or None
        _log.info("checking the program against the model at %s of the declared ranges", count(len(points), "point"))
        accepted: dict[str, list[int]] = {}
        refused: dict[str, list[tuple[int, str]]] = {}
        below: list[str] = []  # the program's refusals at 1 of a hint (Note [sizes of one])
        advised = self.guarded_hints  # the hints whose guard failures say how to name them (Note [guards on a hint])
        groups_ = groups(first, self.specs, partition)
        by_size = size_partition(first, self.specs)
        for point in points:
            ((name, size),) = point.items()
            tries: list[tuple[dict[str, int], dict[str, str] | None]] = [(point, partition)]
            if name in by_size:  # a hint, then with every hint of its size (a dimension given twice, not seen so)
                tries.append(({by_size[name]: size}, by_size))
            place = edges.get(((name, size),), name)
            if place != name:  # past the program's guard, the dimension guarded alone, the others of its group at the
                tries.append(({name: size - 1, place: size}, {**(partition or {}), place: place}))  # guard's end
            for sized, grouping in tries:
                where = f"{label(name)}={size}" + ("" if grouping is partition else " (with the hints of its size)")
                if place != name and place in sized:
                    where = f"{label(place)}={size} (the dimensions that move with it at {size - 1})"
                try:  # a cache may refuse sizes its tensors must share before the model does
                    example = describe(*resized(first, self.specs, sized, grouping))
                    want = eager(example)
                except Exception as exc:  # out of the model's own range: not the program's business (Note [every declared range])
                    refused.setdefault(name, []).append((size, Failure.of(exc).message))
                    continue
                accepted.setdefault(name, []).append(size)
                # at 1, below torch's range of a hint, the program may refuse (Note [sizes of one])
                hint = isinstance(groups_.get(name, (0, None))[1], _DimHint)
                soft, before = size == 1 and hint, len(self.verdict.refused)
                own = dict(self.own) if soft else {}  # what the own programs were, were the program to refuse 1
                self._check_at(example, want, where, names, fallback=not soft)
                # torch's words for a program's guard refusing its inputs (Note [guards on a hint]), once per dimension
                guarded = [i for i in range(before, len(self.verdict.refused)) if GUARD_FAILED in self.verdict.refused[i]]
                if hint and not soft and name not in advised and guarded:
                    advised.add(name)
                    self.verdict.refused[guarded[0]] += _ON_A_HINT.format(label(name))
                if soft and len(self.verdict.refused) > before:
                    below += [f"{r} (below the range torch gives a dimension declared by a hint)" for r in self.verdict.refused[before:]]
                    del self.verdict.refused[before:]
                    self.own.update(own)  # no piece's program meets 1 where the program refuses it
                    accepted[name].remove(size)
                    if not accepted[name]:
                        del accepted[name]
                break
        # a dimension the examples show at two sizes is not static, whatever eager makes of it alone (a sliding
        # cache's keys move with its count below the window: Llama 4's decode step)
        varied = self._moved(range(1, len(self.examples)), partition)
        for name, (old, spec) in groups_.items():
            hint = isinstance(spec, _DimHint)
            if name in refused and name not in accepted and name not in varied and not (hint and spec.type != _DimHintType.DYNAMIC):
                sizes = ", ".join(str(size) for size, _ in refused[name])
                fixes = f"torch's suggested fix: {'; '.join(self.suggested)}" if self.suggested else f"declare it static ({label(name)} = {old})"
                raise PieceByPieceExportError(
                    f"export_piece_by_piece: dynamic_shapes declares {label(name)} dynamic ({spec!r}), but the model runs at "
                    f"no other size than the example's {old}: it refuses {sizes} ({refused[name][0][1]}); the dimension is "
                    f"static: {fixes}, or give Dim.AUTO",
                    self.report(None, "automatic"),
                )
        skipped = sum(len(v) for n, v in refused.items() if n not in accepted)
        others = self._check_other_examples(points, refused, eager, names, label, partition)
        return "; ".join([f"the program checked at {count(sum(map(len, accepted.values())), 'more point')} of the declared ranges" + (
            f" ({', '.join(f'{label(n)}: {_sizes(v)}' for n, v in accepted.items())})" if accepted else ""
        ) + (f"; {skipped} the model itself refuses" if skipped else ""), *moved, *others, *below])

    def _check_other_examples(self, done: Sequence[dict[str, int]], refused_first: Mapping[str, Sequence[tuple[int, str]]], eager: Any,
                              names: list[str] | None, label: Any, partition: dict[str, str] | None) -> list[str]:  # fmt: skip
        """Note [points of every example]: with a piece by size, the points of the declared ranges moved from each
        other example as well, and a point eager refuses moved with the dimensions of its size (``done``: the first
        example's points, checked; ``refused_first``: those eager refused); then the points at the edges of the
        pieces' domains (Note [edges of a domain]), again while they give programs; what the report says of them."""
        from torch.export.dynamic_shapes import _DimHint

        if not self.by_size:
            return []

        def whole(dims: Mapping[str, tuple[int, Any]], point: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
            return tuple(sorted({**{n: s for n, (s, _) in dims.items()}, **point}.items()))  # every group's size

        every = [groups(example, self.specs, partition) for example in self.examples]
        seen = {whole(dims, {}) for dims in every} | {whole(every[0], p) for p in done}
        refused = {(name, size) for name, sizes in refused_first.items() for size, _ in sizes}
        outcomes: Counter[str] = Counter()

        def attempt(i: int, tries: Sequence[dict[str, int]], where: Any) -> None:
            """The first of ``tries`` (sizes moved from example ``i``) eager runs, checked, and its outcome counted."""
            example, dims, outcome = self.examples[i], every[i], None
            for sized in tries:
                if whole(dims, sized) in seen:
                    break
                seen.add(whole(dims, sized))
                if self.check_bytes is not None and input_bytes(example, self.specs, sized, partition) > self.check_bytes:
                    outcome = "over"
                    break
                try:  # out of the model's own range: not the program's business (Note [every declared range])
                    moved = describe(*resized(example, self.specs, sized, partition))
                    want = eager(moved)
                except Exception:  # eager refuses it, whatever it raises: the model's own range
                    outcome = "refused"
                    continue
                outcome = "checked"
                self._check_at(moved, want, where(sized), names)
                break
            if outcome is not None:
                outcomes[outcome] += 1

        for i, (example, dims) in enumerate(zip(self.examples, every, strict=True)):
            for point in range_points(example, self.specs, partition):
                ((name, size),) = point.items()
                # at 1 of a hint the program may refuse (Note [sizes of one]): the first example's points try it
                if size == 1 and isinstance(dims[name][1], _DimHint):
                    continue
                alike = {n: size for n, (s, _) in dims.items() if s == dims[name][0]}  # a cache's keys with its count
                tries = ([point] if i else []) + ([alike] if len(alike) > 1 and (i or (name, size) in refused) else [])
                attempt(i, tries, lambda sized, i=i, name=name, size=size, point=point: (
                    f"{label(name)}={size}{' with the dimensions of its size' if sized is not point else ''} (example {i + 1}'s other sizes)"))
        edges, pieces, scanned = 0, followed(self.by_size, self.wrappers, self.recordings, every), set[tuple[str, int, int]]()
        for _ in range(ROUNDS):  # Note [edges of a domain]: again while the last round gave a piece a program
            made = sum(len(b.programs) for b in self.by_size.values())
            before = outcomes["checked"]
            for i in range(len(self.examples)):
                for tries in edge_points(i, every, pieces, self.by_size, scanned):
                    attempt(i, tries, lambda sized, i=i: f"{', '.join(f'{label(n)}={s}' for n, s in sized.items())} (example {i + 1}'s other sizes, at the edge of a domain of a piece by size)")
            edges += outcomes["checked"] - before
            if sum(len(b.programs) for b in self.by_size.values()) == made:
                break
        if not outcomes:
            return []
        return [f"and at {count(outcomes['checked'], 'point')} moved from every example (a piece has programs by size"
                + (f"; {edges} of them at the edges of their domains" if edges else "") + ")"
                + (f"; {outcomes['refused']} the model itself refuses" if outcomes["refused"] else "")
                + (f"; {outcomes['over']} over the checks' limit of {_mib(self.check_bytes or 0)}, not checked" if outcomes["over"] else "")]

    def hints_at_guarded_examples(self, partition: dict[str, str] | None) -> None:
        """Note [guards on a hint]: where no point of the ranges found a guard, an example the program refuses by one
        (an example past a chunk, where the first was below it) counts every hint it moves from the first example as
        guarded (the points are more precise: each moves one dimension)."""
        from torch.export.dynamic_shapes import _DimHint

        if self.guarded_hints:
            return
        first = groups(self.examples[0], self.specs, partition)
        self.guarded_hints.update(name for name in self._moved(self.guarded_examples, partition) if isinstance(first[name][1], _DimHint))

    def _moved(self, indices: Iterable[int], partition: dict[str, str] | None) -> set[str]:
        """The independent dynamic dimensions (:func:`groups`) whose size in one of the examples at ``indices``
        differs from the first example's."""
        first = groups(self.examples[0], self.specs, partition)
        moved: set[str] = set()
        for i in indices:
            other = groups(self.examples[i], self.specs, partition)
            moved.update(name for name, (size, _) in first.items() if name in other and other[name][0] != size)
        return moved

    def _affordable(self, points: list[dict[str, int]], partition: dict[str, str] | None, label: Any) -> tuple[list[dict[str, int]], list[str]]:
        """``points`` with each one whose inputs would take more than :attr:`check_bytes` moved to the largest
        size within it (Note [checks in bounded memory]), and what the report says of each moved."""
        if self.check_bytes is None:
            return points, []
        first, kept, moved = self.examples[0], [], []
        for point in points:
            ((name, size),) = point.items()
            need = input_bytes(first, self.specs, point, partition)
            if need <= self.check_bytes:
                kept.append(point)
                continue
            instead = largest_within(first, self.specs, name, size, self.check_bytes, partition)
            if instead is not None and {name: instead} not in points and {name: instead} not in kept:
                kept.append({name: instead})
            moved.append(
                f"{label(name)}={size} not checked: its inputs would take {_mib(need)}, over the checks' limit of "
                f"{_mib(self.check_bytes)} (give a larger check_bytes= to check it)"
                + (f"; checked at {label(name)}={instead} instead" if instead is not None else "")
            )
        return kept, moved

    def _check_point(self, example: Example, want: list[Any], where: str, names: list[str] | None, last: bool = False) -> None:
        """The program against eager's ``want`` on ``example``; on a copy, as it may write into a cache in place
        (a StaticCache's layers do, through their operators); at the ``last`` use of a point's ``example``, on
        its own tensors but those it shares with the examples (:meth:`_own_copy`)."""
        try:
            with torch.no_grad():
                got = self.runnable(*contiguous(self._own_copy(example) if last else make_copy(list(example.tensors))))
        except Exception as exc:  # the program refuses a call eager takes (a size of its declared range)
            self.verdict.refuse(where, f"the program fails where eager runs: {Failure.of(exc).message}")
            return
        try:
            self.verdict.compare("", want, list(got), f"the exported program at {where}", names)
        except PieceByPieceExportError as exc:  # another count, shape or dtype: as wrong as a refusal
            self.verdict.refuse(where, f"the program's {str(exc).partition(': ')[2]}")

    def _own_copy(self, example: Example) -> list[Any]:
        """A point's tensors for the program to write into: those :func:`._examples.resized` made for it as they
        are, copies of those it shares with the examples (a dimension it did not resize), which stay the
        examples' (to_onnx compares onnxruntime with eager on them: a StaticCache written in place was 1.0 off)."""
        theirs = {id(t) for e in self.examples for t in e.tensors}
        copies: dict[int, Any] = {}
        for t in example.tensors:
            if id(t) in theirs and id(t) not in copies:
                copies[id(t)] = t.clone()
        return [copies.get(id(t), t) for t in example.tensors]

    def _check_at(self, example: Example, want: list[Any], where: str, names: list[str] | None, fallback: bool = True) -> None:
        """The program at a point of the declared ranges, on the point's own tensors (:meth:`_check_point`), and
        each own program against its module on its piece's first call there (:meth:`_judge_own`), as the
        program's operators meet the calls: a piece's call is held only while its own program runs, where a
        recording of the model held four copies of the point's caches (Note [checks in bounded memory]). Own
        programs the program did not reach, as it failed first, are checked on a recording of the model (with
        ``fallback``)."""
        watched = {path: self.wrappers[path]._pbp_op for path, (program, *_) in self.own.items() if program is not None}
        seen: set[str] = set()
        uncovered: list[str] = []  # pieces by size that no domain of theirs holds for here (Note [programs by size])
        for path, op in watched.items():
            op.observer = self._observer(path, op, where, seen, uncovered)
        for path in self.by_size:
            op = watched[path] = self.wrappers[path]._pbp_op
            op.observer = self._size_observer(path, op, where, seen, uncovered)
        refused = len(self.verdict.refused)
        try:
            self._check_point(example, want, where, names, last=True)
        finally:
            for op in watched.values():
                op.observer = None
        if fallback and len(self.verdict.refused) > refused:
            uncovered += self._check_own_at(example, where, seen)
        if uncovered:
            self._add_by_size(example, where, uncovered)

    def _size_observer(self, path: str, op: Any, where: str, seen: set[str], uncovered: list[str]) -> Any:
        """What ``op`` tells of each eager call at ``where`` for a piece with programs by size: the first call of
        their structure is checked on the program whose domain holds for it, or noted in ``uncovered``."""

        def observe(tensors: list[Any], weights: list[Any] | None, key: str, out: list[Any]) -> None:
            by_size = self.by_size.get(path)
            if by_size is None or key != by_size.key or path in seen:
                return
            seen.add(path)
            given = op.weights_of() if weights is None else weights
            program = by_size.choose(shapes_of(given, tensors))
            if program is None:
                uncovered.append(path)
                return
            error = judge(program, self.wrappers[path]._pbp_original, path, by_size.names, self.own_runnables, tensors, out, self.verdict, where)
            if error is not None:
                self._drop_by_size(path, error)

        return observe

    def _add_by_size(self, example: Example, where: str, paths: list[str]) -> None:
        """A program by size for each of ``paths`` from its call at ``where``, which no domain of its holds for."""
        recording = run_recording(self.flat, example.tensors, module_paths(self.copy), self.wrappers)
        # pieces whose programs by size start with one program are identical (Note [shared programs]): the program
        # one of them gets here serves the others, each checked on its own call, as their first one does
        made: dict[int, tuple[Any, Any, str]] = {}
        for path in paths:
            by_size, wrapper = self.by_size.get(path), self.wrappers[path]
            first = None if by_size is None else first_call(recording, path, wrapper._pbp_op, by_size.key)
            if by_size is None or first is None:
                continue
            call, described = first
            want = flat_result(path, call, described.call)
            twin = made.get(id(by_size.programs[0][0]))
            if (twin is not None and twin[1].holds(shapes_of(wrapper._pbp_op.weights_of(), described.tensors))
                    and judge(twin[0], wrapper._pbp_original, path, by_size.names, self.own_runnables, described.tensors, want, self.verdict, where) is None):  # fmt: skip
                by_size.programs.append(twin)
                continue
            before = len(by_size.programs)
            error = add_at(by_size, wrapper._pbp_original, path, described, want, self.own_runnables, self.verdict, where)
            if error is not None:
                self._drop_by_size(path, error)
            elif len(by_size.programs) > before:
                made.setdefault(id(by_size.programs[0][0]), by_size.programs[-1])
                _log.info("piece %s: a program by size for %s", path, where)
            else:  # Note [one size per program] in ._by_size
                _log.info("piece %s: no program by size for %s (%s)", path, where, by_size.why_skipped)

    def _drop_by_size(self, path: str, why: str) -> None:
        del self.by_size[path]
        self.by_size_failed[path] = why
        _log.info("piece %s: its programs by size dropped (%s)", path, why)

    def _observer(self, path: str, op: Any, where: str, seen: set[str], uncovered: list[str]) -> Any:
        """What ``op`` tells of each eager call while the program runs at ``where``: the first call of the
        structure its piece's own program computes is judged (:meth:`_judge_own`)."""

        def observe(tensors: list[Any], weights: list[Any] | None, key: str, out: list[Any]) -> None:
            program, *_, own_key = self.own[path]
            if program is None or key != own_key or path in seen:  # dropped, another structure, or judged here
                return
            seen.add(path)
            given = op.weights_of() if weights is None else weights
            if self._judge_own(path, where, [*given, *contiguous(tensors)], out):
                uncovered.append(path)

        return observe

    def _judge_own(self, path: str, where: str, inputs: list[Any], want: list[Any]) -> bool:
        """Keep or drop the own program of ``path`` (:meth:`_check_own_at` says why), run without torch's guards
        on ``inputs`` (the piece's weights, then its call's tensors at ``where``); ``want``: eager's outputs. True
        when the program was dropped for a call outside its domain: the piece then has programs by size, the
        first that program, and needs one for that call (Note [programs by size])."""
        program, _, seconds, _, _ = self.own[path]
        runnable = runnable_of(program, self.unguarded, check_guards=False)
        trial = Verdict(self.verdict.atol, self.verdict.rtol)
        try:
            with torch.no_grad():
                got = runnable(*inputs)
            worst = trial.compare(path, want, list(got), f"the program of {path}")
        except Exception as exc:  # the program fails at a size its piece takes in the model
            why = f"fails at {where}, a size of the declared range: {Failure.of(exc).message}"
        else:
            if trial.passed(path) is not False:
                return False
            why = f"differs from its module at {where}, a size of the declared range: max |diff| {worst or 0.0:.3g}"
        failure = Failure(OTHER, f"its program, exported alone from its recorded calls, {why}")
        self.own[path] = (None, failure, seconds, None, None)
        _log.info("piece %s: its own program dropped (%s)", path, why)
        return self._by_size_from(path, program, inputs)

    def _by_size_from(self, path: str, program: Any, inputs: list[Any]) -> bool:
        """Programs by size for a piece whose own program was dropped for a call outside its domain, the first
        that program (Note [programs by size]); whether it has them."""
        try:
            domain = domain_of(program)
        except DomainError:
            return False
        if self.unchecked is not None or domain.holds([tuple(t.shape) for t in inputs]):
            return False  # a program wrong inside its domain: no program of it can be trusted
        wrapper = self.wrappers[path]
        described, specs = described_calls(first_calls(self.recordings, path), wrapper._pbp_op)
        self.by_size[path] = BySize(described[0].key, wrapper._pbp_op.weight_names or (), specs, [(program, domain, "its recorded calls")])
        return True

    def _check_own_at(self, example: Example, where: str, done: Collection[str] = ()) -> list[str]:
        """Each own program against its module on the piece's call at a point of the declared ranges (``where``),
        after :meth:`own_programs`. A program exported from the calls of the examples alone may compute for them
        only (Qwen3-Next's chunked linear attention, exported alone at lengths 6 and 8, computes one chunk: its
        archive was 0.033 off at length 70), so one that differs from eager there, or fails, is dropped, and the
        piece has no program of its own, saying where; the piece itself still runs its module behind its
        operator. The program runs as a loaded archive runs it: without torch's guards, which a saved program
        does not keep and which may refuse a size it is right at (a Llama layer's ``size >= 4`` at past=1)."""
        if not any(program is not None for path, (program, *_) in self.own.items() if path not in done):
            return []
        recording = run_recording(self.flat, example.tensors, module_paths(self.copy), self.wrappers)
        uncovered = []  # the pieces whose program was dropped for a call outside its domain (:meth:`_judge_own`)
        for path, (program, *_, key) in list(self.own.items()):
            wrapper = self.wrappers[path]
            # no call, or one of another structure (the program is not what runs it): nothing to judge
            first = None if program is None or path in done else first_call(recording, path, wrapper._pbp_op, key)
            if first is None:
                continue
            call, described = first
            tensors = contiguous(make_copy(list(described.tensors)))  # recorded calls are shared (Note [shared copies])
            if self._judge_own(path, where, [*wrapper._pbp_op.weights_of(), *tensors], flat_result(path, call, described.call)):
                uncovered.append(path)
        return uncovered


def named_hints(specs: Sequence[DimSpec | None], partition: Mapping[str, str] | None, guarded: Collection[str], label: Any) -> list[DimSpec | None]:
    """``specs`` with each hint of a group in ``guarded`` (named by :func:`._examples._name`) declared by one named ``Dim`` per
    group, named after the group's ``label`` (``input_ids dim 1`` -> ``input_ids_dim_1``): torch.export then fails
    at a guard on it instead of keeping it (Note [guards on a hint] in :mod:`._ranges`)."""
    from torch.export import Dim
    from torch.export.dynamic_shapes import _DimHint

    made: dict[str, Any] = {}
    out: list[DimSpec | None] = []
    for i, dims in enumerate(specs):
        if not dims:
            out.append(dims)
            continue
        new: dict[int, Any] = {}
        for d, spec in dims.items():
            name = hint_group(spec, i, d, partition)
            if isinstance(spec, _DimHint) and name in guarded:
                text = "".join(c if c.isalnum() else "_" for c in str(label(name))).strip("_")
                spec = made.setdefault(name, Dim(text if text.isidentifier() and text.isascii() else f"dim_{len(made)}"))
            new[d] = spec
        out.append(new)
    return out


def _mib(n: int) -> str:
    """Bytes for a reader: ``640 B``, ``3.5 KiB``, ``64.0 MiB``, ``2.1 GiB``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n} B"


def _sizes(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes))



def count(n: int, what: str) -> str:
    """``1 point``, ``3 points``."""
    return f"{n} {what}{'s' if n != 1 else ''}"
