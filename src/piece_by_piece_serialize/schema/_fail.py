"""How the schema's meaning checks quote source text in their messages.

The checks (in ``_literals``, ``_defaults``, ``_union``, ``_aliases`` and the callbacks) raise the shared
:class:`~piece_by_piece_serialize._diagnostics.Refused` with a message and a 0-based offset; ``_transform.parse``
turns it into a :class:`SchemaError` that holds the text, so the checks need not see the text themselves.
Invariants: a refusal never leaves the package's ``parse``; a quoted token is one line and at most 40 characters
before quoting.
"""

from __future__ import annotations


def _quoted(value: str) -> str:
    """A token as quoted in a message: on one line (control characters escaped) and not too long."""
    value = _short(value)
    return f"'{value}'" if value.isprintable() else repr(value)


def _short(text: str) -> str:
    """A literal as quoted in a message: long ones are cut in the middle."""
    return text if len(text) <= 40 else text[:18] + "..." + text[-18:]
