"""The error of :mod:`piece_by_piece_serialize.custom_op`, in a module of its own so that the shape rules
(:mod:`._shapes`) and the wrapper raise the same class without importing each other."""

from __future__ import annotations


class CustomOpError(TypeError):
    """A call or an output that a custom operator cannot carry, or an output shape that cannot be derived."""

    # the public home of the class, as before the package had private modules: tracebacks, reprs, pickles and
    # the API reference name piece_by_piece_serialize.custom_op.CustomOpError
    __module__ = "piece_by_piece_serialize.custom_op"
