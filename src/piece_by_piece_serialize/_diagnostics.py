"""What every language's error messages share: the refusal a callback raises, the "a, b or c" wording of what
was expected, and the caret line under a column of a long source line.

The five languages (schemas, TreeSpec names, type-info strings, structure descriptions, symbolic expressions) each
turn an engine :class:`~._lalr.engine.Failure` or a callback's :class:`Refused` into their own public error
(:mod:`.errors`), with their own names for the terminals; the pieces here are the ones whose wording must not
drift between them. The CLI's caret under a finding uses :func:`caret` too.

Imports nothing from the library, so that any module may import it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Refused", "join_or", "caret", "CARET_WINDOW"]

# A caret line is only useful when it fits on a terminal; longer source lines are shown as a window
# around the offending column, with "..." marking the elided parts.
CARET_WINDOW = 100


class Refused(Exception):
    """A meaning error found by a parse callback: a message, the offset in the text it was found at and, where
    the callback knows them, the spellings that would have been accepted. The language's ``parse`` turns it into
    its public error once the whole text is at hand."""

    def __init__(self, msg: str, pos: int, expected: Sequence[str] = ()) -> None:
        super().__init__(msg, pos)
        self.msg = msg
        self.pos = pos
        self.expected = tuple(expected)


def join_or(words: Sequence[str], empty: str = "nothing") -> str:
    """``a``, ``a or b``, ``a, b or c``: the words in the order given; ``empty`` when there are none."""
    if not words:
        return empty
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def caret(line: str, col: int, *, keep_tabs: bool = False) -> str:
    """Two lines, each indented by two spaces: ``line`` and a ``^`` under its 0-based column ``col``.

    A line longer than :data:`CARET_WINDOW` is cut to a window around the column. Control characters are shown
    as ``?`` so that the caret stays under the character it points at; with ``keep_tabs`` (a terminal showing a
    file's own line), tabs are kept in both lines instead, so that they expand alike.
    """
    if len(line) > CARET_WINDOW:
        lo = max(0, min(col - CARET_WINDOW // 2, len(line) - CARET_WINDOW))
        prefix = "..." if lo > 0 else ""
        suffix = "..." if lo + CARET_WINDOW < len(line) else ""
        line = prefix + line[lo : lo + CARET_WINDOW] + suffix
        col = col - lo + len(prefix)
    if keep_tabs:
        shown = "".join(ch if ch.isprintable() or ch == "\t" else "?" for ch in line)
        pad = "".join("\t" if ch == "\t" else " " for ch in shown[:col])
    else:
        shown = "".join(ch if ch.isprintable() else "?" for ch in line)
        pad = " " * col
    return f"  {shown}\n  {pad}^"
