"""The symbolic-expression language: the sizes, floats and booleans of an exported program, read without sympify.

torch.export writes each symbolic value of a program as sympy's ``srepr`` text
(``Mul(Integer(4), Symbol('s13', positive=True, integer=True))``), and its deserializer reads it back with
``sympy.sympify``, which evaluates Python: a file can make it run for hours (``Pow(Integer(10),
Integer(10**8))``) or call any sympy function. This package reads the same text with its own grammar
(``grammars/sym_expr.lark``, the only definition of the language) into a typed AST (:mod:`._ast`, whose ``str`` is
the canonical text, the one torch writes), and turns the AST into the very sympy object ``sympify`` would give,
with its own code and bounded cost (:func:`sym_expr_to_sympy`). The artifact loader hands torch those objects,
never the text.

Invariants: ``parse_sym_expr(str(x)) == x`` for every AST ``x``; ``str(parse_sym_expr(s)) == s`` for every text
torch writes; ``sym_expr_to_sympy(parse_sym_expr(s)) == sympy.sympify(s, locals=torch's namespace)`` for every such
text (tests/sym_expr); malformed, unknown or over-limit input raises :class:`SymExprError` with position and
caret, never a lark, sympy or torch exception.

Imports: the AST and the error class at import time; the parser (:mod:`._transform`, the engine, no lark) on first
parse; sympy and torch's sympy functions on first conversion (:mod:`._sympy`).
"""

from __future__ import annotations

from typing import Any

from ..errors import SymExprError
from ._ast import (
    ASSUMPTIONS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    MAX_INTEGER_DIGITS,
    MAX_NUMBER_BITS,
    MAX_SYMBOL_DEGREE,
    Call,
    Constant,
    Float,
    Integer,
    Rational,
    Symbol,
    SymExpr,
)

__all__ = [
    "ASSUMPTIONS",
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "MAX_INTEGER_DIGITS",
    "MAX_NUMBER_BITS",
    "MAX_SYMBOL_DEGREE",
    "Call",
    "Constant",
    "Float",
    "Integer",
    "Rational",
    "SymExpr",
    "SymExprError",
    "Symbol",
    "is_symbol_name",
    "parse_sym_expr",
    "read_sym_expr",
    "sym_expr_to_sympy",
]


def parse_sym_expr(text: str) -> SymExpr:
    """The AST of one expression as torch writes it (sympy's ``srepr``).

    Raises :class:`SymExprError` (with position and caret) for text outside the language: an unknown function
    or assumption, a wrong number of arguments, an integer of more than :data:`MAX_INTEGER_DIGITS` digits,
    calls nested more than :data:`MAX_DEPTH` deep, a number of more than :data:`MAX_NUMBER_BITS` bits or a power of
    a symbol beyond :data:`MAX_SYMBOL_DEGREE` formed while building, a text longer than :data:`MAX_EXPRESSION_LENGTH`; ``TypeError`` when ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"a symbolic expression must be a str, got {type(text).__name__}")
    from ._transform import parse

    return parse(text)


def sym_expr_to_sympy(expr: SymExpr) -> Any:
    """The sympy object ``expr`` stands for, equal to what torch's deserializer makes of ``str(expr)``.

    Needs sympy and torch. Raises :class:`SymExprError` when sympy or torch refuse to build it (a division by
    zero, contradictory assumptions); its cost is bounded by the limits the AST checked.
    """
    from ._sympy import to_sympy

    return to_sympy(expr)


def read_sym_expr(text: str) -> Any:
    """``sym_expr_to_sympy(parse_sym_expr(text))``: the sympy object of one expression as torch writes it."""
    return sym_expr_to_sympy(parse_sym_expr(text))


def is_symbol_name(name: str) -> bool:
    """Whether ``name`` is a symbol's name in the language (what ``Symbol('<name>')`` holds: an ASCII
    identifier); the range constraints of a program are keyed by such names. Checked by the grammar itself."""
    if not isinstance(name, str) or len(name) > MAX_EXPRESSION_LENGTH:
        return False
    try:
        node = parse_sym_expr(f"Symbol({name!r})")
    except SymExprError:
        return False
    return isinstance(node, Symbol) and node.name == name
