"""C++ (and Objective-C++): the string literals passed to the calls that take a schema.

A scanner that knows comments, character literals and (raw) string literals with prefixes, enough to
find the calls that take a schema (``def(``, ``TORCH_SELECTIVE_SCHEMA(``, ``torch::schema(``,
``c10::schema(``, ``parseSchema(``, ``parseSchemaOrName(``) and read their first argument. An argument
made only of adjacent string literals is one schema (escapes decoded as a C++ compiler would); one that
mixes literals with anything else (a macro, a preprocessor directive, a Jinja block) is a note, never
half a schema. The scanner jumps with ``str.find`` between the few characters that matter ('/', quotes),
remembering where each next one is so that a large file is scanned once (a fresh find per literal would
rescan the rest of the file for a character it does not hold); line and column are computed only for
the literals that are kept.

Imports: :mod:`.._contexts`, :mod:`._model` and :mod:`._positions` only; no compiler, no preprocessor.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

from .._contexts import (
    CONTEXT_C10_SCHEMA,
    CONTEXT_CPP,
    CONTEXT_JIT_PARSE_SCHEMA,
    CONTEXT_JIT_PARSE_SCHEMA_OR_NAME,
    CONTEXT_TORCH_SCHEMA,
)
from ._model import TEMPLATE_OPENERS, Problem, SchemaSite, SourceFile, is_hex, parse_directive, template_note
from ._positions import LineIndex, OffsetPositions

__all__ = ["cpp_source"]


_CPP_CALLEES = ("def", "TORCH_SELECTIVE_SCHEMA", "schema", "parseSchema", "parseSchemaOrName")
_CPP_WORDS = ("def", "schema", "Schema", "SCHEMA")  # a file without any of these holds no schema call
_CPP_STRING_PREFIXES = ("u8R", "LR", "uR", "UR", "R", "u8", "L", "u", "U")  # longest first
_CPP_SIMPLE_ESCAPES = {"'": "'", '"': '"', "?": "?", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL = "01234567"
_CPP_BODY = re.compile(r'(?:[^"\\\n]+|\\[\s\S])*')  # the inside of a "..." literal (C++ lexing, not schema text)
# The first argument of a schema call is read token by token up to this many tokens (a schema is a few
# literals); past it the call is not a schema site. Bounds the work per call, whatever the file holds.
_CPP_MAX_TOKENS = 512


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass(slots=True)
class _CppLiteral:
    start: int  # offset of the prefix or opening quote
    end: int  # offset just after the closing quote
    body: int  # offset of the first character inside the quotes
    body_end: int  # offset of the closing delimiter
    raw: bool


class _CppScan:
    """Comments and string literals of a C++ text, as offset intervals, in one pass."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.comments: dict[int, int] = {}  # start -> end
        self.literals: dict[int, _CppLiteral] = {}  # start (prefix included) -> literal
        self.code: list[tuple[int, int]] = []  # spans outside comments and literals
        self._scan()

    def _scan(self) -> None:
        text = self.text
        n = len(text)
        i = code_start = 0
        # where the next '/', '"' and "'" at or after i are (-1: none left); refreshed only once passed
        ahead = {ch: text.find(ch) for ch in "/\"'"}
        while i < n:
            for ch, k in ahead.items():
                if 0 <= k < i:
                    ahead[ch] = text.find(ch, i)
            j = min((k for k in ahead.values() if k >= 0), default=n)
            if j >= n:
                break
            ch = text[j]
            if ch == "/":
                nxt = text[j + 1 : j + 2]
                if nxt == "/":
                    end = text.find("\n", j)
                    end = n if end < 0 else end
                elif nxt == "*":
                    end = text.find("*/", j + 2)
                    end = n if end < 0 else end + 2
                else:
                    i = j + 1
                    continue
                self.code.append((code_start, j))
                self.comments[j] = end
                i = code_start = end
            elif ch == "'":
                if j > 0 and _is_ident_char(text[j - 1]) and _is_ident_char(text[j + 1 : j + 2] or " ") and not self._is_prefix(j):
                    i = j + 1  # a digit separator: 1'000'000
                    continue
                end = self._char_literal_end(j)
                self.code.append((code_start, self._prefix_start(j)))
                i = code_start = end
            else:
                start = self._prefix_start(j)
                raw = start < j and text[j - 1] == "R"
                literal = self._raw_literal(start, j) if raw else self._literal(start, j)
                self.code.append((code_start, start))
                self.literals[start] = literal
                i = code_start = literal.end
        self.code.append((code_start, n))

    def _prefix_start(self, quote: int) -> int:
        text = self.text
        for prefix in _CPP_STRING_PREFIXES:
            k = quote - len(prefix)
            if k >= 0 and text[k:quote] == prefix and (k == 0 or not _is_ident_char(text[k - 1])):
                return k
        return quote

    def _is_prefix(self, quote: int) -> bool:
        return self._prefix_start(quote) < quote

    def _char_literal_end(self, j: int) -> int:
        text = self.text
        k = j + 1
        while k < len(text) and text[k] not in "'\n":
            k += 2 if text[k] == "\\" else 1
        return min(k + 1, len(text))

    def _literal(self, start: int, quote: int) -> _CppLiteral:
        text = self.text
        # the body ends at the closing quote or at an end of line; a backslash protects the next character
        # (a line splice included); a lone backslash at the very end runs to the end of the text
        k = _CPP_BODY.match(text, quote + 1).end()  # type: ignore[union-attr]
        if text[k : k + 1] == "\\":
            k = len(text)
        return _CppLiteral(start, min(k + 1, len(text)) if text[k : k + 1] == '"' else k, quote + 1, k, raw=False)

    def _raw_literal(self, start: int, quote: int) -> _CppLiteral:
        # R"delim( ... )delim"
        text = self.text
        paren = text.find("(", quote + 1)
        if paren < 0:
            return _CppLiteral(start, len(text), len(text), len(text), raw=True)
        closing = ")" + text[quote + 1 : paren] + '"'
        end = text.find(closing, paren + 1)
        if end < 0:
            return _CppLiteral(start, len(text), paren + 1, len(text), raw=True)
        return _CppLiteral(start, end + len(closing), paren + 1, end, raw=True)

    def skip_blank(self, i: int) -> int:
        """The offset of the next token at or after ``i`` (whitespace, comments and line splices skipped)."""
        text = self.text
        while i < len(text):
            if text[i] in " \t\r\n\f\v":
                i += 1
            elif text[i] == "\\" and text[i + 1 : i + 2] == "\n":
                i += 2
            elif i in self.comments:
                i = self.comments[i]
            else:
                break
        return i


def _cpp_decode(text: str, literal: _CppLiteral) -> tuple[list[str], list[int]]:
    """The characters of a literal and the offset each was written at."""
    if literal.raw or text.find("\\", literal.body, literal.body_end) < 0:
        return list(text[literal.body : literal.body_end]), list(range(literal.body, literal.body_end))
    chars: list[str] = []
    offsets: list[int] = []
    k = literal.body
    end = literal.body_end
    while k < end:
        ch = text[k]
        if ch != "\\":
            chars.append(ch)
            offsets.append(k)
            k += 1
            continue
        esc = text[k + 1 : k + 2]
        if esc == "\n":  # line splice
            k += 2
            continue
        if not esc:  # an unterminated literal ending in a backslash: keep it as written
            chars.append(ch)
            offsets.append(k)
            k += 1
            continue
        if esc in _CPP_SIMPLE_ESCAPES:
            chars.append(_CPP_SIMPLE_ESCAPES[esc])
            width = 2
        elif esc and esc in _OCTAL:
            width = 2
            while width < 4 and k + width < end and text[k + width] in _OCTAL:
                width += 1
            chars.append(chr(int(text[k + 1 : k + width], 8)))
        elif esc == "x":
            width = 2
            while k + width < end and is_hex(text[k + width]):
                width += 1
            chars.append(chr(min(int(text[k + 2 : k + width], 16), 0x10FFFF)) if width > 2 else "x")
        elif esc in ("u", "U"):
            digits = text[k + 2 : k + 2 + (4 if esc == "u" else 8)]
            if len(digits) == (4 if esc == "u" else 8) and is_hex(digits) and int(digits, 16) < 0x110000:
                chars.append(chr(int(digits, 16)))
                width = 2 + len(digits)
            else:
                chars.append(esc)
                width = 2
        else:
            # unknown escape: compilers warn and keep the character
            chars.append(esc)
            width = 2
        offsets.append(k)
        k += width
    return chars, offsets


def cpp_source(source: SourceFile, text: str) -> None:
    wants_sites = any(word in text for word in _CPP_WORDS)
    if not wants_sites and "pbp:" not in text:
        return
    scan = _CppScan(text)
    where = LineIndex(text)
    if wants_sites:
        found: list[tuple[int, SchemaSite | Problem]] = []
        for lo, hi in scan.code:
            for callee in _CPP_CALLEES:
                k = text.find(callee, lo, hi)
                while k >= 0:
                    after = k + len(callee)
                    if (k == 0 or not _is_ident_char(text[k - 1])) and not _is_ident_char(text[after : after + 1] or " "):
                        context = _cpp_context(text, k, callee)
                        item = _cpp_call(scan, where, source, k, after, context) if context else None
                        if item is not None:
                            found.append((k, item))
                    k = text.find(callee, after, hi)
        found.sort(key=lambda item: item[0])
        for _, item in found:
            if isinstance(item, SchemaSite):
                source.sites.append(item)
            else:
                source.problems.append(item)
    if "pbp:" in text:
        for start, end in scan.comments.items():
            k = text.find("pbp:", start, end)
            if k < 0:
                continue
            line, column = where(k)  # a block comment can put it on a later line than its start
            directive = parse_directive(text[k:end], line, column)
            if directive is not None:
                source.suppressions.append(directive)


def _cpp_context(text: str, k: int, callee: str) -> str | None:
    """The context of a schema call named ``callee`` at offset ``k``; None when it is not one."""
    if callee == "schema":
        # only torch::schema / c10::schema: a bare `schema(` is too common a name to be sure of
        if text[k - 2 : k] != "::":
            return None
        j = k - 2
        while j > 0 and _is_ident_char(text[j - 1]):
            j -= 1
        return {"torch": CONTEXT_TORCH_SCHEMA, "c10": CONTEXT_C10_SCHEMA}.get(text[j : k - 2])
    if callee == "parseSchema":
        return CONTEXT_JIT_PARSE_SCHEMA
    if callee == "parseSchemaOrName":
        return CONTEXT_JIT_PARSE_SCHEMA_OR_NAME
    return CONTEXT_CPP


def _cpp_call(scan: _CppScan, where: LineIndex, source: SourceFile, callee_at: int, after_callee: int, context: str) -> SchemaSite | Problem | None:
    """The schema site (or note) of the call whose name ends at ``after_callee``; None if it is not one.

    Reads the first argument up to its ',' or ')' at nesting depth 0. Only string literals at depth 0
    count (in ``m.def(TORCH_SELECTIVE_SCHEMA("..."))`` the literal belongs to the inner call, found on
    its own).
    """
    text = scan.text
    n = len(text)
    k = scan.skip_blank(after_callee)
    if text[k : k + 1] != "(":
        return None
    k = scan.skip_blank(k + 1)
    literals: list[_CppLiteral] = []
    other = template = -1
    depth = tokens = 0
    while True:
        tokens += 1
        if k >= n or tokens > _CPP_MAX_TOKENS:
            return None
        literal = scan.literals.get(k)
        if literal is not None:
            if depth == 0:
                literals.append(literal)
            k = scan.skip_blank(literal.end)
            continue
        ch = text[k]
        if depth == 0 and ch in ",)":
            break
        if ch == ";" or (depth == 0 and ch in "]}"):
            return None  # the statement ended: not a call with a schema argument
        if text[k : k + 2] in TEMPLATE_OPENERS:
            template = k
            break
        if ch == "#" and _starts_line(text, k):
            # a preprocessor directive between the pieces (#if / #else / #endif): its whole logical line
            other = k if other < 0 else other
            k = _end_of_logical_line(text, k)
        elif _is_ident_char(ch):
            j = k + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            if depth == 0 and other < 0:
                other = k
            k = j
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif depth == 0 and other < 0:
                other = k
            k += 1
        k = scan.skip_blank(k)
    if not literals:
        return None
    span = (where(callee_at)[0], where(k)[0])
    if template >= 0:
        return template_note(source.path, text, template, where(template), span)
    if other >= 0:
        line, column = where(other)
        shown = _cpp_shown(scan, other)
        if shown.startswith("#") and _starts_line(text, other):
            message = f"cannot read statically: a preprocessor directive ('{shown}') sits between the string literals; not checked"
        else:
            message = f"cannot read statically: the schema text is joined with '{shown}', known only when the file is compiled; not checked"
        return Problem(source.path, line, column, message, "note", "not-static", span=span)
    offsets = array("q")
    chars: list[str] = []
    for literal in literals:
        decoded, at = _cpp_decode(text, literal)
        chars.extend(decoded)
        offsets.extend(at)
    offsets.append(literals[-1].body_end)
    typevars = _cpp_bool_argument(scan, k) if context != CONTEXT_CPP and text[k] == "," else None
    return SchemaSite(source.path, "".join(chars), OffsetPositions(offsets, where), context, source.lines, span, typevars)


def _starts_line(text: str, k: int) -> bool:
    """Whether only blanks precede offset ``k`` on its line (where '#' opens a directive, not a '#x' stringizing)."""
    j = k
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    return j == 0 or text[j - 1] == "\n"


def _end_of_logical_line(text: str, k: int) -> int:
    """The offset of the newline that ends the (backslash-continued) line holding offset ``k``."""
    while True:
        end = text.find("\n", k)
        if end < 0:
            return len(text)
        if end > 0 and text[end - 1] == "\\":
            k = end + 1
            continue
        return end


def _cpp_shown(scan: _CppScan, k: int) -> str:
    """The unresolved piece at ``k`` as written, for a note: a name with its parenthesized arguments, a
    directive line, or one character; blanks collapsed, cut at 40 characters."""
    text = scan.text
    if text[k] == "#" and _starts_line(text, k):
        end = _end_of_logical_line(text, k)
    elif text[k] == "#":  # a macro parameter turned into a string: #NAME
        end = k + 1
        while end < len(text) and (_is_ident_char(text[end]) or text[end] == "#"):
            end += 1
    elif _is_ident_char(text[k]):
        end = k
        while end < len(text) and (_is_ident_char(text[end]) or text[end : end + 2] == "::"):
            end += 2 if text[end] == ":" else 1
        j = scan.skip_blank(end)
        if text[j : j + 1] == "(":
            depth = 0
            while j < len(text) and j < k + 200:
                literal = scan.literals.get(j)
                if literal is not None:
                    j = literal.end
                    continue
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    end = j
                    break
    else:
        end = k + 1
    shown = " ".join(text[k:end].split())
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _cpp_bool_argument(scan: _CppScan, k: int) -> bool | None:
    """A ``true``/``false`` written as a later argument of the call (``parseSchema(s, false)``,
    ``torch::schema(s, kind, true)``: the allow_typevars flag); None when there is none."""
    text = scan.text
    depth = tokens = 0
    flag: bool | None = None
    k = scan.skip_blank(k + 1)
    while k < len(text) and tokens < _CPP_MAX_TOKENS:
        tokens += 1
        literal = scan.literals.get(k)
        if literal is not None:
            k = scan.skip_blank(literal.end)
            continue
        ch = text[k]
        if ch == ";" or (depth == 0 and ch == ")"):
            break
        if _is_ident_char(ch):
            j = k + 1
            while j < len(text) and _is_ident_char(text[j]):
                j += 1
            if depth == 0 and text[k:j] in ("true", "false"):
                flag = text[k:j] == "true"
            k = j
        else:
            depth += {"(": 1, ")": -1, "[": 1, "]": -1, "{": 1, "}": -1}.get(ch, 0)
            k += 1
        k = scan.skip_blank(k)
    return flag
