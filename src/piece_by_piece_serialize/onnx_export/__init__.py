"""ONNX, piece by piece: each piece a local function, identical pieces one function, checked by onnxruntime.

:meth:`PieceByPieceExport.to_onnx <piece_by_piece_serialize.export.PieceByPieceExport.to_onnx>` writes an ONNX
model through ``torch.onnx.export(dynamo=True)``: the top program's graph with one node per piece, each a call
of an ONNX local function of the domain ``pbp.pieces`` that takes the piece's inputs and its weights (Note
[identical pieces]: pieces that compute the same function share one, so an N-layer model exports its layer
once). Dynamic dimensions are kept; inputs and outputs get readable names (``past.layers.0.keys``). The model
passes ``onnx.checker.check_model(full_check=True)``; onnxruntime runs it on every example and each function on
each of its pieces' recorded calls, against eager. An operator torch.onnx does not know (a library's custom
operator, transformers' experts) is written through a translation (:mod:`._translations`): the library's, or the
user's, given to ``to_onnx(translations=...)``; one without is named before anything is exported.

Invariants: a piece without a program of its own (its export failed) is refused by name, with why, never
written as a broken model; the model is saved only after the checker passed.

Note [onnxruntime's verdict]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A difference is a finding only against a tolerance (Note [the verdict] in ..export). onnxruntime's outputs, the
model's on every example and each function's on its pieces' calls, are judged against eager with the export's
own rule and tolerances (``tolerance``: an output's dtype to (atol, rtol)); what is outside is listed in
:attr:`OnnxExport.differs`, named (``output.logits``, ``model.layers.0's output 2``) with its largest
difference, and ``to_onnx`` raises on it unless told not to (``strict=False``). Before, the differences were only
numbers in the result: a tiny AFMoE, whose router is initialized to zero so that its 64 experts tie, came back
from ``to_onnx`` with onnxruntime 0.11 away from eager (its TopK breaks the ties otherwise) and nothing said so.

Imports: :mod:`..custom_op` and :mod:`..serialize` (names of the flat tensors), :mod:`..domains` (a program's
input sizes) and :mod:`.._closeness` (the element rule of the checks); onnx, onnxscript and onnxruntime (the
``onnx`` extra) and torch, on use.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domains import DomainError, domain_of
from ._by_size import Variant, by_size_function, check_main_graph, rename_values
from ._complex import as_real
from ._dims import rename_dims
from ._errors import OnnxExportError
from ._functions import DOMAIN, Function, callee, export_function
from ._optimize import optimize
from ._pieces import PrunedPiece, prune
from ._translations import check_translated, translation_table
from ._verify import NoKernelError

__all__ = ["OnnxExport", "OnnxPiece", "OnnxExportError", "write_onnx", "DOMAIN"]


@dataclass
class OnnxPiece:
    """What the export knows of one piece behind an operator, for its ONNX function."""

    path: str
    qualname: str  # the operator, namespace::name
    program: Any  # its own exported program (weights, then tensors, as inputs), or None
    why_not: str  # why it has no program, when it has none
    program_key: str | None = None  # the call structure its program computes (Note [call keys])
    calls: list[tuple[list[Any], list[Any]]] = field(default_factory=list)  # recorded (inputs, eager outputs)
    # without a program of its own, its programs by size: each with its domain and the sizes of the call it was
    # exported from (Note [pieces by size])
    by_size: Sequence[tuple[Any, Any, str]] = ()


@dataclass
class OnnxExport:
    """What :func:`write_onnx` wrote: the functions and the pieces that call each, the differences against eager."""

    path: str
    functions: dict[str, list[str]]  # function name -> piece paths
    piece_diffs: dict[str, float]  # piece path -> max |onnxruntime - eager| over its recorded calls
    model_diff: float  # max |onnxruntime - eager| over the examples
    seconds: float
    size: int  # bytes of the file
    # why onnxruntime's checks did not run (the differences are then NaN): no values, or no kernel for a dtype
    not_checked: str | None = None
    # what onnxruntime computed outside the tolerances against eager (Note [onnxruntime's verdict])
    differs: tuple[str, ...] = ()


# Progress, for users who turn it on (logging.INFO; docs/export.md, "Progress").
_log = logging.getLogger("piece_by_piece_serialize.onnx_export")


def write_onnx(
    path: str, *, program: Any, pieces: Sequence[OnnxPiece], examples: Sequence[tuple[list[Any], list[Any]]],
    input_names: Sequence[str], output_names: Sequence[str], opset: int | None = None,
    translations: Mapping[Any, Callable[..., Any]] | None = None, dim_names: Sequence[Mapping[int, str]] = (),
    stream: Callable[[str, Any], Any] | None = None, tolerance: Callable[[Any], tuple[float, float]] | None = None,
) -> OnnxExport:  # fmt: skip
    """Write ``program`` (the top program of a piece-by-piece export) as an ONNX model at ``path``, each piece an
    ONNX local function, and check it with onnxruntime (see the module docstring). ``translations`` maps an
    operator the programs call to its ONNX translation (:mod:`._translations`), before the library's own;
    ``dim_names[i][d]`` is the user's name of axis ``d`` of input ``i`` (:mod:`._dims`). ``tolerance`` gives
    (atol, rtol) for an output's dtype: what onnxruntime computes outside it is listed in ``differs`` (Note
    [onnxruntime's verdict]).

    ``stream``, for a program whose weights have no values (Note [external weights]), gives the tensor of
    an initializer from its name and the program's tensor (``None``: the program's tensor has values and is kept);
    onnxruntime's checks then do not run (``examples`` have no values either) and the differences are NaN."""
    start = time.perf_counter()
    with _quiet_registry():
        return _write(path, program, pieces, examples, input_names, output_names, opset, translations, dim_names, start, stream, tolerance)


@contextlib.contextmanager
def _quiet_registry() -> Iterator[None]:
    """torch.onnx warns, on every export, about torchvision operators it cannot register when torchvision is not
    installed, and torch's treespecs about their own deprecated class when an exported program is copied; neither
    is the user's to act on, so both are held back while this module exports."""
    log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = log.level
    log.setLevel(max(level, logging.ERROR))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)
            yield
    finally:
        log.setLevel(level)


def _write(
    path: str, program: Any, pieces: Sequence[OnnxPiece], examples: Sequence[tuple[list[Any], list[Any]]],
    input_names: Sequence[str], output_names: Sequence[str], opset: int | None,
    translations: Mapping[Any, Callable[..., Any]] | None, dim_names: Sequence[Mapping[int, str]], start: float,
    stream: Callable[[str, Any], Any] | None = None, tolerance: Callable[[Any], tuple[float, float]] | None = None,
) -> OnnxExport:  # fmt: skip
    import onnx

    _refuse_untranslated(pieces, translations)
    given = translation_table([], translations)
    # a piece the user translated is written by that translation, in the main graph; no function of its own
    sized = [p for p in pieces if p.program is None and p.by_size and overload_of(p.qualname) not in given]
    pieces = [p for p in pieces if p.program is not None]
    by_object: dict[int, PrunedPiece] = {}  # identical pieces share one program object (Note [shared programs])
    for p, own in [*((q, q.program) for q in pieces), *((q, v) for q in sized for v, *_ in q.by_size)]:
        if id(own) not in by_object:
            by_object[id(own)] = cut = prune(own)
            cut.program = as_real(cut.program, f"the program of {p.path}")
    pruned = {p.path: by_object[id(p.program)] for p in pieces}
    operators = translation_table([program, *(cut.program for cut in by_object.values())], translations)
    cuts = [*((p, pruned[p.path]) for p in pieces), *((p, by_object[id(v)]) for p in sized for v, *_ in p.by_size)]
    functions, names = _functions(cuts, opset, operators)
    table = dict(operators)
    for piece in pieces:
        cut = pruned[piece.path]
        fn = functions[names[cut.key]]
        table[overload_of(piece.qualname)] = _translation(callee(names[cut.key], fn.n_inputs, fn.n_outputs), cut, fn.n_outputs)
    dispatchers = _by_size(sized, by_object, names, functions, table)
    ours = {overload_of(p.qualname) for p in pieces}
    weights = {node.target: len(node.args[1]) for node in program.graph.nodes if node.op == "call_function" and node.target in ours}
    wrappers = _checked(pieces, pruned, names, functions, table, weights)  # not counted below: each calls a function
    checks = _checks_of(pieces, pruned, sized, by_object)
    _check_calls(program, {overload_of(p.qualname): p for p in [*pieces, *sized]})
    check_translated(program, "the top program", table)
    _log.info("the main graph: %d piece call(s) of %d function(s)", len(pieces) + len(sized), len(functions) + len(dispatchers))
    top = program  # its domain is read on its own inputs; as_real keeps their sizes, and adds an axis to complex ones
    program = as_real(program, "the top program")  # a copy, when it computes in complex numbers
    exported = _export_main(program, opset, table, [*pieces, *sized])
    if exported is None:  # pragma: no cover - dynamo=True always returns a program; None is the TorchScript route's
        raise OnnxExportError("to_onnx: torch.onnx.export returned no program")
    if stream is None:  # weights without values cannot be folded, and are not read here
        _optimize(exported.model)
    shared = _external_initializers(exported.model, stream or _in_memory, path)
    model = exported.model_proto
    _rename_io(model, list(input_names), list(output_names))
    rename_dims(model, program, input_names, dim_names)
    _check_sizes(model.graph, top)
    for fn in functions.values():
        model.functions.extend([fn.proto, *fn.helpers])
    model.functions.extend([*dispatchers, *wrappers])
    model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, 1))
    # the checker reads the external data where the model is: the model is saved first, and removed if refused
    onnx.save(model, path)
    del model  # the proto holds no weight, but nothing of it is needed any more
    try:
        onnx.checker.check_model(path, full_check=True)
    except onnx.checker.ValidationError as exc:
        for written in (path, path + ".data"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(written)
        raise OnnxExportError(f"to_onnx: the ONNX model does not pass onnx.checker: {exc}") from None
    size = sum(os.path.getsize(f) for f in (path, path + ".data") if os.path.exists(f))
    nan = float("nan")
    if stream is not None:
        # nothing has values to run: the weights are in the file, the examples are not
        why = "the weights were read from a checkpoint and the examples have no values"
        return OnnxExport(path, _by_function(checks, names), {p: nan for p, _, _ in checks}, nan, time.perf_counter() - start, size, why)
    _log.info("onnxruntime: the model on %d examples and each function on its piece's calls", len(examples))
    try:
        model_diff, piece_diffs, differs = _run_checks(path, shared, examples, checks, names, functions, output_names, tolerance)
    except NoKernelError as exc:  # a valid model this onnxruntime cannot run here: written, and said so
        why = f"onnxruntime has no CPU kernel for one of its operators in its dtype ({exc}); run it where one exists"
        warnings.warn(f"to_onnx: {path} is written and passes onnx.checker, but its checks did not run: {why}", stacklevel=4)
        return OnnxExport(path, _by_function(checks, names), {p: nan for p, _, _ in checks}, nan, time.perf_counter() - start, size, why)
    return OnnxExport(path, _by_function(checks, names), piece_diffs, model_diff, time.perf_counter() - start, size, differs=differs)


# Note [the file's sizes]
# ~~~~~~~~~~~~~~~~~~~~~~~
# An exported program computes what eager does only where its trace's assumptions about sizes hold: torch checks
# them before it runs (its ranges and guards), an ONNX file checks nothing. Llama 4's decode step, whose cache keeps
# one attention chunk of keys (16 positions), exports with a guard that the count of past positions equals the
# keys' length, true below 16; at 30 past positions torch's program refuses the call, and the file, unchecked,
# returned a count tensor of 16 rows where eager's has 31. So the main graph computes the top program's domain
# (Note [domains] in ..domains) from its inputs' shapes, and its outputs pass one If that refuses, by name, the
# sizes the domain does not hold for (its other branch makes onnxruntime raise, as Note [pieces by size] says).
# A domain this library cannot read is said in a warning, and the file is written unchecked, as before.
def _functions(cuts: Sequence[tuple[OnnxPiece, PrunedPiece]], opset: int | None, operators: dict[Any, Any]) -> tuple[dict[str, Function], dict[str, str]]:
    """One function per distinct pruned program (Note [identical pieces]), by name, and each key's name: named after
    the first piece that has it, as its operator is (unique, as paths are); a piece's programs by size are
    ``<operator>__size<n>``, numbered in the file."""
    functions: dict[str, Function] = {}
    names: dict[str, str] = {}
    by_size = 0
    for piece, cut in cuts:
        if cut.key in names:
            continue
        names[cut.key] = piece.qualname.partition("::")[2]
        if piece.program is None:
            names[cut.key] += f"__size{by_size}"
            by_size += 1
        _log.info("ONNX function %d: %s, from the program of %s", len(names), names[cut.key], piece.path)
        check_translated(cut.program, f"the program of {piece.path}", operators)
        functions[names[cut.key]] = export_function(cut.program, names[cut.key], opset, operators)
    return functions, names


def _check_sizes(graph: Any, program: Any) -> None:
    """Note [the file's sizes]: the main graph refuses the sizes the top program's own check refuses."""
    try:
        domain = domain_of(program)
    except DomainError as exc:
        warnings.warn(f"to_onnx: the file does not check its inputs' sizes: the program's guards hold a form this library does not read ({exc})", stacklevel=5)
        return
    check_main_graph(graph, domain, "these input sizes are outside those the program was exported for (its guards and ranges, which torch checks too): export from examples of these sizes")


def _export_main(program: Any, opset: int | None, table: dict[Any, Any], pieces: Sequence[OnnxPiece]) -> Any:
    """torch.onnx.export of the top program; an operator that cannot give its output's sizes at the sizes torch.onnx
    traces it with (its learned shape rules do not cover them: Note [learned shapes] in :mod:`..custom_op`) is
    named with its piece, where torch would bury it in its own error."""
    import torch

    from ..custom_op import CustomOpError

    try:
        return torch.onnx.export(program, dynamo=True, verbose=False, opset_version=opset, custom_translation_table=table, optimize=False)
    except Exception as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, CustomOpError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        first = str(cause).splitlines()[0]
        owner = next((p.path for p in pieces if first.startswith(p.qualname + ":")), "a piece")
        raise OnnxExportError(
            f"to_onnx: the main graph cannot be written: the operator of {owner} cannot give its output's sizes at "
            f"other sizes than its recorded calls' ({first.partition(': ')[2].partition('; pass fake=')[0]}): its "
            "output's sizes follow its inputs' in a way its recorded calls do not show (the number of chunks it pads "
            "to, say)"
        ) from None


def _by_size(sized: Sequence[OnnxPiece], by_object: dict[int, PrunedPiece], names: dict[str, str], functions: dict[str, Function],
             table: dict[Any, Any]) -> list[Any]:  # fmt: skip
    """Each piece by size's function (Note [pieces by size]), its operator's translation added to ``table``."""
    entries = []
    for piece in sized:
        variants = []
        for own, domain, _ in piece.by_size:
            cut = by_object[id(own)]
            variants.append(Variant(cut, domain, names[cut.key], functions[names[cut.key]].n_outputs))
        sizes = "; ".join(where for *_, where in piece.by_size)
        refusal = f"has no program for these input sizes (it has {len(variants)} by size, from calls at {sizes})"
        entries.append((piece, piece.by_size[0][0], variants, refusal))
    return _dispatchers(entries, "__by_size", functions, table)


# Note [a piece's own sizes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A piece's own program computes what its module does only on the sizes it was exported for, and the top program's
# domain does not say them: the top trace runs the piece's fake implementation, which does not take the piece's
# ranges. A piece that doubles below 16 rows and triples from there, exported at 3 and 5 rows, has the range rows
# <= 15; the file computed it at 16 and 20 rows, doubling, where eager triples, and nothing said so. So the
# operator of a piece whose own program has such conditions calls ``<operator>__checked``, a function that
# computes the program's shapes and ranges (its domain without its guards, as torch checks a program's inputs and
# as the loaded archive checks them: Note [one check of the sizes] in ..artifact, which says why not the guards)
# and calls the program's function where they hold and refuses by name elsewhere: a piece by size with one
# program (Note [pieces by size]); identical pieces share it, as they share their program. The conditions on the
# piece's weights alone are left out: the file holds them as they were traced, and the check runs on every call
# (33 nodes for a layer of the tiny Llama, 42 with them).
def _checked(pieces: Sequence[OnnxPiece], pruned: dict[str, PrunedPiece], names: dict[str, str], functions: dict[str, Function],
             table: dict[Any, Any], weights: dict[Any, int]) -> list[Any]:  # fmt: skip
    """Each piece's own program checked by its domain (Note [a piece's own sizes]), its operator's translation
    replaced in ``table``; ``weights``: the count of each operator's weights, its program's first inputs, which the
    file holds as they were traced (the conditions on them alone are left out)."""
    entries = []
    for piece in pieces:
        try:
            domain = domain_of(piece.program, guards=False).reading(weights.get(overload_of(piece.qualname), 0))
        except DomainError as exc:
            warnings.warn(f"to_onnx: the calls of {piece.path} are not checked against its program's ranges, which hold a form this library does not read ({exc})", stacklevel=5)
            continue
        if not domain.conditions:
            continue
        cut = pruned[piece.path]
        variant = Variant(cut, domain, names[cut.key], functions[names[cut.key]].n_outputs)
        entries.append((piece, piece.program, [variant], "was not exported for these input sizes: its program's ranges refuse them; export from examples of these sizes"))
    return _dispatchers(entries, "__checked", functions, table)


def _dispatchers(entries: Sequence[tuple[OnnxPiece, Any, list[Variant], str]], suffix: str, functions: dict[str, Function],
                 table: dict[Any, Any]) -> list[Any]:  # fmt: skip
    """One function per distinct (piece, a program of it, its variants, the refusal's text), named after the first
    piece with ``suffix``; identical pieces share it, and each operator's translation in ``table`` calls it."""
    import onnx

    groups: dict[Any, list[tuple[OnnxPiece, Any, list[Variant], str]]] = {}
    for entry in entries:
        variants = entry[2]
        groups.setdefault((tuple((v.function, v.cut.inputs, v.cut.outputs, v.domain) for v in variants), entry[3]), []).append(entry)
    out = []
    for group in groups.values():
        piece, first, variants, refusal = group[0]
        n_inputs = len([s for s in first.graph_signature.input_specs if s.kind.name == "USER_INPUT"])
        dtypes = [node.meta["val"].dtype for node in next(n for n in first.graph.nodes if n.op == "output").args[0]]
        name = piece.qualname.partition("::")[2] + suffix
        opsets = [o for o in functions[variants[0].function].proto.opset_import if o.domain != DOMAIN]
        who = piece.path if len(group) == 1 else f"{piece.path} (or one of {len(group) - 1} pieces identical to it)"
        function, merged = by_size_function(name, variants, n_inputs, dtypes, [*opsets, onnx.helper.make_opsetid(DOMAIN, 1)], f"refused: {who} {refusal}")
        if suffix == "__by_size":
            _log.info("ONNX function %s: %s by size, %d programs", name, who, len(variants))
        else:
            _log.info("the sizes of %s checked by its function %s", who, name)
        out.append(function)
        n_outputs = sum(computed for computed, _ in merged)
        cut = PrunedPiece(None, tuple(range(n_inputs)), merged, name)
        for member, *_ in group:
            table[overload_of(member.qualname)] = _translation(callee(name, n_inputs, n_outputs), cut, n_outputs)
    return out


def _refuse_untranslated(pieces: Sequence[OnnxPiece], translations: Mapping[Any, Callable[..., Any]] | None) -> None:
    """Refuse, naming them and the hook, the pieces that have no program of their own and no translation."""
    given = translation_table([], translations)  # the user's, keyed by overload
    missing = [p for p in pieces if p.program is None and not p.by_size and overload_of(p.qualname) not in given]
    if missing:
        listed = "; ".join(f"{p.path} ({p.why_not})" for p in missing)
        hook = ", ".join(f"torch.ops.{'.'.join(p.qualname.partition('::')[::2])}.default: function" for p in missing)
        raise OnnxExportError(
            f"to_onnx: pieces without a program of their own cannot be ONNX functions: {listed}; give each its ONNX "
            f"translation with to_onnx(..., translations={{{hook}}}), a function of the operator's (tensors, "
            "weights, call) returning the list of its flat outputs (docs/onnx.md, 'Operators without a translation')"
        )


def _run_checks(
    path: str, shared: Any, examples: Sequence[tuple[list[Any], list[Any]]], checks: Sequence[tuple[str, PrunedPiece, list[Any]]],
    names: dict[str, str], functions: dict[str, Function], output_names: Sequence[str],
    tolerance: Callable[[Any], tuple[float, float]] | None,
) -> tuple[float, dict[str, float], tuple[str, ...]]:  # fmt: skip
    """onnxruntime against eager: the written model on every example, each function on its pieces' calls
    (``checks``: a piece, the pruned program that computes some of its calls, and those calls); and what is
    outside ``tolerance`` (Note [onnxruntime's verdict])."""
    from ._verify import compare, runner

    differs: dict[str, float] = {}

    def judged(what: Callable[[int], str], want: list[Any], got: list[Any]) -> float:
        worst, outside = compare(want, got, tolerance)
        for i, diff in outside:
            differs[what(i)] = max(diff, differs.get(what(i), 0.0))
        return worst

    run = runner(path, shared)
    model_diff = max((judged(lambda i: output_names[i], expected, run(inputs)) for inputs, expected in examples), default=0.0)
    piece_diffs: dict[str, float] = {}
    runs: dict[str, Any] = {}  # one onnxruntime session per function, for all its pieces' calls
    for piece, cut, calls in checks:
        name = names[cut.key]
        fn = functions[name]
        run = runs[name] if name in runs else runs.setdefault(name, runner(fn.model))
        computed = {k: j for j, (is_computed, k) in enumerate(cut.outputs) if is_computed}  # function output -> operator output
        piece_diffs.setdefault(piece, 0.0)
        named = functools.partial(_piece_output, piece, computed)
        for inputs, outputs in calls:
            want = [outputs[computed[k]] for k in range(fn.n_outputs)]
            piece_diffs[piece] = max(piece_diffs[piece], judged(named, want, run([inputs[i] for i in cut.inputs])))
    return model_diff, piece_diffs, tuple(f"{what} (max |diff| {diff:.3g})" for what, diff in differs.items())


def _piece_output(piece: str, computed: Mapping[int, int], k: int) -> str:
    """Output ``k`` of a piece's function, named as the piece's operator output it is."""
    return f"{piece}'s output {computed[k]}"


def _checks_of(pieces: Sequence[OnnxPiece], pruned: dict[str, PrunedPiece], sized: Sequence[OnnxPiece],
               by_object: dict[int, PrunedPiece]) -> list[tuple[str, PrunedPiece, list[Any]]]:  # fmt: skip
    """What onnxruntime checks: each piece's calls on its pruned program; a piece by size's, each on the program
    whose domain holds for it (Note [pieces by size])."""
    out = [(p.path, pruned[p.path], p.calls) for p in pieces]
    for piece in sized:
        for number, (own, domain, _) in enumerate(piece.by_size):
            earlier = [d for _, d, _ in piece.by_size[:number]]
            mine = [c for c in piece.calls if _holds(domain, c[0]) and not any(_holds(d, c[0]) for d in earlier)]
            out.append((piece.path, by_object[id(own)], mine))
    return out


def _holds(domain: Any, inputs: Sequence[Any]) -> bool:
    return bool(domain.holds([tuple(t.shape) for t in inputs]))


def _by_function(checks: Sequence[tuple[str, PrunedPiece, list[Any]]], names: dict[str, str]) -> dict[str, list[str]]:
    """Each function's name and the pieces that call it."""
    out: dict[str, list[str]] = {}
    for path, cut, _ in checks:
        paths = out.setdefault(names[cut.key], [])
        if path not in paths:
            paths.append(path)
    return out


def _optimize(model: Any) -> None:
    """torch.onnx's optimizer (onnxscript's, in linear time: Note [a linear optimizer]), in place, but for its
    folding of a weight: it folds a weight's ``Transpose`` into a transposed copy (an lm_head's: +131 MB at the peak
    of a 1B bfloat16 model's ``to_onnx``), and the file would no longer hold the model's weights as the model holds
    them (Note [external weights]): no node reading an initializer the file keeps outside (of
    :data:`_EXTERNAL_FROM` bytes or more) is folded."""

    def weight_of(node: Any) -> bool | None:  # False: not folded; None: onnxscript's own rules
        weights = [v for v in node.inputs if v is not None and v.is_initializer() and v.const_value is not None and v.const_value.nbytes >= _EXTERNAL_FROM]
        return False if weights else None

    optimize(model, should_fold=weight_of)  # Note [a linear optimizer]

# Initializers smaller than this stay in the model file (as onnx.save's size_threshold): shapes, scalars.
_EXTERNAL_FROM = 1024


# numpy dtypes of ml_dtypes (which onnx_ir computes in) -> the unsigned integer of their bits, torch's dtype
_BITS = {"bfloat16": ("uint16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"), "float8_e5m2": ("uint8", "float8_e5m2")}


def _in_memory(name: str, tensor: Any) -> Any:
    """An initializer's tensor to write as external data: the program's own, unless it is small."""
    import numpy
    import torch

    if isinstance(tensor, numpy.ndarray) and tensor.nbytes >= _EXTERNAL_FROM:  # one the optimizer computed
        try:
            return torch.from_numpy(tensor)
        except TypeError:  # a dtype torch does not read from numpy: ml_dtypes' bfloat16, viewed through its bits
            bits = _BITS.get(tensor.dtype.name)
            # otherwise it stays in the model (a folded bfloat16 lm_head did: 131 MB in the proto of a 1B model)
            return None if bits is None else torch.from_numpy(tensor.view(bits[0])).view(getattr(torch, bits[1]))
    if isinstance(tensor, torch.Tensor) and tensor.numel() * tensor.element_size() >= _EXTERNAL_FROM:
        return tensor
    return None


def _external_initializers(model: Any, tensor_of: Callable[[str, Any], Any], path: str) -> dict[str, Any]:
    """Note [external weights]: each initializer ``tensor_of`` gives a tensor for (from memory, or read from a
    checkpoint: Note [streamed weights]) is written, one at a time, to the external-data file beside ``path``
    (``<name>.data``) and becomes a reference to its bytes there; the others stay in the model as they are. So
    no copy of the weights is made in a proto, its serialization or the checker, whatever the model's size (and
    a model above protobuf's 2 GB is written at all). Returns the tensors written that are the program's own
    (in memory), by initializer name, for onnxruntime to use in place (:func:`._verify.runner`)."""
    import numpy
    import onnx_ir as ir
    import torch

    location = os.path.basename(path) + ".data"
    directory = os.path.dirname(os.path.abspath(path))
    offset = 0
    shared: dict[str, Any] = {}
    with open(os.path.join(directory, location), "wb") as data:
        for name, value in model.graph.initializers.items():
            raw = getattr(value.const_value, "raw", None)
            tensor = tensor_of(name, raw)
            if tensor is None:
                continue
            if tensor is raw or isinstance(raw, numpy.ndarray):
                shared[name] = tensor
            contiguous = tensor.contiguous()
            nbytes = contiguous.numel() * contiguous.element_size()
            data.write(memoryview(contiguous.reshape(-1).view(torch.uint8).numpy()))
            value.const_value = ir.ExternalTensor(location, offset, nbytes, value.dtype, shape=value.shape, name=name, base_dir=directory)
            offset += nbytes
            del tensor, contiguous  # a tensor read from a checkpoint is dropped before the next is read
    return shared


def _check_calls(program: Any, by_operator: dict[Any, OnnxPiece]) -> None:
    """Every call of a piece in the program has the structure the piece's own program computes."""
    for node in program.graph.nodes:
        piece = by_operator.get(node.target) if node.op == "call_function" else None
        if piece is not None and piece.program_key is not None and node.args[-1] != piece.program_key:
            raise OnnxExportError(
                f"to_onnx: the program calls {piece.path} with {node.args[-1]}, but its own program computes {piece.program_key}"
            )


def overload_of(qualname: str) -> Any:
    """The overload ``torch.ops.<namespace>.<name>.default`` of a piece's operator ``namespace::name``, as the
    programs call it and translations are keyed."""
    import torch

    namespace, _, name = qualname.partition("::")
    return getattr(getattr(torch.ops, namespace), name).default


def _translation(op: Any, cut: PrunedPiece, n_outputs: int) -> Any:
    """How torch's exporter writes one call of the operator: the function on the kept inputs; an output the piece
    passes through is the input itself (every call has the structure the piece's program computes: _check_calls)."""

    def translate(tensors: Sequence[Any], weights: Sequence[Any], call: str) -> list[Any]:
        flat = [*weights, *tensors]
        results = op(*(flat[i] for i in cut.inputs))
        results = [results] if n_outputs == 1 else list(results)
        return [results[k] if computed else flat[k] for computed, k in cut.outputs]

    return translate


def _rename_io(model: Any, inputs: list[str], outputs: list[str]) -> None:
    """Give the graph's inputs and outputs the readable names, everywhere they are used."""
    graph = model.graph
    mapping = {}
    for value, name in zip(graph.input, inputs, strict=False):
        mapping[value.name] = name
    for value, name in zip(graph.output, outputs, strict=False):
        if value.name not in mapping:
            mapping[value.name] = name

    rename_values(graph, mapping, io=True)
