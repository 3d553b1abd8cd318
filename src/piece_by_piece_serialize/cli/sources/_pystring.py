"""Python string literals read by hand: the tokens of one literal's source, and each token decoded with
the file position of every character it produces.

``ast`` gives a literal's value and where the whole literal starts, not where each character was
written; a caret under the right column needs the latter, so the tokens are read and decoded here and
the Python reader cross-checks the result against ``ast``'s value. The structure-description language
(:mod:`.._structure`) writes its dict keys as Python strings and decodes them with
:func:`decode_python_string` too. Reading the tokens by hand (rather than with ``tokenize``) keeps
f-strings the same on every Python version (3.12 tokenizes them into pieces).

Imports: :mod:`._positions` only; nothing is evaluated.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence

from ._positions import Run

__all__ = ["decode_python_string", "string_tokens"]

_PY_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
# digits after \x, \u and \U
_HEX_WIDTHS = {"x": 2, "u": 4, "U": 8}
_OCTAL = "01234567"


def decode_python_string(token: str, row: int, col: int) -> tuple[Sequence[str], Sequence[tuple[int, int]]] | None:
    """Decode one Python string token written at (row, col): its characters and the position of each.

    Returns ``None`` for bytes and for f-strings with fields (an f-string without fields decodes like a
    plain string, ``{{`` and ``}}`` being ``{`` and ``}``). Raises ``ValueError`` or ``KeyError`` for an
    escape Python itself refuses (a truncated ``\\x``/``\\u``/``\\U``, an unknown ``\\N{name}``).
    """
    q = 0
    while q < len(token) and token[q] not in "'\"":
        q += 1
    prefix = token[:q].lower()
    if "b" in prefix:
        return None
    fstring = "f" in prefix
    raw = "r" in prefix
    quote = token[q : q + 3] if token[q : q + 3] in ("'''", '"""') else token[q]
    body_start = q + len(quote)
    body_end = len(token) - len(quote)
    body = token[body_start:body_end]
    if "\\" not in body and "\n" not in body and not (fstring and ("{" in body or "}" in body)):
        # the common case: every character stands for itself, on one line
        return body, Run(row, col + body_start, len(body))
    return _decode_body(token, body_start, body_end, _token_positions(token, row, col), fstring=fstring, raw=raw)


def _token_positions(token: str, row: int, col: int) -> list[tuple[int, int]]:
    """The file position of each character of a token written at (row, col); a triple-quoted one can
    run over several lines."""
    line, column = row, col
    where: list[tuple[int, int]] = []
    for ch in token:
        where.append((line, column))
        if ch == "\n":
            line += 1
            column = 1
        else:
            column += 1
    return where


def _decode_body(
    token: str, i: int, body_end: int, where: list[tuple[int, int]], *, fstring: bool, raw: bool
) -> tuple[list[str], list[tuple[int, int]]] | None:
    """The characters of ``token[i:body_end]`` and their positions; ``None`` at an f-string field."""
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    while i < body_end:
        ch = token[i]
        if fstring and ch in "{}":
            if token[i + 1 : i + 2] != ch:
                return None  # a field: not a constant string
            chars.append(ch)
            positions.append(where[i])
            i += 2
            continue
        if ch != "\\" or raw:
            if raw and ch == "\\" and i + 1 < body_end:
                # a raw string keeps the backslash and the character it protects
                chars.append(ch)
                positions.append(where[i])
                chars.append(token[i + 1])
                positions.append(where[i + 1])
                i += 2
                continue
            chars.append(ch)
            positions.append(where[i])
            i += 1
            continue
        i = _escape(token, i, body_end, where, chars, positions)
    return chars, positions


def _escape(token: str, i: int, body_end: int, where: list[tuple[int, int]], chars: list[str], positions: list[tuple[int, int]]) -> int:
    """Decode the escape sequence whose backslash is ``token[i]`` onto ``chars`` and ``positions`` (every
    character it yields is placed at the backslash); returns the index just after the sequence."""
    esc = token[i + 1]
    pos = where[i]
    if esc == "\n":  # a backslash-newline continues the string: it yields nothing
        return i + 2
    if esc in _PY_SIMPLE_ESCAPES:
        chars.append(_PY_SIMPLE_ESCAPES[esc])
        positions.append(pos)
        return i + 2
    if esc in _OCTAL:
        j = i + 1
        while j < i + 4 and j < body_end and token[j] in _OCTAL:
            j += 1
        chars.append(chr(int(token[i + 1 : j], 8)))
        positions.append(pos)
        return j
    if esc in _HEX_WIDTHS:
        width = _HEX_WIDTHS[esc]
        chars.append(chr(int(token[i + 2 : i + 2 + width], 16)))
        positions.append(pos)
        return i + 2 + width
    if esc == "N":
        close = token.index("}", i)
        chars.append(unicodedata.lookup(token[i + 3 : close]))
        positions.append(pos)
        return close + 1
    # an unknown escape: Python keeps the backslash and the character
    chars.append("\\")
    positions.append(pos)
    chars.append(esc)
    positions.append(where[i + 1])
    return i + 2


def string_tokens(segment: list[str]) -> list[tuple[str, int, int]]:
    """The string literal tokens of the source of one (implicitly concatenated) literal, with their
    0-based row and column in ``segment``. Between tokens only blanks, comments, line continuations and
    parentheses can appear. Read by hand so that f-strings come out the same on every Python version
    (3.12 tokenizes them into pieces)."""
    src = "\n".join(segment)
    starts = [0]
    for line in segment[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    tokens: list[tuple[str, int, int]] = []
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        if ch in " \t\f\r\n()":
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "#":
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        j = i
        while j < n and src[j].isalpha():
            j += 1
        if j >= n or src[j] not in "'\"":
            break  # not a string token: stop, the caller's cross-check will notice
        quote = src[j : j + 3] if src[j : j + 3] in ("'''", '"""') else src[j]
        k = _PY_BODIES[quote].match(src, j + len(quote)).end()  # type: ignore[union-attr]
        end = min(k + len(quote), n)
        row = bisect.bisect_right(starts, i) - 1
        tokens.append((src[i:end], row, i - starts[row]))
        i = end
    return tokens


# The inside of a Python string token for each quote (Python lexing, not schema text): up to the closing
# quote, a backslash protecting the next character; single-quoted bodies stop at an end of line.
_PY_BODIES = {
    "'": re.compile(r"(?:[^'\\\n]+|\\[\s\S])*"),
    '"': re.compile(r'(?:[^"\\\n]+|\\[\s\S])*'),
    "'''": re.compile(r"(?:[^'\\]+|\\[\s\S]|'(?!''))*"),
    '"""': re.compile(r'(?:[^"\\]+|\\[\s\S]|"(?!""))*'),
}
