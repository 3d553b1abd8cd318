"""The AST of a symbolic expression, its vocabulary and limits, and its canonical printer (``str``).

A node is a frozen, slotted dataclass: :class:`Integer`, :class:`Rational`, :class:`Float`, :class:`Symbol`,
:class:`Constant` (``true``, ``false``, ``oo``, ``-oo``) or :class:`Call` (a function of :data:`FUNCTIONS` on
its arguments). ``str(node)`` is the text sympy's ``srepr`` writes for the expression the node stands for, so the
text torch writes is already canonical: ``parse_sym_expr(str(x)) == x`` for every node and
``str(parse_sym_expr(s)) == s`` for every ``s`` torch wrote.

Invariants, checked when a node is made (whoever makes it: the parser or a caller), each a ``ValueError``:

* a call names a function of :data:`FUNCTIONS` with a number of arguments it takes; a symbol's assumptions are
  names of :data:`ASSUMPTIONS`, each once; an integer has at most :data:`MAX_INTEGER_DIGITS` digits;
* nesting is at most :data:`MAX_DEPTH` calls deep, so every walk of a node (the printer, the conversion to sympy)
  is bounded without recursion limits;
* no number the expression evaluates to while sympy builds it can exceed :data:`MAX_NUMBER_BITS` bits
  (Note [bounded evaluation]): each node carries an upper bound of the bits of the numbers it makes.

Imports: nothing from the library; no sympy, no torch (the conversion, :mod:`._sympy`, imports them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    "Symbol",
]

#: Longest expression text read (characters); torch writes a few hundred at most.
MAX_EXPRESSION_LENGTH = 100_000
#: Most digits of an integer literal: 20 holds every 64-bit integer.
MAX_INTEGER_DIGITS = 20
#: Deepest nesting of calls.
MAX_DEPTH = 64
#: Largest number (in bits) any part of an expression may evaluate to (Note [bounded evaluation]).
MAX_NUMBER_BITS = 4096
#: Highest power of a symbol any part of an expression may form (Note [bounded evaluation]).
MAX_SYMBOL_DEGREE = 64

# The functions an expression may call, with the numbers of arguments each takes (None: any number from the
# least). The names are those torch's deserializer reads in its sympify namespace: sympy's classes that srepr
# writes for the expressions of sizes (Add, Mul, Pow, Max, Min, the relations, the logic) and the functions of
# torch/utils/_sympy/functions.py it lists (GraphModuleDeserializer.sympy_functions); tests/sym_expr checks both.
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    # sympy
    "Add": (2, None),
    "Mul": (2, None),
    "Pow": (2, 2),
    "Max": (2, None),
    "Min": (2, None),
    "Equality": (2, 2),
    "Unequality": (2, 2),
    "StrictLessThan": (2, 2),
    "LessThan": (2, 2),
    "StrictGreaterThan": (2, 2),
    "GreaterThan": (2, 2),
    "And": (2, None),
    "Or": (2, None),
    "Not": (1, 1),
    # torch.utils._sympy.functions
    "FloorDiv": (2, 2),
    "ModularIndexing": (3, 3),
    "Where": (3, 3),
    "PythonMod": (2, 2),
    "Mod": (2, 2),
    "CleanDiv": (2, 2),
    "CeilToInt": (1, 1),
    "FloorToInt": (1, 1),
    "CeilDiv": (2, 2),
    "LShift": (2, 2),
    "RShift": (2, 2),
    "PowByNatural": (2, 2),
    "FloatPow": (2, 2),
    "FloatTrueDiv": (2, 2),
    "IntTrueDiv": (2, 2),
    "IsNonOverlappingAndDenseIndicator": (2, None),
    "TruncToFloat": (1, 1),
    "TruncToInt": (1, 1),
    "RoundToInt": (1, 1),
    "RoundDecimal": (2, 2),
    "ToFloat": (1, 1),
    "Identity": (1, 1),
}

# The assumptions a Symbol may carry: sympy's (sympy.core.assumptions._assume_defined); torch writes
# integer, positive, real and nonnegative.
ASSUMPTIONS = frozenset({
    "algebraic", "antihermitian", "commutative", "complex", "composite", "even", "extended_negative",
    "extended_nonnegative", "extended_nonpositive", "extended_nonzero", "extended_positive", "extended_real",
    "finite", "hermitian", "imaginary", "infinite", "integer", "irrational", "negative", "noninteger",
    "nonnegative", "nonpositive", "nonzero", "odd", "polar", "positive", "prime", "rational", "real",
    "transcendental", "zero",
})  # fmt: skip

# the functions whose second argument is an exponent, and those that shift by it
_POWERS = frozenset({"Pow", "PowByNatural", "FloatPow"})
_RELATIONS = frozenset({"Equality", "Unequality", "StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan", "And", "Or", "Not"})

# Note [bounded evaluation]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# sympy evaluates while it builds: Pow(Integer(10), Integer(100000000)) computes a number of 300 million bits,
# Mul of many large integers multiplies them, LShift(Integer(1), ...) shifts, and torch's functions compute on
# integer arguments (PowByNatural, FloorDiv, ...). So every node carries `bits`, an upper bound of the bit length
# of any number (numerator or denominator) sympy may compute for it from its literals, and a node whose bound
# passes MAX_NUMBER_BITS is refused before anything is built. A symbol counts 0 (it stays a symbol, sympy computes
# nothing from it) and so does a constant; Mul adds its arguments' bounds (a coefficient is their product, and a
# numeric power of a product distributes over its coefficient), Add and the other functions take the largest
# plus a carry; a power multiplies its base's bound by the largest magnitude its exponent can have (the literal's
# own, or 2**bits of an expression); a left shift adds that magnitude. A float counts the size of its binary
# exponent, whether large or small: exact, 1e-5**467232 is a fraction of 7.7 million bits (the fuzzer's timeout,
# torch's CleanDiv taking a gcd of it). Powers of symbols cost too: sympy multiplies
# nested integer powers (Pow(Pow(u, 499872), -421865) is u**-210878501280 at once), and a power of a symbol it does
# not know to be real, raised to a float or a symbolic power, is split into real and imaginary parts by expanding
# it as a polynomial, in time growing faster than the cube of its degree (0.27 s at degree 128, 10 s at 512, never
# ending at 210878501280: the fuzzer's finding of 7 December 2026; a power of (-oo)**x exhausted memory). So every
# node also carries `degree`, an upper bound of the power of a symbol (or of an infinity) it forms: a symbol and a
# constant have 1, a number 0; Mul adds its arguments', a power
# multiplies its base's by its exponent's magnitude (as for bits), and the other functions take the largest; a
# node whose degree passes MAX_SYMBOL_DEGREE is refused (torch writes squares, and products of a few sizes). So
# building the sympy object of an accepted expression costs at most its length times arithmetic on
# MAX_NUMBER_BITS-bit numbers and polynomials of degree MAX_SYMBOL_DEGREE.


def _magnitude(exponent: SymExpr) -> int:
    """An upper bound of the absolute value an exponent or a shift can evaluate to, capped past the limit."""
    if isinstance(exponent, Integer):
        return abs(exponent.value)
    if isinstance(exponent, Rational):
        return -(-abs(exponent.p) // abs(exponent.q))
    return 1 << min(exponent.bits, MAX_NUMBER_BITS.bit_length() + 1)


def _call_bits(function: str, args: tuple[SymExpr, ...]) -> int:
    if function in _RELATIONS:
        return 1
    if function == "Mul":
        return sum(a.bits for a in args)
    if function in _POWERS:
        base = args[0].bits
        return base * min(_magnitude(args[1]), MAX_NUMBER_BITS + 1) if base > 1 else base
    if function == "LShift":
        return args[0].bits + min(_magnitude(args[1]), MAX_NUMBER_BITS + 1) if args[0].bits else 0
    return max(a.bits for a in args) + len(args).bit_length()


def _call_degree(function: str, args: tuple[SymExpr, ...]) -> int:
    if function == "Mul":
        return sum(a.degree for a in args)
    if function in _POWERS:
        base, exponent = args[0].degree, args[1]
        # a float exponent multiplies a power by its value (sympy may merge (u**8)**2.0 into u**16.0); else as for bits
        factor = math.ceil(abs(float(exponent.text))) if isinstance(exponent, Float) else _magnitude(exponent)
        return max(base * min(factor, MAX_SYMBOL_DEGREE + 1), exponent.degree)
    return max(a.degree for a in args)


class SymExpr:
    """A symbolic expression (the base class of the nodes); ``str`` is its canonical text."""

    __slots__ = ()

    @property
    def bits(self) -> int:
        """An upper bound of the bits of any number building this expression computes (Note [bounded evaluation])."""
        return 0

    @property
    def depth(self) -> int:
        """How many calls deep the expression is (a literal is 0)."""
        return 0

    @property
    def degree(self) -> int:
        """An upper bound of the power of a symbol this expression forms (Note [bounded evaluation])."""
        return 0


def _check_digits(value: int) -> None:
    # the bit length bounds the digits without converting (10**20 has 67 bits)
    if value.bit_length() > 67 or len(str(abs(value))) > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer has at most MAX_INTEGER_DIGITS={MAX_INTEGER_DIGITS} digits")


@dataclass(frozen=True, slots=True)
class Integer(SymExpr):
    """``Integer(-3)``: an integer literal."""

    value: int

    def __post_init__(self) -> None:
        _check_digits(self.value)

    @property
    def bits(self) -> int:
        return self.value.bit_length()

    def __str__(self) -> str:
        return f"Integer({self.value})"


@dataclass(frozen=True, slots=True)
class Rational(SymExpr):
    """``Rational(1, 2)``: a fraction, as written (sympy reduces it); the denominator is not 0."""

    p: int
    q: int

    def __post_init__(self) -> None:
        _check_digits(self.p)
        _check_digits(self.q)
        if self.q == 0:
            raise ValueError("a Rational's denominator is not 0")

    @property
    def bits(self) -> int:
        return max(self.p.bit_length(), self.q.bit_length())

    def __str__(self) -> str:
        return f"Rational({self.p}, {self.q})"


@dataclass(frozen=True, slots=True)
class Float(SymExpr):
    """``Float('1.5', precision=53)``: a decimal number (its text, as sympy writes it) and its precision in bits."""

    text: str
    precision: int = 53
    _bits: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= MAX_NUMBER_BITS:
            raise ValueError(f"a Float's precision is between 1 and MAX_NUMBER_BITS={MAX_NUMBER_BITS} bits")
        try:
            value = float(self.text)  # the grammar's DECIMAL (or a caller's text): float() reads it, runs nothing
        except ValueError:
            raise ValueError(f"{self.text!r} is not a decimal number") from None
        if not math.isfinite(value):
            raise ValueError(f"{self.text!r} is not a finite number")
        # its binary exponent's size, and a carry: a large float has as many integer bits, a small one needs as many
        # bits of denominator once sympy or torch makes it exact (a power of 1e-5 took a gcd of million-bit numbers)
        object.__setattr__(self, "_bits", abs(math.frexp(value)[1]) + 1)

    @property
    def bits(self) -> int:
        return self._bits

    def __str__(self) -> str:
        return f"Float({self.text!r}, precision={self.precision})"


@dataclass(frozen=True, slots=True)
class Symbol(SymExpr):
    """``Symbol('s0', positive=True, integer=True)``: a symbol and its assumptions, in the order written."""

    name: str
    assumptions: tuple[tuple[str, bool], ...] = ()

    def __post_init__(self) -> None:
        if not (self.name.isascii() and self.name.isidentifier()):
            raise ValueError(f"a symbol's name is an ASCII identifier, not {self.name!r}")
        seen: set[str] = set()
        for key, value in self.assumptions:
            if key not in ASSUMPTIONS:
                raise ValueError(f"unknown assumption {key!r} of a Symbol")
            if key in seen:
                raise ValueError(f"the assumption {key!r} is given twice")
            if not isinstance(value, bool):
                raise ValueError(f"the assumption {key!r} is True or False")
            seen.add(key)

    @property
    def degree(self) -> int:
        return 1

    def __str__(self) -> str:
        return "Symbol(" + ", ".join([repr(self.name), *(f"{k}={v}" for k, v in self.assumptions)]) + ")"


@dataclass(frozen=True, slots=True)
class Constant(SymExpr):
    """``true``, ``false``, ``oo`` or ``-oo``: the constants srepr writes bare."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in ("true", "false", "oo", "-oo"):
            raise ValueError(f"unknown constant {self.name!r}")

    @property
    def degree(self) -> int:
        return 1  # sympy keeps a power of an infinity as an expression, as of a symbol ((-oo)**x is oo*(-1)**x)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Call(SymExpr):
    """``FloorDiv(a, b)``: a function of :data:`FUNCTIONS` on its arguments."""

    function: str
    args: tuple[SymExpr, ...]
    _bits: int = field(init=False, repr=False, compare=False, default=0)
    _depth: int = field(init=False, repr=False, compare=False, default=0)
    _degree: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        arity = FUNCTIONS.get(self.function)
        if arity is None:
            raise ValueError(f"unknown function {self.function!r}")
        least, most = arity
        n = len(self.args)
        if n < least or (most is not None and n > most):
            takes = f"{least}" if least == most else f"at least {least}"
            raise ValueError(f"{self.function} takes {takes} argument{'s' if takes != '1' else ''}, got {n}")
        if self.function == "IsNonOverlappingAndDenseIndicator" and n % 2:
            raise ValueError("IsNonOverlappingAndDenseIndicator takes sizes and as many strides, an even number of arguments")
        depth = 1 + max(a.depth for a in self.args)
        if depth > MAX_DEPTH:
            raise ValueError(f"calls are nested at most MAX_DEPTH={MAX_DEPTH} deep")
        bits = _call_bits(self.function, self.args)
        if bits > MAX_NUMBER_BITS:
            raise ValueError(
                f"{self.function} may compute a number of more than MAX_NUMBER_BITS={MAX_NUMBER_BITS} bits; "
                "torch never writes one"
            )
        degree = _call_degree(self.function, self.args)
        if degree > MAX_SYMBOL_DEGREE:
            raise ValueError(
                f"{self.function} may form a power of a symbol beyond MAX_SYMBOL_DEGREE={MAX_SYMBOL_DEGREE}; "
                "torch never writes one"
            )
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_depth", depth)
        object.__setattr__(self, "_degree", degree)

    @property
    def bits(self) -> int:
        return self._bits

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def degree(self) -> int:
        return self._degree

    def __str__(self) -> str:
        # nesting is bounded by MAX_DEPTH, so the recursion is too
        return f"{self.function}({', '.join(map(str, self.args))})"
