"""The steps of :func:`export_piece_by_piece`: the cut, the operators' calibration, the attempts, the checks.

Note [the cut]
~~~~~~~~~~~~~~
The model itself is never changed. Each attempt exports a copy made for it: the modules on the path from
the model to each piece are shallow copies (same parameters, buffers and other submodules, their own
dicts), and each piece is replaced in its parent's copy by its :func:`..custom_op.as_custom_op` wrapper,
whose operator runs the user's own module. Before each attempt the copy is called on every example on the
tracing path (Note [the tracing path]): the operators learn their output shapes (Note [learned shapes]), and
the pieces' calls are recorded for the checks. Without ``classes``, the first attempt has no piece; each
failed attempt puts the modules blamed for it (Note [blame]) behind operators, the outermost of them only
(as ``classes=`` chooses), replacing any piece inside them, and the next attempt says whether that was
enough. An attempt whose failure cannot be blamed on a module not yet behind an operator ends the search
with :class:`PieceByPieceExportError`.

Note [identical pieces without values]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Without values (Note [exports without values] in :mod:`._values`) a check compares shapes and dtypes only. A
piece that may take the program of an identical piece before it (Note [shared programs] in :mod:`._reuse`),
whose every recorded call has that piece's structure and, as its operator carries it, the same shapes and
dtypes in and out, would repeat that piece's checks exactly: the same program on inputs of the same shapes
gives outputs of the same shapes, and the eager outputs they are compared with are the same shapes too. Its
module, identical by the same Note, computes those shapes from the same code on the same shapes, so its check
through the operator would repeat the other's as well (made only when each example calls it once, as the
comparison of shapes covers the first call of each). So the piece takes that piece's checks (its *twin*'s)
instead of running them: 80 identical layers of a 70B-shaped model on ``meta`` are checked once (issue 28).
With values nothing is shared: each piece's own weights give values of their own, each compared.

Imports: :mod:`..custom_op` (the wrappers, the call structure), :mod:`..serialize`, and the modules of this
package below it (:mod:`._reuse` for Note [shared programs], :mod:`._alone` for each piece's own program);
torch.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import torch

from ..artifact._write import SavedPiece
from ..custom_op import is_custom_op_module, op_name, shallow_copy, submodules_of, wrap
from ..custom_op._calls import flat_outputs
from ..serialize import make_copy
from ._alone import (
    RefusedCall,
    as_carried,
    check_alone,
    contiguous,
    described_calls,
    export_alone,
    export_program,
    first_calls,
    flat_result,
    piece_output_names,
    relax_ones,
    shapes_of,
    worse,
)
from ._blame import CONSTRAINT, OTHER, Failure, Watch, reasons, suggested_fixes
from ._by_size import BySize, export_by_size, share_by_size
from ._errors import PieceByPieceExportError
from ._examples import DimSpec, Example, describe
from ._flat import FlatCall
from ._ranges import RangeChecks, count
from ._record import Recording, module_paths, run_recording, tracing_path, written_back
from ._report import Attempt, ExportReport, Piece, PieceStatus
from ._reuse import reusable, same_structures
from ._verdict import GUARD_FAILED, Verdict

# Recorded calls per piece and example compared against eager (the first ones: enough to see a difference).
_CHECKED_CALLS = 2
# Progress of a long export, for users who turn it on (logging.INFO): each attempt, each piece's own program.
_log = logging.getLogger("piece_by_piece_serialize.export")
# Seconds between two progress lines inside one attempt (the module tracing is in).
_HEARTBEAT = 5.0


def fresh_namespace() -> str:
    """An operator namespace no operator uses: random, so that the artifacts of different processes can be loaded
    in one process (their operators keep the export's names), and checked against this process's operators."""
    while True:
        namespace = f"pbp_{secrets.token_hex(5)}"
        if not any(name.startswith(f"{namespace}::") for name in torch._C._dispatch_get_all_op_names()):
            return namespace


def sized(failure: Failure | None) -> bool:
    """Whether a piece without a program of its own for ``failure`` may have programs by size (Note [programs by
    size]): its program refuses one of its recorded calls, or torch.export refused the dimensions that differ
    between them as dynamic (a constraint violation: exported alone, every guard is the piece's own code's, which
    specializes such a dimension, a Jamba Mamba layer's loop over its sequence, or ties it to another)."""
    return isinstance(failure, RefusedCall) or (failure is not None and failure.kind == CONSTRAINT)


class Job(RangeChecks):
    """One export: the model, its examples and their dims, the pieces cut so far, the attempts."""

    def __init__(self, model: torch.nn.Module, examples: list[Example], specs: list[DimSpec | None], notes: list[str],
                 verdict: Verdict | None = None, unchecked: str | None = None, check_bytes: int | None = None) -> None:  # fmt: skip
        self.model = model
        # the most bytes a point of the declared ranges may take in inputs (Note [checks in bounded memory])
        self.check_bytes = check_bytes
        self.verdict = verdict or Verdict(None, None)  # every comparison with eager (Note [the verdict])
        self.unchecked = unchecked  # why values are not compared with eager (Note [exports without values])
        self.examples = examples
        self.specs = specs
        self.notes = notes
        self.namespace = fresh_namespace()
        self.wrappers: dict[str, Any] = {}  # path -> its as_custom_op wrapper
        self.cut_by: dict[str, tuple[Failure, float]] = {}  # piece -> the failure blamed on it, its share of the time
        self.attempts: list[Attempt] = []
        self.copy: torch.nn.Module = model
        self.flat = FlatCall(model, describe(examples[0].args, examples[0].kwargs).call, "the model")
        self.recordings: list[Recording] = []
        self.suggested: list[str] = []  # torch's suggested fixes for the dynamic shapes, from the failed attempts
        self.runnable: Any = None  # the program's runnable module, once checked
        # each piece's own program (own_programs), less those a point of the declared ranges drops (_ranges.RangeChecks._judge_own)
        self.own: dict[str, tuple[Any, Failure | None, float, float | None, str | None]] = {}
        # without values, each piece whose checks are those of an identical piece before it, and that piece (Note
        # [identical pieces without values])
        self.twins: dict[str, str] = {}
        self.own_runnables: dict[int, Any] = {}  # program.module() of each own program and program by size, made once
        self.unguarded: dict[int, Any] = {}  # and without its guards, as a loaded archive runs it
        # the pieces without a program of their own that have programs by size (Note [programs by size]), and why
        # the others that were tried have none
        self.by_size: dict[str, BySize] = {}
        self.by_size_failed: dict[str, str] = {}
        self.size_donors: list[tuple[str, Any, list[Example], list[Any]]] = []  # the pieces that exported theirs
        self.guarded_hints: set[str] = set()  # hints whose guard the program took, broken in the ranges (_ranges)
        self.guarded_examples: list[int] = []  # the examples the program refused by a guard (check_program)

    def close(self) -> None:
        """Free every operator this export registered."""
        for wrapper in self.wrappers.values():
            wrapper._pbp_op.close()
        self.wrappers = {}

    # ---- the cut (Note [the cut]) --------------------------------------------------------------------

    def set_cut(self, paths: Sequence[str]) -> None:
        """Put exactly the modules at ``paths`` behind operators, in a fresh copy of the model, and calibrate."""
        for path in [p for p in self.wrappers if p not in paths]:
            self.wrappers.pop(path)._pbp_op.close()
        for path in paths:
            if path not in self.wrappers:
                original = self.model.get_submodule(path)
                self.wrappers[path] = wrap(original, f"{self.namespace}::{op_name(path)}", None, "export_piece_by_piece", weights=True)
        self.copy = _copy_with(self.model, self.wrappers)
        self.flat = FlatCall(self.copy, describe(self.examples[0].args, self.examples[0].kwargs).call, "the model")
        self.recordings = [run_recording(self.flat, e.tensors, module_paths(self.copy), self.wrappers) for e in self.examples]

    def covered(self, path: str) -> bool:
        """True if the module at ``path`` is behind an operator, or inside a module that is."""
        return any(path == p or path.startswith(p + ".") for p in self.wrappers)  # dotted paths, not a language

    def attempt(self) -> tuple[Any, BaseException | None, Watch, float]:
        """One try of torch.export on the copy: the program or the exception, what was watched, the time."""
        watch = Watch(self.copy, self.specs)
        self.flat.on_enter = watch.enter
        shapes = None if all(s is None for s in self.specs) else {"tensors": tuple(self.specs)}
        number = len(self.attempts) + 1
        _log.info("attempt %d: torch.export with %s behind operators", number, count(len(self.wrappers), "piece"))
        start = last = time.perf_counter()

        def heartbeat(path: str) -> None:  # a long attempt says where tracing is, every _HEARTBEAT seconds
            nonlocal last
            now = time.perf_counter()
            if now - last >= _HEARTBEAT:
                last = now
                _log.info("attempt %d: tracing %s, %.0f s so far", number, path or "the model", now - start)

        watch.heartbeat = heartbeat
        try:
            # an attempt's failure is the search's business and goes into the report, not torch's printing
            with watch.watching():
                program = relax_ones(export_program(self.flat, contiguous(self.examples[0].tensors), shapes))
            return program, None, watch, time.perf_counter() - start
        except Exception as exc:  # every failure of torch.export is what the search works on (Note [blame])
            self.suggested += [f for f in suggested_fixes(exc) if f not in self.suggested]
            return None, exc, watch, time.perf_counter() - start
        finally:
            self.flat.on_enter = None

    def search(self) -> Any:
        """Attempts until the export succeeds, each failure's modules put behind operators (Note [the cut])."""
        for number in itertools.count(1):
            program, exc, watch, seconds = self.attempt()
            if exc is None:
                self.attempts.append(Attempt(number, seconds, None))
                _log.info("attempt %d: exported in %.1f s", number, seconds)
                return program
            failure = Failure.of(exc)
            blamed = watch.blame(exc)
            new = _outermost([p for p in blamed if p and not self.covered(p)])
            self.attempts.append(Attempt(number, seconds, failure, tuple(new)))
            _log.info("attempt %d: failed in %.1f s (%s); next behind operators: %s", number, seconds, failure.kind, ", ".join(new) or "nothing more")
            if not new:
                raise self.stuck(failure, blamed, exc) from exc
            for path in new:
                self.cut_by[path] = (dataclasses.replace(failure, detail=watch.details.get(path, "")), seconds / len(new))
            kept = [p for p in self.wrappers if not any(p.startswith(q + ".") for q in new)]  # dotted paths
            self.set_cut(kept + new)
        raise AssertionError("unreachable")  # pragma: no cover

    def export_with_classes(self, classes: Any) -> Any:
        """Every submodule of ``classes`` behind its operator, the rest exported; one attempt."""
        chosen = submodules_of(self.model, classes, "export_piece_by_piece")
        self.set_cut([p for p, _ in chosen])
        program, exc, watch, seconds = self.attempt()
        if exc is None:
            self.attempts.append(Attempt(1, seconds, None))
            _log.info("attempt 1: exported in %.1f s", seconds)
            return program
        failure = Failure.of(exc)
        self.attempts.append(Attempt(1, seconds, failure))
        _log.info("attempt 1: failed in %.1f s (%s)", seconds, failure.kind)
        blamed = [p for p in watch.blame(exc) if not self.covered(p)]
        where = f"in {', '.join(p or 'the model' for p in blamed)}" if blamed else "outside any submodule"
        raise PieceByPieceExportError(
            f"export_piece_by_piece: with classes={classes!r} behind operators, the rest of the model fails to export "
            f"{where}: {failure.kind}: {failure.message}. Add that module's class to classes, or pass classes=None to "
            f"find the cut automatically.\ntorch's message:\n{_excerpt(exc)}",
            self.report(None, "classes"),
        ) from exc

    def stuck(self, failure: Failure, blamed: list[str], exc: BaseException) -> PieceByPieceExportError:
        if blamed == [""]:
            where = "in the model's own forward, outside its submodules, where no operator can take it"
            hint = "move that code into a submodule, or make it exportable"
        elif blamed:
            where = f"inside {', '.join(blamed)}, already behind an operator"
            hint = "the operator cannot stand for that module under tracing; see the message"
        else:
            where = "outside the model's submodules (no module could be blamed)"
            hint = "check dynamic_shapes against the example, or see torch's message"
        return PieceByPieceExportError(
            f"export_piece_by_piece: the export fails {where}: {failure.kind}: {failure.message}; {hint}.\n"
            f"torch's message:\n{_excerpt(exc)}",
            self.report(None, "automatic"),
        )

    # ---- checks ---------------------------------------------------------------------------------------

    def check_pieces(self) -> dict[str, tuple[float | None, int]]:
        """Each piece through its operator against its own module, on the recorded calls: (max |diff|, calls); the
        difference None where there are no values to compare (Note [exports without values])."""
        out: dict[str, tuple[float | None, int]] = {}
        if self.wrappers:
            _log.info("checking each piece through its operator against its module (%s)", count(len(self.wrappers), "piece"))
        for path, wrapper in self.wrappers.items():
            original = wrapper._pbp_original
            worst: float | None = 0.0
            n = 0
            twin = self.twins.get(path)
            if twin in out and all(len(r.calls.get(path, [])) <= 1 for r in self.recordings):
                # Note [identical pieces without values]: its twin's result, on as many calls
                out[path] = (out[twin][0], sum(len(r.calls.get(path, [])) for r in self.recordings))
                continue
            for recording in self.recordings:
                for recorded in recording.calls.get(path, [])[:_CHECKED_CALLS]:
                    args, kwargs = make_copy((recorded.args, recorded.kwargs))
                    with tracing_path():
                        output = original(*args, **kwargs)
                    want = flat_outputs(path, output, written_back(args, kwargs))[1]
                    got = flat_result(path, recorded)
                    worst = worse(worst, self.verdict.compare(path, want, got, f"the piece {path}", piece_output_names(recorded)))
                    n += 1
            out[path] = (worst if n else None, n)  # no call, nothing compared: not a difference of 0
        by_donor: dict[str, list[str]] = {}
        for path, donor in self.twins.items():
            by_donor.setdefault(donor, []).append(path)
        for donor, paths in by_donor.items():
            some = ", ".join(paths) if len(paths) <= 3 else f"{paths[0]}, ..., {paths[-1]}"
            self.notes.append(
                f"{count(len(paths), 'piece')} identical to {donor} ({some}) took its checks: without values a check "
                "compares shapes and dtypes, and their recorded calls have its shapes and dtypes in and out"
            )
        return out

    def check_program(self, program: Any, references: list[list[Any]], names: list[str] | None = None) -> float | None:
        """The program against eager on every example; ``names`` are its outputs' (None: shapes and dtypes only,
        Note [exports without values])."""
        _log.info("checking the program against the model on %s", count(len(self.examples), "example"))
        self.runnable = program.module()
        for number, (example, want) in enumerate(zip(self.examples, references, strict=True), 1):
            before = len(self.verdict.refused)
            self._check_point(example, want, f"example {number} ({_describe_example(example)})", names)
            if any(GUARD_FAILED in r for r in self.verdict.refused[before:]):  # Note [guards on a hint]
                self.guarded_examples.append(number - 1)
        if self.unchecked is not None:
            return None
        return max([0.0, *(o.max_abs_diff for o in self.verdict.of(""))])

    def own_programs(self) -> dict[str, tuple[Any, Failure | None, float, float | None, str | None]]:
        """Each piece exported alone on its recorded calls (in both modes), or given the program of an identical
        piece exported before it, or the failure of an identical piece torch.export failed on alone (Note [shared
        programs]): program, failure, time, max |diff|, and the key of the call structure the program computes."""
        out = self.own = {}
        donors: list[tuple[str, Any, list[Example], list[Any]]] = []  # pieces with a program of their own
        shapes: dict[str, list[Any]] = {}  # without values, what the checks of each donor compared
        failed: list[tuple[str, Any, list[Example], list[Any]]] = []  # pieces torch.export failed on alone
        runnables = self.own_runnables  # program.module() of each program, made once for all the pieces it serves
        for number, (path, wrapper) in enumerate(self.wrappers.items(), 1):
            calls = first_calls(self.recordings, path)
            if not calls:  # a piece the examples never call: the report says its check did not run either
                out[path] = (None, Failure(OTHER, "not exported alone: no call of it was recorded"), 0.0, None, None)
                continue
            module, names = wrapper._pbp_original, wrapper._pbp_op.weight_names or ()
            described, specs = described_calls(calls, wrapper._pbp_op)
            start = time.perf_counter()
            cut = self.cut_by.get(path, (None, 0.0))[0]
            if cut is not None and cut.kind == CONSTRAINT and cut.detail:
                # the guard that cut it is its own code's, false at a size of the declared range: a program of it
                # alone, exported from calls that all pass the guard, holds it too (and _judge_own drops it)
                why = "not exported alone: the guard that cut it is in its own code"
                out[path] = (None, Failure(CONSTRAINT, why), 0.0, None, None)
                _log.info("piece %d/%d, %s: no program of its own (the guard that cut it is its own)", number, len(self.wrappers), path)
                self._programs_by_size(path, module, calls, names, runnables, described, specs)
                continue
            for donor, donor_module, donor_described, donor_specs in donors:
                if reusable(donor_module, module, calls, donor_described[0], described[0], donor_specs, specs):
                    program, _, _, donor_worst, _ = out[donor]
                    if self._twin(path, calls, described, donor, donor_described, shapes):
                        out[path] = (program, None, time.perf_counter() - start, donor_worst, described[0].key)
                        _log.info("piece %d/%d, %s: the program and the checks of %s", number, len(self.wrappers), path, donor)
                        break
                    trial = Verdict(self.verdict.atol, self.verdict.rtol)
                    try:
                        worst = check_alone(program, module, path, calls, described, names, runnables, trial)
                    except Exception:  # the donor's program refuses this piece's calls: not reusable
                        continue
                    if worst is None or worst <= (donor_worst or 0.0):  # no further off than on its donor (point 5)
                        self.verdict.merge(trial)
                        # the key of its own calls: it may carry another cache layer (Note [renumbered layers])
                        out[path] = (program, None, time.perf_counter() - start, worst, described[0].key)
                        _log.info("piece %d/%d, %s: the program of %s", number, len(self.wrappers), path, donor)
                        break
            else:
                twin = next((d for d, m, dd, ds in failed if reusable(m, module, calls, dd[0], described[0], ds, specs)), None)
                if twin is not None:  # its export alone would trace the same code the same way and fail as its twin's
                    out[path] = (None, out[twin][1], time.perf_counter() - start, None, None)
                    _log.info("piece %d/%d, %s: no program of its own, as %s, an identical piece", number, len(self.wrappers), path, twin)
                    if sized(out[twin][1]):  # the twin's programs by size, checked on this piece's calls, or its own
                        self._programs_by_size(path, module, calls, names, runnables, described, specs)
                    continue
                out[path] = export_alone(module, path, calls, names, runnables, described, specs, self.verdict)
                failure = out[path][1]
                if out[path][0] is not None:
                    donors.append((path, module, described, specs))
                    if self.unchecked is not None:
                        shapes[path] = shapes_of(path, calls, described)
                elif not isinstance(failure, RefusedCall):
                    failed.append((path, module, described, specs))
                if sized(failure):  # a guard on its sizes, which programs by size may cover
                    self._programs_by_size(path, module, calls, names, runnables, described, specs)
                _log.info("piece %d/%d, %s: %s in %.1f s", number, len(self.wrappers), path,
                          "exported alone" if failure is None else f"no program of its own ({failure.kind})", out[path][2])  # fmt: skip
        return out

    def _programs_by_size(self, path: str, module: Any, calls: list[Any], names: tuple[str, ...], runnables: dict[int, Any],
                          described: list[Example], specs: list[Any]) -> None:  # fmt: skip
        """A piece without a program of its own for a guard on its sizes gets programs by size, if it can (Note
        [programs by size]); values are needed to check them."""
        if self.unchecked is not None:
            return
        failure = self.own[path][1]
        inside = "" if failure is None else failure.inside
        for donor, donor_module, donor_described, donor_specs in self.size_donors:
            if reusable(donor_module, module, calls, donor_described[0], described[0], donor_specs, specs) and donor in self.by_size:
                shared = share_by_size(self.by_size[donor], module, path, calls, described, runnables, self.verdict)
                if shared is not None:  # an identical piece's programs, each checked on this piece's own calls
                    shared.inside = inside
                    self.by_size[path] = shared
                    _log.info("piece %s: the programs by size of %s", path, donor)
                    return
        found = export_by_size(module, path, calls, names, runnables, described, specs, self.verdict)
        if isinstance(found, BySize):
            found.inside = inside
            self.by_size[path] = found
            self.size_donors.append((path, module, described, specs))
            _log.info("piece %s: %s", path, found.describe())
        else:
            self.by_size_failed[path] = found.message
            _log.info("piece %s: no programs by size (%s)", path, found.message)

    def _twin(self, path: str, calls: list[Any], described: list[Example], donor: str, donor_described: list[Example],
              shapes: dict[str, list[Any]]) -> bool:  # fmt: skip
        """Whether the piece, which may take ``donor``'s program, takes its checks too (Note [identical pieces
        without values]); if so, it is remembered as the donor's twin."""
        if self.unchecked is None or donor not in shapes or not same_structures(described, donor_described):
            return False
        if shapes_of(path, calls, described) != shapes[donor]:
            return False
        self.twins[path] = donor
        return True

    def saved_pieces(self, own: dict[str, tuple[Any, Failure | None, float, float | None, str | None]]) -> list[SavedPiece]:
        """What :meth:`PieceByPieceExport.save` writes of each piece."""
        out = []
        for path, wrapper in self.wrappers.items():
            op = wrapper._pbp_op
            program, _, _, _, key = own.get(path, (None, None, None, None, None))
            # a structure cut to the layers it touches is saved as its cut twin, which is what the programs call
            calls = {k: c for k, c in op.calls.items() if c.sliced is None}
            by_size = self.by_size.get(path) if program is None else None
            sized = () if by_size is None else tuple(p for p, _, _ in by_size.programs)
            key = by_size.key if by_size is not None else key
            out.append(SavedPiece(path, op.qualname, wrapper._pbp_original, op.weight_names or (), calls, program, key, sized))
        return out

    def piece_calls(self) -> dict[str, list[tuple[list[Any], list[Any]]]]:
        """Each piece's first recorded call per example, flat: (its weights then its tensors, eager's outputs);
        what onnxruntime checks each piece's ONNX function on."""
        out: dict[str, list[tuple[list[Any], list[Any]]]] = {}
        for path, wrapper in self.wrappers.items():
            weights = wrapper._pbp_op.weights_of()
            calls = out.setdefault(path, [])
            for recorded in first_calls(self.recordings, path):
                example = as_carried(describe(tuple(recorded.args), dict(recorded.kwargs)), wrapper._pbp_op)
                calls.append(([*weights, *example.tensors], flat_result(path, recorded, example.call)))
        return out

    # ---- the report -------------------------------------------------------------------------------------

    def report(self, whole_diff: float | None, mode: str, checks: dict[str, tuple[float | None, int]] | None = None,
               own: dict[str, Any] | None = None, seconds: float = 0.0) -> ExportReport:  # fmt: skip
        checks = checks or {}
        own = own or {}
        called = self.recordings[0].called if self.recordings else []
        order = {p: i for i, p in enumerate(called)}
        on_path = {a for p in self.wrappers for a in ["", *_ancestors(p)]}
        children: dict[str, list[str]] = {}
        pieces: dict[str, Piece] = {}

        def visit(parent: str) -> None:  # depth first, so that pieces are in the order of the printed tree
            children[parent] = sorted((p for p in _children(self.model, parent) if p in order), key=order.__getitem__)
            for kid in children[parent]:
                pieces[kid] = self._piece(kid, on_path, checks, own)
                if kid in on_path:
                    visit(kid)

        if on_path:
            visit("")
        root = Piece(
            "", type(self.model), PieceStatus.CHILDREN_BEHIND_OPERATORS if self.wrappers else PieceStatus.IN_GRAPH,
            max_abs_diff=None if whole_diff is None else max([whole_diff, *(o.max_abs_diff for o in self.verdict.of(""))]),
            seconds=seconds, checked_calls=len(self.examples),
            outputs=self.verdict.of("") if whole_diff is not None else (), passed=self.verdict.passed("") if whole_diff is not None else None,
        )  # fmt: skip
        examples = [_describe_example(e) for e in self.examples]
        return ExportReport(
            type(self.model), mode, root, pieces, children, list(self.attempts), examples, list(self.notes), seconds,
            values_not_compared=self.unchecked, refused=list(self.verdict.refused),
        )  # fmt: skip

    def _piece(self, path: str, on_path: set[str], checks: dict[str, tuple[float | None, int]], own: dict[str, Any]) -> Piece:
        module_class = type(self.model.get_submodule(path))
        if path in self.wrappers:
            failure, share = self.cut_by.get(path, (None, None))
            program, own_failure, own_seconds, own_diff, _ = own.get(path, (None, None, None, None, None))
            diff, n = checks.get(path, (None, 0))
            if own_diff is not None:
                diff = own_diff if diff is None else max(diff, own_diff)
            by_size = self.by_size.get(path)
            if by_size is not None:
                own_seconds = (own_seconds or 0.0) + by_size.seconds
                diff = by_size.worst if diff is None or by_size.worst is None else max(diff, by_size.worst)
            sized = by_size.describe() if by_size is not None else self.by_size_failed.get(path)
            op = self.wrappers[path]._pbp_op
            return Piece(
                path, module_class, PieceStatus.BEHIND_OPERATOR, op.qualname,
                program, failure, own_failure, _total(share, own_seconds), diff, n,
                outputs=self.verdict.of(path), passed=self.verdict.passed(path),
                not_checked="no call of it was recorded" if path in checks and not n else None,
                by_size=sized if by_size is not None else (None if sized is None else f"no programs by size: {sized}"),
                weights=op.weight_names or (),
            )  # fmt: skip
        status = PieceStatus.CHILDREN_BEHIND_OPERATORS if path in on_path else PieceStatus.IN_GRAPH
        return Piece(path, module_class, status)


def _total(*seconds: float | None) -> float | None:
    """A piece's time: its share of the attempt that cut it and its own export (automatic mode has both)."""
    known = [s for s in seconds if s is not None]
    return sum(known) if known else None


def _excerpt(exc: BaseException, lines: int = 20) -> str:
    """The start of the innermost message of ``exc`` and its causes, indented: what torch said."""
    text = str(reasons(exc)[-1]).strip().splitlines()
    kept = text[:lines] + ([f"... ({len(text) - lines} more lines)"] if len(text) > lines else [])
    return "\n".join(f"  {line}" for line in kept)


def _copy_with(model: torch.nn.Module, wrappers: dict[str, Any]) -> torch.nn.Module:
    """A copy of ``model`` with each wrapper at its path, the modules on the way copied (Note [the cut])."""
    copies: dict[str, Any] = {"": shallow_copy(model)}

    def copied(path: str) -> Any:
        if path not in copies:
            parent_path, _, name = path.rpartition(".")
            parent = copied(parent_path)
            parent._modules[name] = copies[path] = shallow_copy(parent._modules[name])
        return copies[path]

    for path, wrapper in wrappers.items():
        parent_path, _, name = path.rpartition(".")
        copied(parent_path)._modules[name] = wrapper
    root: torch.nn.Module = copies[""]
    return root


def _outermost(paths: list[str]) -> list[str]:
    """``paths`` less those inside another of them, as ``classes=`` chooses (``submodules_of``): a module blamed
    with one inside it goes behind one operator, which hides both guards. An operator inside another's module
    is never called (that operator runs the module it wraps, not the copy holding the inner one), so the pair
    made neither piece's calls recorded and each check ran on none."""
    return [p for p in paths if not any(p.startswith(q + ".") for q in paths)]  # dotted paths, not a language


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")  # a dotted module path, not one of the library's languages
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _children(model: torch.nn.Module, path: str) -> list[str]:
    """The paths of a module's children, with the items of its ModuleLists and ModuleDicts as its own."""
    module = model.get_submodule(path) if path else model
    out: list[str] = []

    def walk(m: torch.nn.Module, prefix: str) -> None:
        for name, child in m.named_children():
            child_path = f"{prefix}.{name}" if prefix else name
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)) and not is_custom_op_module(child):
                walk(child, child_path)
            else:
                out.append(child_path)

    walk(module, path)
    return out


def _describe_example(example: Example) -> str:
    n = len(example.tensors)
    shapes = ", ".join("x".join(map(str, t.shape)) or "scalar" for t in example.tensors[:6])
    return f"{n} tensor{'s' if n != 1 else ''}: {shapes}{', ...' if n > 6 else ''}"


