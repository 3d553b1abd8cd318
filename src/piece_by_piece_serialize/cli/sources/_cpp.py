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
from collections.abc import Sequence
from dataclasses import dataclass

from .._contexts import (
    CONTEXT_C10_SCHEMA,
    CONTEXT_CPP,
    CONTEXT_JIT_PARSE_SCHEMA,
    CONTEXT_JIT_PARSE_SCHEMA_OR_NAME,
    CONTEXT_SCHEMA_FUNCTION,
    CONTEXT_TORCH_SCHEMA,
    NAME_ONLY,
)
from ._model import TEMPLATE_OPENERS, Problem, SchemaSite, SourceFile, is_hex, parse_directive, template_note
from ._positions import LineIndex, OffsetPositions

__all__ = ["cpp_source"]


_CPP_CALLEES = ("def", "TORCH_SELECTIVE_SCHEMA", "schema", "parseSchema", "parseSchemaOrName", "Operator")
# TorchScript's legacy registration, read only in a file that names it: `RegisterOperators().op("schema", fn)`
# and `RegisterOperators::options().schema("schema")` (`op` and `schema` are too common a name otherwise)
_LEGACY_CALLEES = ("op",)
_LEGACY_WORD = "RegisterOperators"
_CPP_WORDS = ("def", "schema", "Schema", "SCHEMA", "Operator")  # a file without any of these holds no schema call
# The body of a pybind11 module: its `m.def("name", &fn)` bind Python functions, they never define an operator.
_PYBIND_MODULE = "PYBIND11_MODULE"
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


def cpp_source(source: SourceFile, text: str, functions: Sequence[str] = ()) -> None:
    """The schema sites, notes and suppressions of a C++ file; ``functions`` are the project's own calls that
    take a schema as their first argument (``--schema-function``), read like ``torch::schema(``."""
    functions = [name.rpartition("::")[2] for name in functions]
    wants_sites = any(word in text for word in _CPP_WORDS) or any(name in text for name in functions)
    if not wants_sites and "pbp:" not in text:
        return
    scan = _CppScan(text)
    where = LineIndex(text)
    if wants_sites:
        found: list[tuple[int, SchemaSite | Problem]] = []
        legacy = _LEGACY_WORD in text
        callees = _CPP_CALLEES + (_LEGACY_CALLEES if legacy else ()) + tuple(functions)
        bindings = _pybind_bodies(scan) if _PYBIND_MODULE in text else []
        for lo, hi in scan.code:
            for callee in callees:
                k = text.find(callee, lo, hi)
                while k >= 0:
                    after = k + len(callee)
                    if (k == 0 or not _is_ident_char(text[k - 1])) and not _is_ident_char(text[after : after + 1] or " "):
                        context = _cpp_context(text, k, callee, legacy, functions)
                        if context == CONTEXT_CPP and any(start <= k < end for start, end in bindings):
                            context = None  # a pybind11 binding of a Python function, named, never a schema
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


def _cpp_context(text: str, k: int, callee: str, legacy: bool = False, functions: Sequence[str] = ()) -> str | None:
    """The context of a schema call named ``callee`` at offset ``k``; None when it is not one."""
    if callee in functions:
        return CONTEXT_SCHEMA_FUNCTION
    if callee == "schema":
        if legacy and text[k - 1 : k] == ".":
            # RegisterOperators::options().schema("..."): Options::schema calls parseSchemaOrName
            return CONTEXT_JIT_PARSE_SCHEMA_OR_NAME
        # only torch::schema / c10::schema: a bare `schema(` is too common a name to be sure of
        if text[k - 2 : k] != "::":
            return None
        return {"torch": CONTEXT_TORCH_SCHEMA, "c10": CONTEXT_C10_SCHEMA}.get(_qualifier(text, k))
    if callee == "op":
        # RegisterOperators().op("schema or name", fn): the legacy registration, through parseSchemaOrName
        return CONTEXT_JIT_PARSE_SCHEMA_OR_NAME if text[k - 1 : k] == "." else None
    if callee == "Operator":
        # torch::jit::Operator("ns::f(...) -> ...", op, alias): its schema is parsed with parseSchema; bare
        # (under `using namespace torch::jit`) or qualified by jit::, never a member or another namespace's class
        if text[k - 1 : k] == "." or (text[k - 2 : k] == "::" and _qualifier(text, k) != "jit"):
            return None
        return CONTEXT_JIT_PARSE_SCHEMA
    if callee == "parseSchema":
        return CONTEXT_JIT_PARSE_SCHEMA
    if callee == "parseSchemaOrName":
        return CONTEXT_JIT_PARSE_SCHEMA_OR_NAME
    return CONTEXT_CPP


@dataclass(slots=True)
class _Argument:
    """One argument of a call as the scanner sees it: its string literals at depth 0 and what else it holds."""

    literals: list[_CppLiteral]
    end: int  # the offset of the ',' or ')' that ends it (of the Jinja opener, when ``template`` is set)
    other: int = -1  # the first piece at depth 0 that is not a literal (-1: none)
    template: int = -1  # a Jinja opener inside it
    names_only: bool = True  # every such piece is a macro parameter made a string (`#name`)


def _read_argument(scan: _CppScan, k: int) -> _Argument | None:
    """The argument that starts at offset ``k``, read token by token up to its ',' or ')' at depth 0; None when
    the statement ends first or it runs past the token bound."""
    text = scan.text
    n = len(text)
    arg = _Argument([], k)
    depth = tokens = 0
    while True:
        tokens += 1
        if k >= n or tokens > _CPP_MAX_TOKENS:
            return None
        literal = scan.literals.get(k)
        if literal is not None:
            if depth == 0:
                arg.literals.append(literal)
            k = scan.skip_blank(literal.end)
            continue
        ch = text[k]
        if depth == 0 and ch in ",)":
            break
        if ch == ";" or (depth == 0 and ch in "]}"):
            return None  # the statement ended: not a call with a schema argument
        if text[k : k + 2] in TEMPLATE_OPENERS:
            arg.template = k
            break
        if depth == 0 and arg.other < 0:
            arg.other = k
        if ch == "#" and _starts_line(text, k):
            # a preprocessor directive between the pieces (#if / #else / #endif): its whole logical line
            arg.names_only = False
            k = _end_of_logical_line(text, k)
        elif ch == "#" and depth == 0 and _is_ident_char(text[k + 1 : k + 2] or " "):
            k += 1  # `#name` in a macro body: the name, made a string by the preprocessor
            while k < n and _is_ident_char(text[k]):
                k += 1
        elif _is_ident_char(ch):
            arg.names_only = arg.names_only and depth > 0
            while k < n and _is_ident_char(text[k]):
                k += 1
        else:
            arg.names_only = arg.names_only and depth > 0
            depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
            k += 1
        k = scan.skip_blank(k)
    arg.end = k
    return arg


def _cpp_call(scan: _CppScan, where: LineIndex, source: SourceFile, callee_at: int, after_callee: int, context: str) -> SchemaSite | Problem | None:
    """The schema site (or note) of the call whose name ends at ``after_callee``; None if it is not one.

    Reads the first argument (for a project's schema function, the first that holds a string literal) up to
    its ',' or ')' at nesting depth 0. Only string literals at depth 0 count (in
    ``m.def(TORCH_SELECTIVE_SCHEMA("..."))`` the literal belongs to the inner call, found on its own).
    """
    text = scan.text
    k = scan.skip_blank(after_callee)
    if text[k : k + 1] != "(":
        return None
    arg = _read_argument(scan, scan.skip_blank(k + 1))
    while context == CONTEXT_SCHEMA_FUNCTION and arg is not None and not arg.literals and text[arg.end : arg.end + 1] == ",":
        arg = _read_argument(scan, scan.skip_blank(arg.end + 1))
    if arg is None or not arg.literals:
        return None
    k = arg.end
    span = (where(callee_at)[0], where(k)[0])
    if arg.template >= 0:
        return template_note(source.path, text, arg.template, where(arg.template), span)
    if arg.other >= 0:
        if arg.names_only and context in NAME_ONLY and not any("(" in text[lit.body : lit.body_end] for lit in arg.literals):
            # `m.def("softmax_" #name, &fn)`, `.def("_set_" #field, ...)`: a name the preprocessor completes, with
            # no argument list anywhere: a bare name (a pybind11 or torch::class_ method binding, or an operator
            # whose schema torch infers), never half a schema
            return None
        line, column = where(arg.other)
        shown = _cpp_shown(scan, arg.other)
        if shown.startswith("#") and _starts_line(text, arg.other):
            message = f"cannot read statically: a preprocessor directive ('{shown}') sits between the string literals; not checked"
        else:
            message = f"cannot read statically: the schema text is joined with '{shown}', known only when the file is compiled; not checked"
        return Problem(source.path, line, column, message, "note", "not-static", span=span)
    offsets = array("q")
    chars: list[str] = []
    for literal in arg.literals:
        decoded, at = _cpp_decode(text, literal)
        chars.extend(decoded)
        offsets.extend(at)
    offsets.append(arg.literals[-1].body_end)
    typevars = _cpp_bool_argument(scan, k) if context != CONTEXT_CPP and text[k] == "," else None
    return SchemaSite(source.path, "".join(chars), OffsetPositions(offsets, where), context, source.lines, span, typevars)


def _qualifier(text: str, k: int) -> str:
    """The name before the ``::`` that ends just before offset ``k`` (``torch`` in ``torch::schema``)."""
    j = k - 2
    while j > 0 and _is_ident_char(text[j - 1]):
        j -= 1
    return text[j : k - 2]


def _pybind_bodies(scan: _CppScan) -> list[tuple[int, int]]:
    """The ``{...}`` bodies of ``PYBIND11_MODULE(name, m) {...}``, as offset intervals (literals and comments
    inside them skipped when the braces are counted)."""
    text = scan.text
    bodies: list[tuple[int, int]] = []
    k = text.find(_PYBIND_MODULE)
    while k >= 0:
        after = k + len(_PYBIND_MODULE)
        if (k == 0 or not _is_ident_char(text[k - 1])) and k not in scan.literals:
            j = scan.skip_blank(after)
            close = _matching(scan, j, "(", ")") if text[j : j + 1] == "(" else -1
            j = scan.skip_blank(close + 1) if close >= 0 else -1
            end = _matching(scan, j, "{", "}") if j >= 0 and text[j : j + 1] == "{" else -1
            if end >= 0:
                bodies.append((j, end))
        k = text.find(_PYBIND_MODULE, after)
    return bodies


def _matching(scan: _CppScan, k: int, opener: str, closer: str) -> int:
    """The offset of the ``closer`` that matches the ``opener`` at ``k`` (literals and comments skipped), or -1."""
    text = scan.text
    depth = 0
    while k < len(text):
        literal = scan.literals.get(k)
        if literal is not None:
            k = literal.end
            continue
        if k in scan.comments:
            k = scan.comments[k]
            continue
        ch = text[k]
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return -1


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
