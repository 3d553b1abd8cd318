"""What :func:`export_piece_by_piece` returns: the program, the pieces, the report, a runnable module.

Invariants: the result owns the operators its program calls; they stay registered while the result lives
(or until :meth:`PieceByPieceExport.close`), and are freed when it is garbage collected. The runnable module
takes the model's own arguments, checks that they have the structure of the example (Note [call keys] in
:mod:`..custom_op`), and gives the model's own output, caches written back as the model would; the same module
a loaded artifact gives.

Imports: :mod:`..artifact` (the runnable module, the writer), :mod:`..custom_op` (the call structure),
:mod:`._report`; torch.
"""

from __future__ import annotations

import errno
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..artifact._checkpoint import Checkpoint, aliases
from ..artifact._runnable import FlatProgramModule
from ..artifact._write import SavedPiece, is_valueless, write_artifact
from ..custom_op._calls import Call
from ._errors import PieceByPieceExportError
from ._record import tracing_path
from ._report import ExportReport, Piece
from ._verdict import tolerance

if TYPE_CHECKING:
    from ..onnx_export import OnnxExport


class PieceByPieceExport:
    """A model exported piece by piece.

    ``program`` is the top ``torch.export.ExportedProgram``: it takes the flat tensors of the model's arguments
    (caches included, in the order of Note [flat order] in :mod:`..serialize`) and returns the output's tensors
    followed by each cache argument's after the call; pieces behind operators are call nodes of the operators
    this object owns, which take the pieces' parameters and buffers as inputs. ``pieces`` maps the dotted path of
    each submodule in the report (relative to the model) to its :class:`Piece`; a model that exports whole has
    none. ``report`` is the :class:`ExportReport`. :meth:`module` gives a runnable ``torch.nn.Module`` that
    takes the model's own arguments; :meth:`save` writes one archive that ``load_piece_by_piece`` loads.
    """

    def __init__(
        self, program: Any, pieces: dict[str, Piece], report: ExportReport, call: Call, key: str,
        saved: Sequence[SavedPiece], namespace: str, close: Callable[[], None],
    ) -> None:  # fmt: skip
        self.program = program
        self.pieces = pieces
        self.report = report
        self._call = call
        self._key = key
        self._saved = list(saved)
        self._namespace = namespace
        self._finalizer = weakref.finalize(self, close)

    def module(self) -> torch.nn.Module:
        """A module that runs the program on the model's own arguments and returns the model's own output
        (caches passed in are updated in place, as by the model); it keeps this export's operators alive. A
        call whose structure differs from the example's raises ``CallStructureError``."""
        self._check_open("module()")
        return _ExportModule(self.program, self._call, self._key, self, "PieceByPieceExport.module()")

    @property
    def closed(self) -> bool:
        """True once :meth:`close` freed the operators: the program and its modules cannot run any more."""
        return not self._finalizer.alive

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise PieceByPieceExportError(
                f"PieceByPieceExport.{what}: this export was closed, and the operators its program calls are freed; "
                "export the model again, or save() before close() and load the artifact"
            )

    def save(self, path: str | os.PathLike[str], *, weights: str | os.PathLike[str] | None = None) -> None:
        """Write the export as one archive (a ``.pt2`` file, torch's PT2 archive): the top program, each distinct
        piece program, every weight once, and a manifest; :func:`load_piece_by_piece` loads it in any process.
        A piece that has no program of its own (its export failed) is stored as its weights and the name of its
        class, which loading then needs in ``implementations=``.

        ``weights`` is for a model exported without its weights (on the ``meta`` device or under
        ``FakeTensorMode``): a safetensors checkpoint, a file or a directory as transformers' ``save_pretrained``
        writes it (shards listed in ``model.safetensors.index.json``), from which each weight without values is
        read one at a time as it is written, so the peak memory is about the largest weight (Note [streamed
        weights]). Raises ``ValueError`` for such a model without ``weights``, and ``CheckpointError`` (a
        ``ValueError``) for a checkpoint that lacks a weight or holds it with another shape or dtype. Raises
        ``FileNotFoundError`` for a directory that does not exist, ``PermissionError`` (an ``OSError``) for a path
        that cannot be written, each naming the path."""
        target = os.path.abspath(os.fspath(path))
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise FileNotFoundError(errno.ENOENT, f"PieceByPieceExport.save: no directory {folder!r} to write {os.fspath(path)!r} in", target)
        if os.path.isdir(target):
            raise IsADirectoryError(errno.EISDIR, f"PieceByPieceExport.save: {os.fspath(path)!r} is a directory; give a file path (model.pt2)", target)
        existed = os.path.exists(target)
        try:
            with open(target, "ab"):  # can the file be written here? (torch's own error would not name it)
                pass
        except OSError as exc:
            raise type(exc)(exc.errno, f"PieceByPieceExport.save: cannot write {os.fspath(path)!r}: {exc.strerror}", target) from None
        checkpoint = None if weights is None else Checkpoint(weights)
        try:
            write_artifact(
                target, program=self.program, call=self._call, namespace=self._namespace,
                model_class=self.report.model_class, pieces=self._saved, weights=checkpoint,
                names=None if weights is None else aliases(self._model),
            )  # fmt: skip
        except BaseException as exc:
            if not existed:  # no half-written or empty file left where none was
                os.remove(target)
            if isinstance(exc, RuntimeError):  # torch's C++ writer: "enforce fail ...", without the path
                raise OSError(f"PieceByPieceExport.save: writing {os.fspath(path)!r} failed: {exc}") from exc
            raise

    def to_onnx(
        self, path: str | os.PathLike[str], *, opset: int | None = None,
        translations: Mapping[Any, Callable[..., Any]] | None = None, weights: str | os.PathLike[str] | None = None,
        strict: bool = True,
    ) -> OnnxExport:  # fmt: skip
        """Write the export as one ONNX model through ``torch.onnx.export(dynamo=True)``: each piece an ONNX local
        function called from the main graph, its weights passed as inputs; pieces that compute the same function
        (identical layers) share one. Dynamic dimensions are kept, and inputs and outputs are named after the
        model's arguments (``input_ids``, ``past.layers.0.keys``, ``output.logits``). The model passes
        ``onnx.checker.check_model(full_check=True)``; onnxruntime runs it on every example and each function on
        each of its pieces' recorded calls, and the report gains those differences (its ``onnx`` column). They
        are judged as the export judges its program, with its tolerances (Note [the verdict]): outside them,
        ``to_onnx`` raises ``OnnxExportError`` naming what differs, the file left written to look into; with
        ``strict=False`` it returns, ``differs`` listing it and the report saying so.

        ``weights`` is for a model exported without its weights (on the ``meta`` device or under
        ``FakeTensorMode``): a safetensors checkpoint as :meth:`save` takes it. Each weight is then read from it one
        at a time and written to the external-data file ``<path>.data`` beside the model, which refers to it there
        (Note [streamed weights]); onnxruntime's checks against eager are not run (there is nothing to compare
        with), and the report says so.

        ``opset`` is the ONNX opset (torch's default when None). ``translations`` maps an operator the programs
        call that torch.onnx does not know (``torch.ops.<namespace>.<name>.default``) to its ONNX translation, a
        function of the operator's arguments built from onnxscript ops (docs/onnx.md); transformers' experts
        operator ``transformers::grouped_mm_fallback`` has one already. A key may be a module class instead: the
        translation of every piece of that class (``{JambaMambaMixer: function}``); a class no piece is of is
        refused by name, saying where its modules are. Needs the ``onnx`` extra. Returns an
        :class:`~piece_by_piece_serialize.onnx_export.OnnxExport`. Raises ``OnnxExportError`` (a ``ValueError``)
        naming each piece that has no program of its own (its export failed) and why, or an operator that has
        no translation and the hook that gives one.
        """
        from ..onnx_export import OnnxExportError, OnnxPiece, write_onnx

        why = {p: piece.own_export_failure or piece.failure for p, piece in self.pieces.items()}
        sized = {path: (by.key, by.programs) for path, by in self._by_size.items()}
        # a piece whose programs by size could not be made says why too (Note [programs by size])
        unsized = {p: f"; {piece.by_size}" for p, piece in self.pieces.items() if piece.by_size and p not in sized}
        pieces = [
            OnnxPiece(s.path, s.qualname, s.program, _why_not(why.get(s.path)) + unsized.get(s.path, ""),
                      s.program_key or sized.get(s.path, (None,))[0], self._onnx_calls.get(s.path, []), sized.get(s.path, (None, ()))[1])
            for s in self._saved
        ]  # fmt: skip
        valueless = any(is_valueless(t) for t in [*self.program.state_dict.values(), *self.program.constants.values()])
        if valueless and weights is None:
            raise ValueError(
                "to_onnx: the model's weights have no values (the meta device or FakeTensorMode): pass weights= a "
                "safetensors checkpoint (a file, or a directory of shards with model.safetensors.index.json) to read them from"
            )
        stream = None
        if valueless and weights is not None:
            checkpoint, names = Checkpoint(weights), aliases(self._model)

            def stream(name: str, tensor: Any) -> Any:
                if tensor is None or not is_valueless(tensor):
                    return None
                plain = name.removeprefix("module.")  # the flat call's attribute holding the model (export/_flat.py)
                return checkpoint.tensor(names.get(plain, [plain]), tuple(tensor.shape), tensor.dtype)

        translations = by_class(translations, self.pieces, self._model)
        inputs, outputs = io_names(self._model, self._example, self._call, valueless)
        written = write_onnx(
            os.fspath(path), program=self.program, pieces=pieces, examples=self._onnx_examples,
            input_names=inputs, output_names=outputs, opset=opset, translations=translations,
            dim_names=_dim_names(self._specs), stream=stream, tolerance=lambda dtype: tolerance(dtype, *self._tolerances),
        )  # fmt: skip
        self.report.attach_onnx(written)
        self.pieces.update(self.report.pieces)
        if written.differs and strict:  # Note [onnxruntime's verdict]
            raise OnnxExportError(
                f"to_onnx: onnxruntime computes {len(written.differs)} output(s) outside the export's tolerances against "
                f"eager: {'; '.join(written.differs[:5])}{'; ...' if len(written.differs) > 5 else ''}. {written.path} is "
                "written, to look into; to_onnx(..., strict=False) returns it"
            )
        return written

    def _for_onnx(
        self, model: Any, example: Any, examples: list[tuple[list[Any], list[Any]]], calls: dict[str, Any],
        specs: Sequence[dict[int, Any] | None] = (), by_size: Mapping[str, Any] | None = None,
        tolerances: tuple[float | None, float | None] = (None, None),
    ) -> None:  # fmt: skip
        """What :meth:`to_onnx` checks against and names by: the model, its first example, every example's flat
        tensors with eager's outputs, each piece's recorded calls, the dynamic shapes of the flat tensors (whose
        ``Dim`` names name the ONNX file's dimensions), the pieces' programs by size (Note [programs by size]), the
        export's atol and rtol (Note [the verdict])."""
        self._model, self._example, self._onnx_examples, self._onnx_calls = model, example, examples, calls
        self._specs = list(specs)
        self._by_size = dict(by_size or {})
        self._tolerances = tolerances

    def close(self) -> None:
        """Free the operator names now (they are freed when this object is garbage collected anyway); the
        program and its modules cannot run afterwards."""
        self._finalizer()

    def __repr__(self) -> str:
        cut = self.report.behind_operators
        return f"<PieceByPieceExport of {self.report.model_class.__name__}: {len(cut)} pieces behind operators>"


def _dim_names(specs: Sequence[dict[int, Any] | None]) -> list[dict[int, str]]:
    """Per flat tensor, the name of each dimension the user gave a named ``Dim`` (a derived Dim and a hint name
    none: their ONNX dimensions are named after the root's name or after where they first appear)."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint

    return [
        {d: str(dim.__name__) for d, dim in (spec or {}).items() if not isinstance(dim, (_DimHint, _DerivedDim, int)) and dim is not None}
        for spec in specs
    ]


class _ExportModule(FlatProgramModule):
    """The runnable module of an export: refuses to run once the export is closed (its operators are gone)."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self.owner._check_open("module()'s call")
        return super().forward(*args, **kwargs)


def by_class(translations: Mapping[Any, Callable[..., Any]] | None, pieces: Mapping[str, Piece], model: Any) -> Mapping[Any, Callable[..., Any]] | None:
    """``translations`` with each key that is a module class replaced by the operators of the pieces of exactly
    that class (a piece's operator is named for its path, so the user knows the class, not the name). A class no
    piece has is refused: a piece behind an operator whole is written as one function, which cannot call the
    translation of a part of it, so the error names the pieces that hold a module of that class and the
    ``classes=`` that puts it behind an operator of its own instead."""
    if not translations or not any(isinstance(key, type) for key in translations):
        return translations
    from ..onnx_export import OnnxExportError, overload_of

    out: dict[Any, Callable[..., Any]] = {}
    for key, translation in translations.items():
        if not isinstance(key, type):
            out[key] = translation
            continue
        operators = [piece.operator for piece in pieces.values() if piece.module_class is key and piece.operator]
        if not operators:
            name = key.__qualname__
            holders = [f"{path} ({piece.module_class.__name__})" for path, piece in pieces.items()
                       if piece.operator and any(type(m) is key for m in model.get_submodule(path).modules())]  # fmt: skip
            where = (
                f"its modules are inside {', '.join(holders)}, behind an operator whole: export with classes= "
                f"{name} in place of the class of that piece, then give its translation"
                if holders else "the model has no module of that class behind an operator"
            )
            raise OnnxExportError(f"to_onnx: translations= names the class {name}, and no piece is of that class: {where}")
        for operator in operators:
            out[overload_of(operator)] = translation
    return out


def _why_not(failure: Any) -> str:
    return "no failure recorded" if failure is None else f"{failure.kind}: {failure.detail or failure.message}"


def io_names(model: Any, example: Any, call: Call, valueless: bool = False) -> tuple[list[str], list[str]]:
    """Readable names of the program's inputs and outputs, from the model run once on a copy of the example (on
    the tracing path for a model without values, Note [exports without values])."""
    from ..custom_op._calls import rebuild_arguments
    from ..onnx_export._names import input_names
    from ..serialize import make_copy

    inputs = input_names(model.forward, example.args, example.kwargs)
    args, kwargs = rebuild_arguments(call, make_copy(list(example.tensors)))
    with tracing_path() if valueless else torch.no_grad():
        output = model(*args, **kwargs)
    return inputs, output_names_of(model, call, args, kwargs, output)


def output_names_of(model: Any, call: Call, args: Sequence[Any], kwargs: dict[str, Any], output: Any) -> list[str]:
    """The names of the flat outputs of ``model(*args, **kwargs)`` (a call of structure ``call``) that gave
    ``output``: ``output.logits``, then each cache argument's tensors after the call (``cache.updated...``)."""
    import inspect

    from ..onnx_export._names import output_names

    parameters = [p.name for p in inspect.signature(model.forward).parameters.values()]
    labels = [*(parameters[i] if i < len(parameters) else f"arg{i}" for i in range(len(args))), *kwargs]
    given = [*args, *kwargs.values()]
    return output_names(output, [(labels[i], given[i]) for i in call.caches])
