"""Export a model piece by piece in one call: only what fails goes behind operators, with a report.

:func:`export_piece_by_piece` tries ``torch.export`` on the whole model; where it fails, the smallest
submodule to blame goes behind a custom operator of its own (Note [blame], Note [the cut]) and the export is
tried again, until it succeeds. With ``classes=``, every submodule of those classes goes behind its operator
at once and the rest is exported. One example call is enough: the operators learn their output shapes from
eager calls made inside, on the path tracing takes (Note [the tracing path]), on the example and on a second
one made from it (Note [a second example]). Each piece is checked against its own module, the program
against the model, and the report (:class:`ExportReport`) says what went where and why.

Invariants: the user's model is never changed, not even during the call (each attempt exports a copy); the
operators belong to the result and are freed with it; every export of a process has its own operator
namespace; everything the search cannot get around raises :class:`PieceByPieceExportError` with the report
so far.

Imports: :mod:`..custom_op`, :mod:`..serialize` and the languages below them; torch at import.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .._optional import import_torch

import_torch("export_piece_by_piece")  # the install line when torch is missing, before anything below imports it

import torch

from ..serialize import make_copy
from ._blame import CONSTRAINT, FAILURE_KINDS, Failure
from ._errors import ExportMismatchError, PieceByPieceExportError
from ._examples import (
    DimSpec,
    Example,
    check_dims,
    describe,
    dynamic_shapes_from_examples,
    flat_specs,
    hint_partitions,
    observed_partition,
    stretched,
    varying_dims,
)
from ._job import Job
from ._ranges import named_hints
from ._record import module_paths, run_recording, tracing_path
from ._report import Attempt, ExportReport, Piece, PieceStatus
from ._result import PieceByPieceExport
from ._values import why_no_values
from ._verdict import DEFAULT_TOLERANCES, OutputCheck, Verdict, check_tolerances

# Progress, for users who turn it on: logging.getLogger("piece_by_piece_serialize").setLevel(logging.INFO) and a
# handler (logging.basicConfig()); docs/export.md, "Progress".
_log = logging.getLogger("piece_by_piece_serialize.export")

__all__ = [
    "export_piece_by_piece",
    "dynamic_shapes_from_examples",
    "record_calls",
    "RecordedCall",
    "PieceByPieceExport",
    "Piece",
    "PieceStatus",
    "ExportReport",
    "Attempt",
    "Failure",
    "FAILURE_KINDS",
    "PieceByPieceExportError",
    "ExportMismatchError",
    "OutputCheck",
    "DEFAULT_TOLERANCES",
]


def export_piece_by_piece(
    model: torch.nn.Module, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, *, dynamic_shapes: Any = None,
    classes: Any = None, atol: float | None = None, rtol: float | None = None, strict: bool = True, check_bytes: int | None = None,
) -> PieceByPieceExport:  # fmt: skip
    """Export ``model`` with ``torch.export``, putting behind custom operators only what does not export.

    ``args`` and ``kwargs`` are one example call of ``model``: tensors, containers of them, scalars, and any
    transformers cache the library supports. ``dynamic_shapes`` is torch.export's, for the model's arguments,
    with one extension: a cache argument takes one spec for all its tensors (``{0: batch, 2: past}``) or a
    list of one spec per tensor (Note [dynamic shapes of a cache]). It may also be a
    ``torch.export.AdditionalInputs`` holding more example calls, whose differing dimensions become dynamic
    (:func:`dynamic_shapes_from_examples` gives the same as a dict to read or edit).

    ``classes=None`` (the default) finds the cut: the whole model is tried first, and a model that exports
    whole gets no piece. ``classes`` (a class, a class name, or a tuple of them) puts every submodule of
    those classes behind its operator and exports the rest. Either way each piece is also exported alone, from
    its recorded calls, and its program is kept in :attr:`Piece.program` (or why it has none in
    :attr:`Piece.own_export_failure`).

    Every output tensor of the program is compared with eager on every example, and each piece's with its own
    module on its recorded calls: an output passes when ``|got - eager| <= atol + rtol * |eager|`` everywhere
    (Note [the verdict]). ``atol`` and ``rtol`` default per dtype (:data:`DEFAULT_TOLERANCES`: 1e-4 and 1e-4
    for float32, 1e-7 for float64, 1e-3 for float16, 1e-2 and 1.6e-2 for bfloat16); integer and boolean
    outputs must be equal. The program is also checked at each end of every declared range and between; a point
    whose inputs take more than ``check_bytes`` (default: 1/64 of the weights, at least 32 MiB) is checked at the
    largest size within it, as the report says. The report says pass or FAIL per output,
    per piece and for the model. A model with
    an active dropout (in training mode) is refused, naming those modules, as its outputs are random; batch
    norms in training mode give a warning.

    Returns a :class:`PieceByPieceExport`. When the program or a piece does not match, raises
    :class:`ExportMismatchError` (a :class:`PieceByPieceExportError`) carrying the report and the export; with
    ``strict=False`` the export is returned instead, its report saying FAIL (and an active dropout only warns).
    Raises :class:`PieceByPieceExportError` (a ``ValueError``) when the
    export fails where no operator can help (the model's own code, outside its submodules), when ``classes``
    leave a part that does not export, and for ``dynamic_shapes`` that do not fit the example; ``TypeError``
    when the example does not match the model's ``forward``. The model is left as it was.

    Example::

        result = export_piece_by_piece(model, (input_ids,), {"attention_mask": mask},
                                       dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}})
        print(result.report)
        logits = result.module()(other_ids, attention_mask=other_mask)
    """
    start = time.perf_counter()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"export_piece_by_piece: expected a torch.nn.Module, got {type(model).__qualname__}")
    if not isinstance(args, tuple):
        raise TypeError(f"export_piece_by_piece: args must be a tuple, not a {type(args).__qualname__}")
    check_tolerances(atol, rtol)
    limit = _check_bytes(model, check_bytes)
    _check_mode(model, strict)
    unchecked = why_no_values(model, describe(args, dict(kwargs or {})).tensors)
    examples, specs, notes, references, names, partition = _examples(model, args, dict(kwargs or {}), dynamic_shapes, unchecked is not None)
    result, guarded = _export(model, examples, specs, list(notes), references, names, partition, classes, Verdict(atol, rtol), unchecked, limit, start)
    if result.report.passed is False and classes is None and guarded:
        # Note [guards on a hint]: the same search with the guarded hints named, which torch.export then refuses at
        # the guard, naming the module that made it, which goes behind an operator
        label = _dim_labels(model, examples[0])
        named = named_hints(specs, partition, guarded, label)
        note = f"{', '.join(sorted(label(g) for g in guarded))} declared by hints, on which the program took a guard that sizes of its range break: searched again with each named (Note [guards on a hint])"
        _log.info("%s", note)
        try:
            retry, _ = _export(model, examples, named, [*notes, note], references, names, partition, classes, Verdict(atol, rtol), unchecked, limit, start)
        except PieceByPieceExportError:  # the first search's verdict says more
            retry = None
        if retry is not None and retry.report.passed is not False:
            result.close()
            result = retry
        elif retry is not None:
            retry.close()
    # Note [guards on a hint]: with classes=, no search to run again, but the module whose code took the guard is named
    cause = _guard_owner(model, examples, specs, partition, guarded, classes) if result.report.passed is False and classes is not None else None
    if cause is not None:
        result.report.notes.append(cause)
    if result.report.passed is False and strict:
        raise ExportMismatchError(_mismatch(result.report, cause), result.report, result)
    return result


def _guard_owner(model: torch.nn.Module, examples: list[Example], specs: list[DimSpec | None], partition: dict[str, str] | None,
                 guarded: set[str], classes: Any) -> str | None:  # fmt: skip
    """Why the program of an export with ``classes`` refuses sizes of the ``guarded`` hints that eager runs (Note
    [guards on a hint]): the module outside ``classes`` whose code took the guard, the guard, and torch's fix, from
    one attempt of the same cut with those hints named, where torch.export fails at the guard; None when it does
    not fail so, or no hint took a guard (the refusals' advice then stands alone)."""
    from ..custom_op import submodules_of

    if not guarded:
        return None
    label = _dim_labels(model, examples[0])
    chosen = submodules_of(model, classes, "export_piece_by_piece")
    job = Job(model, examples, named_hints(specs, partition, guarded, label), [])
    try:
        job.set_cut([p for p, _ in chosen])
        _, exc, watch, _ = job.attempt()
        failure = None if exc is None else Failure.of(exc)
        if exc is None or failure is None or failure.kind != CONSTRAINT:
            return None
        owners = [p for p in watch.blame(exc) if not job.covered(p)]
    finally:
        job.close()
    if not owners:  # a guard no module outside the pieces is blamed for: nothing more to name
        return None
    fix = failure.fix
    kinds = sorted({type(model.get_submodule(p)).__name__ for p in owners if p})
    who = ", ".join(f"{p} ({type(model.get_submodule(p)).__name__})" if p else "the model's own forward" for p in owners)
    guards = "; ".join(watch.details[p] + (f", taken at {watch.places[p]}" if p in watch.places else "") for p in owners if p in watch.details)
    taken = ", ".join(dict.fromkeys(type(m).__name__ for _, m in chosen))
    dims = ", ".join(sorted(label(g) for g in guarded))
    return (
        f"{who}, not behind an operator with classes=({taken}), guards {dims}, declared by a hint (Dim.DYNAMIC, Dim.AUTO, "
        "or AdditionalInputs)" + (f": {guards}" if guards else "")
        + "; torch.export keeps a guard on a hint without error, and the program refuses the sizes past it. "
        + f"Declare {dims} with a named torch.export.Dim within the guard" + (f" (torch's suggested fix: {fix})" if fix else "")
        + (f", add {' and '.join(kinds)} to classes" if kinds else "") + ", or pass classes=None to find the cut automatically"
    )


def _export(model: torch.nn.Module, examples: list[Example], specs: list[DimSpec | None], notes: list[str], references: list[list[Any]],
            names: list[str], partition: dict[str, str] | None, classes: Any, verdict: Verdict, unchecked: str | None, limit: int | None,
            start: float) -> tuple[PieceByPieceExport, set[str]]:  # fmt: skip
    """One export of ``model`` with these dynamic ``specs``: the cut found or given, the checks, the result; and the
    hints whose guards its program took and sizes of the declared ranges broke (Note [guards on a hint])."""
    job = Job(model, examples, specs, notes, verdict, unchecked, limit)
    try:
        if classes is None:
            job.set_cut([])
            program = job.search()
        else:
            program = job.export_with_classes(classes)
        checks, own, whole = _checks(job, model, program, references, names, partition)
    except BaseException:
        job.close()
        raise
    report = job.report(whole, "automatic" if classes is None else "classes", checks, own, time.perf_counter() - start)
    n = len(report.behind_operators)
    _log.info("%s exported piece by piece in %.1f s: %d piece%s behind operators", type(model).__name__, time.perf_counter() - start, n, "s" * (n != 1))
    result = PieceByPieceExport(
        program, dict(report.pieces), report, job.flat.call, examples[0].key, job.saved_pieces(own), job.namespace, job.close
    )
    result._for_onnx(
        model, examples[0], [(list(e.tensors), r) for e, r in zip(examples, references, strict=True)], job.piece_calls(), specs, job.by_size,
        (verdict.atol, verdict.rtol),
    )
    return result, set(job.guarded_hints)


def _checks(job: Job, model: torch.nn.Module, program: Any, references: list[list[Any]], names: list[str],
            partition: dict[str, str] | None) -> tuple[dict[str, Any], dict[str, Any], float | None]:  # fmt: skip
    """Every check of an export (Note [the verdict]): each piece against its module, each piece's own program
    (automatic mode too: a piece cut for a reason that held only in the model's context exports alone), the
    program against eager on the examples and across
    the declared ranges."""
    own = job.own_programs()  # first: without values, identical pieces take their twin's checks
    checks = job.check_pieces()
    whole = job.check_program(program, references, names)
    if job.unchecked is None:  # the ranges' points compare values: none to compare without them
        checked = job.check_ranges(program, lambda e: _eager(model, e)[0], names, _dim_labels(model, job.examples[0]), partition)
        if checked:
            job.notes.append(checked)
    job.hints_at_guarded_examples(partition)
    return checks, own, whole


# The checks' default limit (Note [checks in bounded memory]): a share of the weights, so that they cost little
# beside the model (issue 28: export, save and to_onnx within 1.3x the weights; a check holds about four times
# its inputs at its peak), and enough for any small model.
_CHECK_SHARE, _CHECK_FLOOR = 64, 32 << 20


def _check_bytes(model: torch.nn.Module, given: Any) -> int:
    """The checks' limit in bytes (Note [checks in bounded memory]): ``given``, or by default 1/64 of the bytes
    of the model's weights, at least 32 MiB."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 0:
            raise PieceByPieceExportError(f"export_piece_by_piece: check_bytes must be an int >= 0 (bytes) or None, not {given!r}")
        return given
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}
    return max(_CHECK_FLOOR, sum(t.numel() * t.element_size() for t in tensors.values()) // _CHECK_SHARE)


def _mismatch(report: ExportReport, cause: str | None = None) -> str:
    """The message of :class:`ExportMismatchError`: what failed, by how much, and how to go on; first the
    ``cause`` of refusals at sizes past a guard on a hint, when it is known (Note [guards on a hint])."""
    name = report.model_class.__name__
    if cause is not None:
        lines = [f"export_piece_by_piece: the program of the {name} refuses sizes of the declared ranges that eager runs, as {cause}"]
    else:
        lines = [f"export_piece_by_piece: the export of the {name} does not match eager: {', '.join(report.failed)}"]
    for who, piece in [("(model)", report.root), *report.pieces.items()]:
        lines += [f"  {who} {o.line()}" for o in piece.outputs if not o.passed][:8]
    lines += [f"  (model) {r}" for r in report.refused[:8]]
    if cause is not None:
        lines.append("Pass strict=False to get the export back (the error's .result holds it too): its program takes the sizes the guard holds for.")
    else:
        lines.append(
            "Check that the model is in eval mode and deterministic; pass atol=/rtol= if the differences are expected, "
            "or strict=False to get the export back (the error's .result holds it too) with its report."
        )
    return "\n".join(lines)


def _check_mode(model: torch.nn.Module, strict: bool) -> None:
    """Refuse a model whose dropout is active (training mode, a probability above 0: its outputs are random and
    no program can match them), by the names of those modules; warn for batch norms in training mode (they
    compute with the batch's statistics and update their running ones)."""
    import warnings

    random, batch_stats = [], []
    for name, m in model.named_modules():
        if not m.training:
            continue
        dropout = isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0
        # transformers' attentions call functional dropout with this rate while training
        functional = isinstance(getattr(m, "attention_dropout", None), float) and m.attention_dropout > 0
        if dropout or functional:
            random.append(name or "(model)")
        elif isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            batch_stats.append(name or "(model)")
    if random:
        message = (
            f"export_piece_by_piece: the {type(model).__name__} is in training mode with active dropout ({_some(random)}): "
            "its outputs are random and no program can match them; call model.eval() first"
        )
        if strict:
            raise PieceByPieceExportError(message)
        warnings.warn(message, stacklevel=3)
    if batch_stats:
        warnings.warn(
            f"export_piece_by_piece: the {type(model).__name__} is in training mode: its batch norms ({_some(batch_stats)}) "
            "normalize with each batch's statistics; call model.eval() first for inference", stacklevel=3,
        )  # fmt: skip


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _examples(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, valueless: bool) -> tuple[
    list[Example], list[DimSpec | None], list[str], list[list[Any]], list[str], dict[str, str] | None
]:  # fmt: skip
    """The examples (the user's, and more given or made), the flat specs, notes for the report, each
    example's eager output as flat tensors, the names of those tensors, and how the hints move together
    (Note [a second example]); a ``valueless`` model's outputs have shapes and no values (Note [exports without
    values])."""
    first = describe(args, kwargs)
    notes: list[str] = []
    if isinstance(dynamic_shapes, torch.export.AdditionalInputs):
        others = [describe(tuple(a), dict(k or {})) for a, k in dynamic_shapes._examples]
        examples = [first, *others]
        specs = varying_dims(examples)
        notes.append(f"dynamic dimensions from {len(examples)} examples (torch.export.AdditionalInputs)")
        eager = [_eager(model, e, valueless) for e in examples]
        return examples, specs, notes, [flat for flat, _ in eager], eager[0][1], observed_partition(examples, specs)
    specs = flat_specs(model.forward, first, dynamic_shapes)
    check_dims(first, specs, _dim_labels(model, first))
    examples = [first]
    reference, names = _eager(model, first, valueless)
    references = [reference]
    labels = _dim_labels(model, first)
    kept, partition, refused = _second_example(model, first, specs, labels, valueless)
    if kept is not None:
        second, reference, changed = kept
        examples.append(second)
        references.append(reference)
        notes.append(f"a second example was made from the first ({changed})")
    elif refused:
        notes.append(f"no second example: {'; then '.join(refused)}")
    return examples, specs, notes, references, names, partition


def _second_example(model: torch.nn.Module, first: Example, specs: list[DimSpec | None], labels: Any, valueless: bool = False) -> tuple[
    tuple[Example, list[Any], str] | None, dict[str, str] | None, list[str]
]:  # fmt: skip
    """The second example (Note [a second example]): the finest grouping of the hints the model accepts, with
    eager's outputs and the sizes changed; the grouping; what the model refused on the way."""
    refused: list[str] = []
    kept: tuple[Example, list[Any], str] | None = None
    partition: dict[str, str] | None = None

    def attempt(trial: dict[str, str] | None, only: Any = None) -> bool:
        nonlocal kept, partition
        try:
            made = stretched(first, specs, trial, only)
        except ValueError as exc:  # a cache refuses to be rebuilt with sizes its tensors must share (keys and values)
            if kept is None:
                refused.append(f"the example's caches refused it stretched: {Failure.of(exc).message}")
            return False
        if made is None:
            return False
        second_args, second_kwargs, sizes = made
        changed = ", ".join(f"{labels(name)}: {old} -> {new}" for name, (old, new) in sizes.items())
        try:  # a cache may refuse sizes its tensors must share (the batch of keys and values) before the model does
            second = describe(second_args, second_kwargs)
            reference = _eager(model, second, valueless)[0]
        except Exception as exc:  # the model refuses these sizes: a coarser grouping, or one example only
            if kept is None:
                refused.append(f"the model refused the first one stretched ({changed}): {Failure.of(exc).message}")
            return False
        kept, partition = (second, reference, changed), trial
        return True

    trials = hint_partitions(first, specs)
    trial = next(trials, None)
    if trial is None:
        attempt(None)
        return kept, partition, refused
    apart = trial
    try:
        while True:
            trial = trials.send(attempt(trial))
    except StopIteration:
        pass
    if kept is None:  # each hint alone, then together those the model takes changed alone
        free = [name for name in apart if _accepts(model, first, specs, apart, name, valueless)]
        if free:
            attempt(apart, set(free))
    return kept, partition, refused


def _accepts(model: torch.nn.Module, first: Example, specs: list[DimSpec | None], apart: dict[str, str], name: str, valueless: bool = False) -> bool:
    try:
        made = stretched(first, specs, apart, {name})
        if made is None:
            return False
        _eager(model, describe(made[0], made[1]), valueless)
    except Exception:  # the model takes no other size of that dimension alone
        return False
    return True


def _dim_labels(model: torch.nn.Module, example: Example) -> Any:
    """A function naming a dimension group of :func:`._examples.groups` for people: a Dim's name as it is, a
    hint's place ``#0.1`` as ``input_ids dim 1``."""
    from ..onnx_export._names import input_names

    try:
        inputs = input_names(model.forward, example.args, example.kwargs)
    except Exception:  # a name is a courtesy; the place is still right
        inputs = []

    def label(name: str) -> str:
        if not name.startswith("#"):  # a group name of _examples: "#<tensor>.<dim>" for a hint, else a Dim's name
            return name
        tensor, _, dim = name[1:].partition(".")
        i = int(tensor)
        return f"{inputs[i] if i < len(inputs) else f'tensor {i}'} dim {dim}"

    return label


def _eager(model: torch.nn.Module, example: Example, valueless: bool = False) -> tuple[list[Any], list[str]]:
    """The model's own output on a copy of ``example``, as flat tensors (the output, then the caches after), and
    their names. A ``valueless`` model runs on the tracing path, where transformers takes no data-dependent
    branch (Note [exports without values]); its outputs have shapes and no values."""
    from ..custom_op._calls import flat_outputs, rebuild_arguments
    from ._result import output_names_of

    args, kwargs = rebuild_arguments(example.call, make_copy(list(example.tensors)))
    with tracing_path() if valueless else torch.no_grad():
        output = model(*args, **kwargs)
    given = [*args, *kwargs.values()]
    caches = [given[i] for i in example.call.caches]
    return flat_outputs("the model", output, caches)[1], output_names_of(model, example.call, args, kwargs, output)


@dataclass(frozen=True)
class RecordedCall:
    """One call of a submodule, recorded by :func:`record_calls`: copies of the positional and keyword arguments
    it received (keywords as the caller gave them) and of what it returned."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any


def record_calls(
    model: torch.nn.Module, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, *,
    classes: Any = None, paths: Any = None,
) -> dict[str, list[RecordedCall]]:  # fmt: skip
    """Run ``model`` once on an example call and record every call of some of its submodules: the example
    inputs of each, with their keyword names, to export it or test it on its own.

    The submodules are those of ``classes`` (a class, a class name or a tuple of them, as in
    :func:`export_piece_by_piece`) or at ``paths`` (dotted paths relative to ``model``, one or a sequence):
    give exactly one. The run takes the path torch.export's tracing takes (Note [the tracing path]: an all-ones
    attention mask transformers drops in eager mode is built, as under export), without grad; ``model``, its
    arguments and any cache among them are left as they were, and each recorded value is a copy of its own.

    Returns a dict from each chosen path to its calls, in call order (empty for a module not called).
    Raises ``TypeError`` for a ``model`` that is no module or ``args`` that are no tuple, ``ValueError`` for
    classes that name nothing in the model (the message lists its classes), a path that names no submodule,
    and both or neither of ``classes`` and ``paths``.

    Example::

        calls = record_calls(model, (input_ids,), classes="LlamaDecoderLayer")
        first = calls["model.layers.0"][0]
        program = torch.export.export(model.model.layers[0], first.args, first.kwargs)
    """
    from ..custom_op import submodules_of

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"record_calls: expected a torch.nn.Module, got {type(model).__qualname__}")
    if not isinstance(args, tuple):
        raise TypeError(f"record_calls: args must be a tuple, not a {type(args).__qualname__}")
    if (classes is None) == (paths is None):
        raise ValueError("record_calls: give the submodules to record by classes= or by paths=, not both, not neither")
    if classes is not None:
        watched = dict(submodules_of(model, classes, "record_calls"))
    else:
        watched = {}
        for path in [paths] if isinstance(paths, str) else list(paths):
            try:
                watched[path] = model.get_submodule(path)
            except AttributeError:
                raise ValueError(f"record_calls: {path!r} names no submodule of the {type(model).__qualname__}") from None
    recording = run_recording(lambda a, k: model(*a, **k), (args, dict(kwargs or {})), module_paths(model), watched)
    return {
        path: [RecordedCall(tuple(c.args), dict(c.kwargs), c.output) for c in recording.calls.get(path, [])]
        for path in watched
    }
