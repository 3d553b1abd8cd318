"""The error the meaning checks raise while the schema is parsed, and how their messages quote source text.

``_Fail`` carries a message and a 0-based offset; ``_transform.parse`` turns it into a :class:`SchemaError` that
holds the text, so the checks (in ``_literals``, ``_defaults``, ``_union``, ``_aliases`` and the callbacks) need
not see the text themselves. Invariants: ``_Fail`` never leaves the package's ``parse``; a quoted token is one
line and at most 40 characters before quoting.
"""

from __future__ import annotations

from collections.abc import Sequence


class _Fail(Exception):
    """A meaning error found by the transformer: converted to SchemaError (with the text) by ``parse``."""

    def __init__(self, msg: str, pos: int, expected: Sequence[str] = ()) -> None:
        super().__init__(msg)
        self.msg = msg
        self.pos = pos
        self.expected = tuple(expected)


def _quoted(value: str) -> str:
    """A token as quoted in a message: on one line (control characters escaped) and not too long."""
    value = _short(value)
    return f"'{value}'" if value.isprintable() else repr(value)


def _short(text: str) -> str:
    """A literal as quoted in a message: long ones are cut in the middle."""
    return text if len(text) <= 40 else text[:18] + "..." + text[-18:]
