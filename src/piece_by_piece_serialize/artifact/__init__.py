"""One artifact for a model exported piece by piece: saved in one archive, loaded in a fresh process.

:meth:`PieceByPieceExport.save <piece_by_piece_serialize.export.PieceByPieceExport.save>` writes a PT2 archive
(Note [manifest] and :mod:`._write`): the top program, whose custom operators take their pieces' weights as
inputs, each distinct piece program, every weight once, and a manifest. :func:`load_piece_by_piece` reads it
without running anything of it (Note [safe loading]), registers the operators, each backed by its piece's
program (exact shapes under fake tensors too) or, for a piece that could not be exported, by the class or
instance the user passes in ``implementations=`` (Note [implementations]), and returns a module that takes
the model's own arguments and gives the model's own output.

Invariants: a bad archive (missing, truncated, not an archive, another format version, a manifest that
disagrees with its programs) raises :class:`ArtifactError` naming the file, or ``OSError`` for I/O, before
anything runs; nothing is unpickled, evaluated or imported by name; the loaded operators are registered while
the loaded module lives, and freed with it.

Imports: :mod:`..custom_op` (the call structure, the shape rules), :mod:`..serialize` and the languages below
them; torch.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from .._optional import import_torch

import_torch("load_piece_by_piece")  # the install line when torch is missing, before anything below imports it

import torch

from ..domains import Domain, DomainError, domain_of
from ._archive import Archive
from ._checkpoint import CheckpointError
from ._errors import ArtifactError
from ._manifest import FORMAT, VERSION, Manifest, OperatorRecord
from ._ops import LoadedOperator, call_of
from ._runnable import CallStructureError, FlatProgramModule
from ._state import check_instance, check_rebuildable, rebuild, resolve

__all__ = ["load_piece_by_piece", "LoadedPieceByPiece", "ArtifactError", "CheckpointError", "CallStructureError", "FORMAT", "VERSION"]


class LoadedPieceByPiece(FlatProgramModule):
    """A loaded artifact: call it with the model's own arguments. ``manifest`` says what it holds;
    :meth:`close` frees its operators (they are freed when it is garbage collected anyway)."""

    def __init__(self, program: Any, manifest: Manifest, operators: list[LoadedOperator]) -> None:
        # torch runs a loaded program without its guards (Note [guard cost]): they are checked here, as the ONNX
        # file checks them (Note [the file's sizes] in ..onnx_export), and in place of torch's own check of the
        # sizes (Note [one check of the sizes])
        try:
            domain: Domain | None = domain_of(program)
        except DomainError as exc:
            domain = None
            warnings.warn(f"load_piece_by_piece: calls are not checked against the program's guards, which hold a form this library does not read ({exc})", stacklevel=3)
        super().__init__(program, call_of(manifest.call), manifest.call.key, None, "load_piece_by_piece(...)", domain)
        self.__dict__["manifest"] = manifest
        self.__dict__["_finalizer"] = weakref.finalize(self, _close_all, operators)

    manifest: Manifest
    _finalizer: weakref.finalize  # type: ignore[type-arg]  # generic only in typeshed

    def close(self) -> None:
        """Free the operators now; the module cannot run afterwards."""
        self._finalizer()


def _close_all(operators: list[LoadedOperator]) -> None:
    for op in operators:
        op.close()


def load_piece_by_piece(path: str | os.PathLike[str], *, implementations: Sequence[Any] | Mapping[str, Any] = ()) -> LoadedPieceByPiece:
    """Load an artifact written by ``PieceByPieceExport.save``, in this or any other process.

    ``implementations`` gives the code of the pieces stored without a program of their own (their export
    failed): module classes or module instances, matched to pieces by their class's qualified name, or a dict
    from a piece's dotted path to one (Note [implementations]). Nothing else of the user's runs, and nothing
    is imported by name.

    Returns a :class:`LoadedPieceByPiece`, a ``torch.nn.Module`` taking the model's own arguments. Raises
    ``OSError`` when the file cannot be read, :class:`ArtifactError` (a ``ValueError``) naming the file for
    anything wrong with it (not an archive, truncated, another format version, a manifest that disagrees with
    the programs) or with ``implementations`` (a piece without its class, a class that cannot be rebuilt), and
    when its operators are already registered in this process (close the export or the load that holds them).
    """
    source = os.fspath(path)
    with Archive(source) as archive:
        manifest = archive.manifest()
        by_class, by_path = resolve(implementations, source)
        for op in manifest.operators:
            if op.program is None and not op.by_size and op.piece not in by_path and op.cls not in by_class:
                raise ArtifactError(
                    source,
                    f"the piece {op.piece} ({op.cls}) is stored without a program of its own (its export failed): pass "
                    f"its class or an instance of it in implementations= to load it",
                )
            if _needs_module(op, by_class, by_path):
                _check_entry(op, by_class, by_path, source)
        _check_calls(archive, manifest)
        # the operators are registered in a namespace of the archive's digest, not the one the file names
        # (Note [safe loading]): the top program's calls are renamed to it as it is read
        rename = (manifest.namespace, archive.namespace())
        manifest = dataclasses.replace(manifest, namespace=rename[1])
        named = {o.program for o in manifest.operators if o.program} | {n for o in manifest.operators for n, _ in o.by_size}
        pieces = {name: archive.program(name) for name in sorted(named)}
        archive.check_digest(manifest.program, manifest.digest, "the model")  # read by _check_calls
        for op in manifest.operators:
            if op.program is not None:
                archive.check_digest(op.program, op.digest, f"the operator {op.name} ({op.piece})")
            for name, digest in op.by_size:
                archive.check_digest(name, digest, f"the operator {op.name} ({op.piece})")
        operators: list[LoadedOperator] = []
        try:  # all or nothing: whatever fails below, no operator stays registered
            operators = _register(manifest, pieces, source)
            top = archive.program(manifest.program, rename)
            weights = _check_top(top, manifest, source)
            _check_pieces(pieces, manifest, weights, source)
            for loaded in operators:
                record = loaded.record
                if _needs_module(record, by_class, by_path):
                    loaded.implementation = _implementation(record, weights[record.name], by_class, by_path, source)
            try:
                return LoadedPieceByPiece(top, manifest, operators)
            except (Exception, RecursionError) as exc:  # FX compiling the program's code: reported as ours
                raise ArtifactError(source, f"the program {manifest.program} cannot be made runnable: {type(exc).__name__}: {exc}") from None
        except BaseException:
            _close_all(operators)
            raise


def _register(manifest: Manifest, pieces: dict[str, Any], source: str) -> list[LoadedOperator]:
    taken = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith(manifest.namespace + "::")]
    if taken:
        raise ArtifactError(
            source,
            f"its operators ({manifest.namespace}::...) are already registered in this process, by an earlier load of "
            "the same archive: close that one first",
        )
    operators: list[LoadedOperator] = []
    shared: dict[Any, Any] = {}  # one runner per program (identical pieces share one)
    try:
        for op in manifest.operators:
            try:
                sized = [pieces[n] for n, _ in op.by_size]
                program = pieces.get(op.program) if op.program else None
                operators.append(LoadedOperator(manifest.namespace, op, program, None, sized, shared))
            except DomainError as exc:
                raise ArtifactError(source, f"a program by size of {op.piece} has a domain this library does not read: {exc}") from None
            except (Exception, RecursionError) as exc:  # FX compiling the piece's program: reported as ours
                raise ArtifactError(source, f"the program {op.program} of {op.piece} cannot be made runnable: {type(exc).__name__}: {exc}") from None
    except BaseException:
        _close_all(operators)
        raise
    return operators


def _check_calls(archive: Archive, manifest: Manifest) -> None:
    """The top program calls exactly the manifest's operators (checked on its JSON, before anything loads)."""
    prefix = f"torch.ops.{manifest.namespace}."
    called = set()
    for node in _nodes(archive.document(f"models/{manifest.program}.json")):
        target = node.get("target")
        if isinstance(target, str) and target.startswith(prefix):  # torch's dotted target, not our language
            name, _, overload = target[len(prefix) :].partition(".")
            if overload != "default":
                raise ArtifactError(archive.path, f"the program calls {target}, an overload the artifact does not define")
            called.add(name)
    described = {o.name for o in manifest.operators}
    if called - described:
        raise ArtifactError(archive.path, f"the program calls operators the manifest does not describe: {sorted(called - described)}")
    if described - called:
        raise ArtifactError(archive.path, f"the manifest describes operators the program does not call: {sorted(described - called)}")


def _nodes(serialized: Any) -> list[dict[str, Any]]:
    graph = serialized.get("graph_module", {}).get("graph", {}) if isinstance(serialized, dict) else {}
    nodes = graph.get("nodes", []) if isinstance(graph, dict) else []
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def _check_top(top: Any, manifest: Manifest, source: str) -> dict[str, list[Any]]:
    """The top program agrees with the manifest; the tensors each operator takes as weights, by operator."""
    signature = top.graph_signature
    if len(signature.user_inputs) != manifest.call.n_tensors or len(signature.user_outputs) != manifest.call.n_out_tensors:
        raise ArtifactError(
            source,
            f"the program takes {len(signature.user_inputs)} tensors and returns {len(signature.user_outputs)} where the "
            f"manifest's call has {manifest.call.n_tensors} and {manifest.call.n_out_tensors}",
        )
    lifted = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    records = {o.name: o for o in manifest.operators}
    weights: dict[str, list[Any]] = {}
    for node in top.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or target.namespace != manifest.namespace:
            continue
        op = records.get(target._opname)
        if op is None or len(node.args) != 3 or node.kwargs or not all(isinstance(a, (list, tuple)) for a in node.args[:2]):
            raise ArtifactError(source, f"the program calls {target} with arguments that are not (tensors, weights, call)")
        tensors, given, key = node.args
        calls = {c.key: c for c in op.calls}
        if not isinstance(key, str) or key not in calls:
            raise ArtifactError(source, f"the program calls {op.name} with a call structure the manifest does not have: {key!r}")
        if len(tensors) != calls[key].n_tensors or len(given) != len(op.weights):
            raise ArtifactError(
                source,
                f"the program calls {op.name} with {len(tensors)} tensors and {len(given)} weights where the manifest says "
                f"{calls[key].n_tensors} and {len(op.weights)}",
            )
        if any(not isinstance(n, torch.fx.Node) or n.op != "placeholder" or n.name not in lifted for n in given):
            raise ArtifactError(source, f"the program gives {op.name} weights that are not its parameters or buffers")
        weights[op.name] = [top.state_dict.get(lifted[n.name], top.constants.get(lifted[n.name])) for n in given]
    return weights


def _check_pieces(pieces: dict[str, Any], manifest: Manifest, weights: dict[str, list[Any]], source: str) -> None:
    """Each piece's program takes its operator's weights as they are (dtype, shape, strides) and as many tensors
    as its call passes, and returns the outputs its call records (their count, dtypes and devices)."""
    for op in manifest.operators:
        for name in [op.program] if op.program is not None else [n for n, _ in op.by_size]:
            _check_piece(op, name, pieces[name], weights[op.name], source)


def _check_piece(op: OperatorRecord, name: str, program: Any, weights: list[Any], source: str) -> None:
    """:func:`_check_pieces` of one program of ``op``, ``name`` in the archive."""
    record = next(c for c in op.calls if c.key == op.program_key)
    signature = program.graph_signature
    want_in, want_out = len(op.weights) + record.n_tensors, record.n_out_tensors
    if len(signature.user_inputs) != want_in or len(signature.user_outputs) != want_out:
        raise ArtifactError(
            source,
            f"the program {name} of {op.piece} takes {len(signature.user_inputs)} tensors and returns "
            f"{len(signature.user_outputs)} where its operator passes {want_in} and expects {want_out}",
        )
    values = {n.name: n.meta.get("val") for n in program.graph.nodes if n.op in ("placeholder", "output")}
    for input_name, weight in zip(signature.user_inputs, weights, strict=False):
        val = values.get(input_name)
        if not isinstance(val, torch.Tensor) or val.dtype != weight.dtype or tuple(val.shape) != tuple(weight.shape) or val.stride() != weight.stride():
            raise ArtifactError(
                source,
                f"the program {name} of {op.piece} takes its input {input_name} as {_described(val)} where the weight "
                f"its operator passes is {_described(weight)}",
            )
    outputs = next(n for n in program.graph.nodes if n.op == "output").args[0]
    got = [(str(o.meta["val"].dtype).removeprefix("torch."), str(o.meta["val"].device)) for o in outputs if hasattr(o, "meta") and isinstance(o.meta.get("val"), torch.Tensor)]
    if got != list(zip(record.out_dtypes, record.out_devices, strict=True)):
        raise ArtifactError(source, f"the program {name} of {op.piece} returns {got} where its operator's call records {list(zip(record.out_dtypes, record.out_devices, strict=True))}")


def _described(value: Any) -> str:
    if not isinstance(value, torch.Tensor):
        return "no tensor"
    return f"a {value.dtype} {tuple(value.shape)} with strides {value.stride()}"


def _needs_module(op: OperatorRecord, by_class: dict[str, Any], by_path: dict[str, Any]) -> bool:
    """Whether the piece runs its module: it has no program, or programs by size only and its module is given
    (to run at sizes no domain holds for)."""
    return op.program is None and (not op.by_size or op.piece in by_path or op.cls in by_class)


def _check_entry(op: OperatorRecord, by_class: dict[str, Any], by_path: dict[str, Any], source: str) -> None:
    """A class given for a piece can be rebuilt from its stored state: checked before any program is read."""
    entry = by_path.get(op.piece) or by_class[op.cls]
    if isinstance(entry, type):
        if op.state is None:
            raise ArtifactError(source, f"the piece {op.piece} has no stored state to rebuild {op.cls} from")
        check_rebuildable(op.state, by_class, source, op.piece)


def _implementation(op: OperatorRecord, weights: list[Any], by_class: dict[str, Any], by_path: dict[str, Any], source: str) -> Any:
    entry = by_path.get(op.piece) or by_class[op.cls]
    if isinstance(entry, type):
        assert op.state is not None  # _check_entry
        return rebuild(op.state, dict(zip(op.weights, weights, strict=True)), by_class, source, op.piece)
    check_instance(entry, op.weights, weights, source, op.piece)
    return entry

