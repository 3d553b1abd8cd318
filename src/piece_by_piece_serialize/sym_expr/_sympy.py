"""AST -> sympy: the object torch's deserializer would get from ``sympify`` of the same text, made by our code.

Each node becomes the call of one sympy or torch class on the converted arguments, in the namespace torch's
deserializer gives ``sympify`` (Note [one namespace]); ``Integer``, ``Rational``, ``Float``, ``Symbol`` and the
constants are sympy's own. Building evaluates as ``sympify`` does (sympy's default ``evaluate=True``), on numbers
the AST has already bounded (Note [bounded evaluation] in :mod:`._ast`), so it takes time linear in the text.
Whatever sympy or torch raise while building (a division by zero, contradictory assumptions) becomes a
:class:`SymExprError` naming the node.

The walk is iterative, and a node met twice (an equal subexpression) is built once.

Imports: the AST and the error class; sympy and ``torch.utils._sympy`` on first use.
"""

from __future__ import annotations

from typing import Any

from ..errors import SymExprError
from . import _ast as ast

__all__: list[str] = []  # private module

# Note [one namespace]
# ~~~~~~~~~~~~~~~~~~~~
# torch's GraphModuleDeserializer._parse_sym_expr reads an expression with sympify(text, locals=sympy_functions),
# so a name means its torch.utils._sympy.functions class when sympy_functions lists it (Mod is torch's Mod, not
# sympy's) and sympy's class otherwise. _classes() builds that same mapping for FUNCTIONS; tests/sym_expr checks
# it against the deserializer's own dictionary, so that a name never means something else here than in torch.

# The names GraphModuleDeserializer.sympy_functions maps to torch's classes; every other name of ast.FUNCTIONS is
# sympy's (torch's functions module has its own Max and Min too, which the deserializer does not use).
TORCH_FUNCTIONS = frozenset({
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt", "FloorToInt", "CeilDiv",
    "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator",
    "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal", "ToFloat", "Identity",
})  # fmt: skip

_CLASSES: dict[str, Any] = {}


def _classes() -> dict[str, Any]:
    """Each name of ast.FUNCTIONS -> the class it means in torch's deserializer (Note [one namespace])."""
    if not _CLASSES:
        import sympy
        import torch.utils._sympy.functions as functions

        for name in ast.FUNCTIONS:
            _CLASSES[name] = getattr(functions if name in TORCH_FUNCTIONS else sympy, name)
    return _CLASSES


def _literal(node: ast.SymExpr) -> Any:
    import sympy

    if isinstance(node, ast.Integer):
        return sympy.Integer(node.value)
    if isinstance(node, ast.Rational):
        return sympy.Rational(node.p, node.q)
    if isinstance(node, ast.Float):
        return sympy.Float(node.text, precision=node.precision)
    if isinstance(node, ast.Symbol):
        return sympy.Symbol(node.name, **dict(node.assumptions))
    if isinstance(node, ast.Constant):
        return {"true": sympy.true, "false": sympy.false, "oo": sympy.oo, "-oo": -sympy.oo}[node.name]
    raise TypeError(f"not a symbolic expression node: {type(node).__name__}")


# Note [endless indexing]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# torch's ModularIndexing.eval divides its base and divisor by their gcd and evaluates itself again while that
# gcd is not 1. Where the division changes nothing (a Float: gcd(1.0e-5, 2) is 1.0, not 1; an infinity or nan,
# which exact literals can make: Pow(Integer(0), Integer(-1)) is zoo) it recurses until Python's recursion limit,
# each level running sympy.simplify: about 10 s at the default limit, and sympify of the same text takes as long
# to fail (a fuzz finding). So before calling it the builder takes the same steps itself, at most
# _INDEXING_STEPS of them, and refuses where they come back to a pair already seen or never stop. torch writes
# ModularIndexing of integer size expressions only; there the first step stops (gcd 1, integers, divisor 1).
_INDEXING_STEPS = 32


def _endless_indexing(base: Any, divisor: Any, modulus: Any) -> bool:
    """Whether torch's ModularIndexing(base, divisor, modulus) would recurse without end (Note [endless indexing])."""
    import sympy
    from torch.utils._sympy.functions import safe_gcd

    seen: set[tuple[Any, Any]] = set()
    for _ in range(_INDEXING_STEPS):
        if base == 0 or modulus == 1 or divisor == 1 or all(isinstance(a, sympy.Integer) for a in (base, divisor, modulus)):
            return False
        try:
            gcd = safe_gcd(base, divisor)
        except Exception:  # whatever the gcd raises, torch's own call raises or catches too: it ends there
            return False
        if gcd == 1:
            return False
        if (base, divisor) in seen:
            return True
        seen.add((base, divisor))
        base, divisor = sympy.simplify(base / gcd), sympy.simplify(divisor / gcd)
    return True


def _refusals() -> tuple[type[BaseException], ...]:
    """What sympy and torch's functions raise on arguments they refuse: Python's errors, and sympy's polynomial
    errors, which derive from Exception alone (a gcd with ``-oo`` as a coefficient: PolynomialDivisionFailed)."""
    from sympy.polys.polyerrors import BasePolynomialError

    return (ArithmeticError, TypeError, ValueError, AttributeError, AssertionError, RecursionError, BasePolynomialError)


def to_sympy(root: ast.SymExpr) -> Any:
    """The sympy object ``root`` stands for; :class:`SymExprError` when sympy or torch refuse to build it."""
    classes = _classes()
    built: dict[ast.SymExpr, Any] = {}
    stack: list[tuple[ast.SymExpr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if node in built:
            continue
        try:
            if not isinstance(node, ast.Call):
                built[node] = _literal(node)
            elif ready:
                args = tuple(built[a] for a in node.args)
                if node.function == "ModularIndexing" and _endless_indexing(*args):
                    raise ValueError("torch's ModularIndexing recurses without end on a float, an infinity or nan (Note [endless indexing])")
                built[node] = classes[node.function](*args)
            else:
                stack.append((node, True))
                stack.extend((a, False) for a in reversed(node.args))
        except _refusals() as exc:
            # what sympy and torch's functions raise on arguments they refuse; the AST bounded their cost
            raise SymExprError(f"{type(exc).__name__} while building {node}: {exc}", str(root), 0) from None
    return built[root]
