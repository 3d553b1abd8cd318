"""The error of :mod:`piece_by_piece_serialize.onnx_export`, in a module of its own so that every part of the
package raises the same class without importing the others."""

from __future__ import annotations


class OnnxExportError(ValueError):
    """An export that cannot be written as ONNX: a piece without a program of its own (the message names it and
    says why), or a model the ONNX checker refuses."""

    __module__ = "piece_by_piece_serialize.onnx_export"
