"""Syntax errors of the schema language: an engine failure worded as a :class:`SchemaError` in one voice.

"expected ')' or ',' after argument 'x', got 'y'": what the parser could have shifted (asked of the engine, not
read off the merged LALR state), where it stood (from the top of its value stack), and what it found (a token,
end of input, or the character the lexer could not start a token with). Invariants: the expected tokens are
named by ``_DESCRIBE``, always in the same order; end of input is reported at ``len(text)``; no engine object
leaves this module inside the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._diagnostics import join_or
from .._lalr.choice import Engine, Failure, Token
from ..errors import SchemaError
from ._ast import OperatorName, Return
from ._fail import _quoted
from ._types import AliasInfo, Type

_DESCRIBE = {
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
    "DOTS": "'...'", "ARROW": "'->'", "EQUAL": "'='", "STAR": "'*'", "QMARK": "'?'", "BANG": "'!'", "BAR": "'|'",
    "MINUS": "'-'", "NONE": "'None'", "NONETYPE": "'NoneType'", "TRUE": "'True'", "FALSE": "'False'",
    "NUMBER": "a number", "STRING": "a string", "NEWLINE": "a newline", "INDENT": "an indented line", "$END": "end of input",
}  # fmt: skip
_NAME_TERMINALS = frozenset({"IDENT", "TENSOR", "DICT", "UNION", "FUTURE", "AWAIT", "RREF", "TORCH_NS"})
_ORDER = ["a type", "a name", *_DESCRIBE.values()]


def _expected_text(expected: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    names = set(expected)
    shown = set()
    if "NONETYPE" in names:  # only where a type may start
        shown.add("a type")
        names -= _NAME_TERMINALS | {"NONE", "NONETYPE"}
    elif names & _NAME_TERMINALS:
        shown.add("a name")
        names -= _NAME_TERMINALS
    shown.update(_DESCRIBE.get(n, n) for n in names)
    ordered = sorted(shown, key=lambda s: (_ORDER.index(s) if s in _ORDER else len(_ORDER), s))
    return join_or(ordered), tuple(ordered)


def _context(stack: list[Any] | None) -> str:
    """Where the parser stood, from the top of its value stack: " after 'x'", " after a type", ..."""
    if stack is None:
        return ""
    if not stack:
        return " at the start"
    top = stack[-1]
    if isinstance(top, Token):
        return f" after {_quoted(top.value)}" if top.type != "NEWLINE" else " after a newline"
    if isinstance(top, tuple) and top:
        head = top[0]
        if isinstance(head, Type):
            return " after a type"
        if isinstance(head, AliasInfo):
            return " after an alias annotation"
        if isinstance(head, OperatorName):
            return " after the operator name"
        if head == "arg":
            return f" after argument {_quoted(top[2].value)}"
    if isinstance(top, Return):
        return " after a return"
    if isinstance(top, list):
        return " in an alias set"
    return ""


def _translate(e: Failure, engine: Engine, text: str) -> SchemaError:
    # LALR merges states, so a state's table can list tokens that would fail after a reduction: ask the engine
    # which tokens it would really shift there.
    allowed = sorted(engine.accepts(e.states))
    wanted, expected = _expected_text(allowed)
    context = _context(e.values)
    tok = e.token
    if tok is not None:
        if tok.type == "$END":
            pos, got = len(text), "end of input"
        else:
            pos = tok.start_pos
            got = {"NEWLINE": "a newline", "INDENT": "an indented line"}.get(tok.type) or _quoted(tok.value)
        return SchemaError(f"expected {wanted}{context}, got {got}", text, pos, expected)
    pos = e.pos
    ch = text[pos]
    if ch.isascii() and (ch.isalpha() or ch == "_"):
        end = pos
        while end < len(text) and text[end].isascii() and (text[end].isalnum() or text[end] == "_"):
            end += 1
        word = text[pos:end]
        got = f"reserved word '{word}'" if "IDENT" in allowed else f"'{word}'"
    elif ch == "#":
        got = "a '# type:' comment"
    elif ch in "'\"":
        got = "an unterminated string"
    elif ch == "\\":
        got = "a '\\' that does not continue the line"
    elif ch.isprintable() and not ch.isspace():
        got = f"'{ch}'"
    else:
        got = f"character {ch!r}"
    return SchemaError(f"expected {wanted}{context}, got {got}", text, pos, expected)
