"""torch as the oracle of the schema tests: one text given to ``torch._C.parse_schema`` and to ours.

Each parser's refusal is the error it raises for a bad schema (torch's ``RuntimeError``, our ``SchemaError``);
any other exception is a bug of that parser and propagates. torch is imported on first use, so that a test module
can still skip itself with ``pytest.importorskip("torch")`` before it.
"""

from __future__ import annotations

from typing import Any

from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import FunctionSchema, parse_schema


def both(text: str, **options: Any) -> tuple[Any | None, FunctionSchema | None]:
    """(torch's schema, ours) for ``text`` read with ``options`` (``allow_typevars=False``), None where that parser
    refuses it."""
    import torch

    try:
        theirs = torch._C.parse_schema(text, **options)
    except RuntimeError:
        theirs = None
    try:
        ours = parse_schema(text, **options)
    except SchemaError:
        ours = None
    return theirs, ours
