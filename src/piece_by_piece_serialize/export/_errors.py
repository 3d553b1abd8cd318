"""The error of :mod:`piece_by_piece_serialize.export`, in a module of its own so that every part of the
package raises the same class without importing the others."""

from __future__ import annotations

from typing import Any


class PieceByPieceExportError(ValueError):
    """The model, its example or its dynamic shapes cannot be exported piece by piece.

    The message says what failed and how to go on. ``report`` is the export's report so far (an
    :class:`ExportReport`, whose ``str()`` is the tree of what was tried) when the failure came after the search
    started, else None.
    """

    # the public home of the class: tracebacks, reprs and the API reference name the package
    __module__ = "piece_by_piece_serialize.export"

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.args[0], None)


class ExportMismatchError(PieceByPieceExportError):
    """The exported program does not match eager within the tolerances, or a piece its own module (Note [the
    verdict] in :mod:`.export._verdict`): the program would give wrong answers.

    ``report`` says which outputs and pieces failed and by how much; ``result`` is the
    :class:`PieceByPieceExport` itself, kept for diagnosis (pass ``strict=False`` to get it returned instead).
    """

    __module__ = "piece_by_piece_serialize.export"

    def __init__(self, message: str, report: Any = None, result: Any = None) -> None:
        super().__init__(message, report)
        self.result = result
