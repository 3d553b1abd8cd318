"""Expression text -> AST: the LALR tables of ``grammars/sym_expr.lark`` with the callbacks that build the AST.

The engine (:mod:`.._lalr.engine`, contextual lexer) calls the callbacks of :class:`_ToAst` bottom-up, one per
rule reduced, and they make the frozen nodes of :mod:`._ast`, whose own checks (vocabulary, digits, nesting, the
bound of the numbers, Note [bounded evaluation]) then run; nothing recurses and lark is not imported. A syntax error
becomes a :class:`SymExprError` at the offending character with the expected tokens named for people; a node's
refusal becomes one at the token that starts the node.

Invariant: a text with a syntax error anywhere reports that syntax error, even when a node's check of an earlier
part fails first: the text is then parsed again with callbacks that check nothing (as type_info's Note [syntax
errors first]).

Imports: the engine and its tables (:mod:`.._lalr`), the error class, the diagnostics and the AST. Never the
package ``__init__`` (which imports this module on first parse), never lark, sympy or torch.
"""

from __future__ import annotations

import threading
from typing import Any

from .._diagnostics import Refused, join_or
from .._lalr.choice import Engine, Failure, Token
from .._lalr.tables import load
from ..errors import SymExprError
from . import _ast as ast

__all__: list[str] = []  # private module

# How each terminal is named in an error message ("expected ',' or ')', got 'x'").
_DISPLAY = {
    "NAME": "a function name",
    "INTEGER": "'Integer'",
    "RATIONAL": "'Rational'",
    "FLOAT": "'Float'",
    "SYMBOL": "'Symbol'",
    "PRECISION": "'precision'",
    "BOOL": "'True' or 'False'",
    "TRUE": "'true'",
    "FALSE": "'false'",
    "INFINITY": "'oo'",
    "INT": "an integer",
    "DECIMAL": "a quoted decimal number",
    "SYMBOL_NAME": "a quoted symbol name",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "EQUALS": "'='",
    "MINUS": "'-'",
    "$END": "end of input",
}


def _node(make: Any, pos: int, *args: Any) -> ast.SymExpr:
    """``make(*args)``, a node whose own check's ValueError becomes a refusal at ``pos``."""
    try:
        node: ast.SymExpr = make(*args)
    except ValueError as err:
        raise Refused(str(err), pos) from None
    return node


def _int(tok: Token) -> int:
    # the grammar's INT is Python's integer spelling; its length is checked before int() reads it
    if len(tok.value.lstrip("-")) > ast.MAX_INTEGER_DIGITS:
        raise Refused(f"an integer has at most MAX_INTEGER_DIGITS={ast.MAX_INTEGER_DIGITS} digits", tok.start_pos)
    return int(tok.value)


class _ToAst:
    """Bottom-up: tokens -> literals -> calls. Each method takes the rule's children (tokens kept) and returns its
    value; the callbacks keep no state, so one engine serves every thread."""

    def start(self, c: list[ast.SymExpr]) -> ast.SymExpr:
        return c[0]

    def call(self, c: list[Any]) -> ast.SymExpr:
        name: Token = c[0]
        args = tuple(item for item in c[2:] if not isinstance(item, Token))
        return _node(ast.Call, name.start_pos, name.value, args)

    def integer(self, c: list[Token]) -> ast.SymExpr:
        return _node(ast.Integer, c[2].start_pos, _int(c[2]))

    def rational(self, c: list[Token]) -> ast.SymExpr:
        return _node(ast.Rational, c[2].start_pos, _int(c[2]), _int(c[4]))

    def float(self, c: list[Token]) -> ast.SymExpr:
        text = c[2].value[1:-1]  # DECIMAL is quoted
        return _node(ast.Float, c[2].start_pos, text, _int(c[6]))

    def assumption(self, c: list[Token]) -> tuple[str, bool, int]:
        return c[0].value, c[2].value == "True", c[0].start_pos

    def symbol(self, c: list[Any]) -> ast.SymExpr:
        name: Token = c[2]
        assumptions: list[tuple[str, bool, int]] = [item for item in c[3:] if isinstance(item, tuple)]
        seen: set[str] = set()
        for key, _, pos in assumptions:  # refused at the assumption itself, not at the symbol
            if key not in ast.ASSUMPTIONS:
                raise Refused(f"unknown assumption {key!r} of a Symbol", pos)
            if key in seen:
                raise Refused(f"the assumption {key!r} is given twice", pos)
            seen.add(key)
        return _node(ast.Symbol, name.start_pos, name.value[1:-1], tuple((k, v) for k, v, _ in assumptions))

    def true(self, c: list[Token]) -> ast.SymExpr:
        return ast.Constant("true")

    def false(self, c: list[Token]) -> ast.SymExpr:
        return ast.Constant("false")

    def infinity(self, c: list[Token]) -> ast.SymExpr:
        return ast.Constant("oo")

    def negative_infinity(self, c: list[Token]) -> ast.SymExpr:
        return ast.Constant("-oo")


class _Shapes:
    """Callbacks that build nothing and check nothing: a parse with them tells a syntax error from a refusal."""

    def __getattr__(self, rule: str) -> Any:
        if rule.startswith("__"):
            raise AttributeError(rule)
        return lambda children: None


_lock = threading.Lock()
_engines: dict[str, Engine] = {}


def _engine(kind: str) -> Engine:
    """The engine building the AST (``"ast"``) or checking only the syntax (``"shapes"``), each built once."""
    engine = _engines.get(kind)
    if engine is None:
        with _lock:
            engine = _engines.get(kind)
            if engine is None:
                engine = Engine(load("sym_expr"), _ToAst() if kind == "ast" else _Shapes())
                _engines[kind] = engine
    return engine


def _syntax_error(text: str, err: Failure, engine: Engine) -> SymExprError:
    # what the parser could really take here (a merged LALR state lists look-aheads of other contexts, and a
    # contextual lexer's state the terminals of every such context)
    expected = sorted({_DISPLAY.get(n, n) for n in engine.accepts(err.states) or err.expected})
    if err.token is not None and err.token.type == "$END":
        pos, got = len(text), "end of input"
    elif err.token is not None:
        pos, got = err.token.start_pos, repr(err.token.value)
    else:  # no terminal of this state's lexer matches here
        pos, got = err.pos, repr(text[err.pos])
    if not text.strip(" "):
        return SymExprError("empty expression", text, len(text), tuple(expected))
    return SymExprError(f"expected {join_or(expected, empty='')}, got {got}", text, pos, tuple(expected))


def parse(text: str) -> ast.SymExpr:
    """The AST of ``text``; :class:`SymExprError` for any text outside the language or its limits."""
    if len(text) > ast.MAX_EXPRESSION_LENGTH:
        raise SymExprError(
            f"an expression has at most MAX_EXPRESSION_LENGTH={ast.MAX_EXPRESSION_LENGTH} characters, "
            f"this one {len(text)}",
            text[:200],
            0,
        )
    engine = _engine("ast")
    try:
        result: ast.SymExpr = engine.parse(text)
        return result
    except Failure as err:
        raise _syntax_error(text, err, engine) from None
    except Refused as err:
        refused = err
    shapes = _engine("shapes")
    try:
        shapes.parse(text)
    except Failure as err:
        raise _syntax_error(text, err, shapes) from None
    raise SymExprError(refused.msg, text, refused.pos) from None
