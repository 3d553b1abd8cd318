"""What :func:`export_piece_by_piece` returns: the program, the pieces, the report, a runnable module.

Invariants: the result owns the operators its program calls; they stay registered while the result lives
(or until :meth:`PieceByPieceExport.close`), and are freed when it is garbage collected. The runnable module
takes the model's own arguments, checks that they have the structure of the example (Note [call keys] in
:mod:`..custom_op`), and gives the model's own output, caches written back as the model would.

Imports: :mod:`..custom_op` (the call structure), :mod:`._report`, :mod:`._errors`; torch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..custom_op._calls import Call, describe_call, finish_call
from ._errors import PieceByPieceExportError
from ._report import ExportReport, Piece


class PieceByPieceExport:
    """A model exported piece by piece.

    ``program`` is the top ``torch.export.ExportedProgram``: it takes the flat tensors of the model's arguments
    (caches included, in the order of Note [flat order] in :mod:`..serialize`) and returns the output's tensors
    followed by each cache argument's after the call; pieces behind operators are call nodes of the operators
    this object owns. ``pieces`` maps the dotted path of each submodule in the report (relative to the model)
    to its :class:`Piece`; a model that exports whole has none. ``report`` is the :class:`ExportReport`.
    :meth:`module` gives a runnable ``torch.nn.Module`` that takes the model's own arguments.
    """

    def __init__(self, program: Any, pieces: dict[str, Piece], report: ExportReport, call: Call, key: str, close: Callable[[], None]) -> None:
        self.program = program
        self.pieces = pieces
        self.report = report
        self._call = call
        self._key = key
        self._finalizer = weakref.finalize(self, close)

    def module(self) -> torch.nn.Module:
        """A module that runs the program on the model's own arguments and returns the model's own output
        (caches passed in are updated in place, as by the model); it keeps this export's operators alive."""
        return _Runnable(self)

    def close(self) -> None:
        """Free the operator names now (they are freed when this object is garbage collected anyway); the
        program and its modules cannot run afterwards."""
        self._finalizer()

    def __repr__(self) -> str:
        cut = self.report.behind_operators
        return f"<PieceByPieceExport of {self.report.model_class.__name__}: {len(cut)} pieces behind operators>"


class _Runnable(torch.nn.Module):
    def __init__(self, export: PieceByPieceExport) -> None:
        super().__init__()
        self.program = export.program.module()
        self.__dict__["export"] = export  # not a submodule: keeps the operators alive

    export: PieceByPieceExport

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        export = self.export
        _, tensors, key = describe_call("PieceByPieceExport.module()", args, kwargs)
        if key != export._key:
            raise PieceByPieceExportError(
                f"PieceByPieceExport.module(): called with {key}, but the program was exported for {export._key}: "
                "every call must pass the same arguments, the same ones None and the same scalar values as the example"
            )
        out = self.program(*tensors)
        return finish_call(export._call, list(out), [*args, *kwargs.values()])
