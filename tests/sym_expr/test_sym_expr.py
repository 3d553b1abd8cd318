"""The symbolic-expression language: golden corpus, canonical fixed point, limits, vocabulary, and torch as the oracle.

Corpus files live in ``tests/corpus/sym_expr/``: ``valid/<case>.expr`` beside ``<case>.canonical``;
``invalid/<case>.expr`` beside ``<case>.error`` (the exact ``str()`` of the error). Each file's last newline is not
part of its content. The oracle: every expression real exports of tiny models write is read by torch's own loader
(``torch.export.load``, sympify watched) and by ours, and the objects must be equal.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from piece_by_piece_serialize.errors import SymExprError
from piece_by_piece_serialize.sym_expr import (
    ASSUMPTIONS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    MAX_SYMBOL_DEGREE,
    Call,
    Constant,
    Float,
    Integer,
    Rational,
    Symbol,
    is_symbol_name,
    parse_sym_expr,
    read_sym_expr,
    sym_expr_to_sympy,
)

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "sym_expr"
VALID = sorted((CORPUS / "valid").glob("*.expr"))
INVALID = sorted((CORPUS / "invalid").glob("*.expr"))


def _read(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


def test_corpus_is_not_empty() -> None:
    assert len(VALID) >= 40
    assert len(INVALID) >= 40


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_canonical(path: Path) -> None:
    expr = parse_sym_expr(_read(path))
    canonical = _read(path.with_suffix(".canonical"))
    assert str(expr) == canonical
    again = parse_sym_expr(canonical)  # the fixed point
    assert again == expr and str(again) == canonical


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_message(path: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(SymExprError) as info:
        parse_sym_expr(_read(path))
    assert str(info.value) == _read(path.with_suffix(".error"))
    assert time.perf_counter() - start < 1  # a refusal costs what reading the text costs


def test_the_ast_is_what_the_text_says() -> None:
    s0 = Symbol("s13", (("positive", True), ("integer", True)))
    assert parse_sym_expr("Mul(Integer(4), Pow(Symbol('s13', positive=True, integer=True), Integer(2)))") == Call(
        "Mul", (Integer(4), Call("Pow", (s0, Integer(2))))
    )
    assert parse_sym_expr("Max(Float('1.5', precision=53), Rational(1, 2), -oo, true)") == Call(
        "Max", (Float("1.5", 53), Rational(1, 2), Constant("-oo"), Constant("true"))
    )


def test_errors_pickle_and_carry_their_position() -> None:
    with pytest.raises(SymExprError) as info:
        parse_sym_expr("Add(Integer(1), factorial(Integer(9)))")
    err = info.value
    assert (err.msg, err.pos, err.lineno, err.colno) == ("unknown function 'factorial'", 16, 1, 17)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and isinstance(again, ValueError)


def test_a_text_past_the_length_limit_is_refused_before_it_is_read() -> None:
    text = "Add(" + ", ".join(["Integer(1)"] * (MAX_EXPRESSION_LENGTH // 12 + 1)) + ")"
    with pytest.raises(SymExprError, match="an expression has at most MAX_EXPRESSION_LENGTH=100000 characters"):
        parse_sym_expr(text)


def test_not_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="a symbolic expression must be a str, got bytes"):
        parse_sym_expr(b"Integer(1)")  # type: ignore[arg-type]


def test_nodes_made_by_a_caller_are_checked_too() -> None:
    with pytest.raises(ValueError, match="unknown function 'factorial'"):
        Call("factorial", (Integer(10),))
    with pytest.raises(ValueError, match="Pow may compute a number of more than MAX_NUMBER_BITS"):
        Call("Pow", (Integer(10), Integer(10**8)))
    with pytest.raises(ValueError, match="at most MAX_INTEGER_DIGITS=20 digits"):
        Integer(10**20)
    deep: Any = Symbol("x")
    for _ in range(MAX_DEPTH):
        deep = Call("Identity", (deep,))
    with pytest.raises(ValueError, match="nested at most MAX_DEPTH=64 deep"):
        Call("Identity", (deep,))


def test_a_power_of_a_symbol_is_bounded_before_sympy_expands_it() -> None:
    """sympy multiplies nested integer powers of a symbol, and raised to a float it expands the power as a polynomial
    to split it into real and imaginary parts, in time faster than cubic in the degree: the fuzzer's expression
    (degree 210,878,501,280) never ended. A power past MAX_SYMBOL_DEGREE is refused where it is written; the largest
    allowed builds at once."""
    found = (
        "Pow(Pow(Pow(Pow(Symbol('u1'), Integer(499872)), Integer(-421865)), LShift(Float('2.0', precision=24), "
        "Symbol('u1', integer=True))), FloatTrueDiv(Integer(499980), Float('123456.789', precision=53)))"
    )
    with pytest.raises(SymExprError, match=r"Pow may form a power of a symbol beyond MAX_SYMBOL_DEGREE=64") as refused:
        parse_sym_expr(found)
    assert refused.value.pos == found.index("Pow(Symbol")  # the first power past the bound: u1**499872
    with pytest.raises(SymExprError, match="beyond MAX_SYMBOL_DEGREE"):
        parse_sym_expr(f"Pow(Mul(Symbol('s0'), Symbol('s1')), Integer({MAX_SYMBOL_DEGREE // 2 + 1}))")  # a product's degree is the sum
    with pytest.raises(SymExprError, match="beyond MAX_SYMBOL_DEGREE"):  # (-oo)**x is oo*(-1)**x: expanded as a symbol's
        parse_sym_expr("Pow(Pow(-oo, Float('1.0e-5', precision=100)), Integer(499872))")
    largest = f"Pow(Pow(Symbol('u1'), Integer({MAX_SYMBOL_DEGREE})), Float('0.5', precision=53))"
    start = time.perf_counter()
    assert str(read_sym_expr(largest)) == f"(u1**{MAX_SYMBOL_DEGREE})**0.5"
    assert time.perf_counter() - start < 10  # about 0.1 s; the bound is what keeps it there


def test_a_power_of_a_small_float_is_bounded_as_a_large_one() -> None:
    """Exact, 1e-5**467232 is a fraction of 7.7 million bits, and torch's CleanDiv took a gcd of it without end (the
    fuzzer's timeout): a float's bound counts its binary exponent however small the float is."""
    with pytest.raises(SymExprError, match="Pow may compute a number of more than MAX_NUMBER_BITS"):
        parse_sym_expr("Pow(Float('1.0e-5', precision=100), Integer(467232))")
    assert read_sym_expr("Pow(Float('0.5', precision=53), Integer(2))") == read_sym_expr("Float('0.25', precision=53)")


def test_the_largest_number_allowed_is_built() -> None:
    assert int(read_sym_expr("Pow(Integer(2), Integer(2048))")) == 2**2048


def test_what_sympy_or_torch_refuse_to_build_is_our_error() -> None:
    with pytest.raises(SymExprError, match=r"ZeroDivisionError while building Mod\(Integer\(3\), Integer\(0\)\)"):
        read_sym_expr("Mod(Integer(3), Integer(0))")
    with pytest.raises(SymExprError, match="InconsistentAssumptions while building Symbol"):
        read_sym_expr("Symbol('x', positive=True, negative=True)")


# Arguments of ModularIndexing: what torch writes (integers, size symbols) and what it never writes (floats,
# infinities, zoo made of exact literals, nan), on which torch's own eval recurses without end for some pairs.
_INDEXING_ARGUMENTS = (
    "Integer(2)", "Integer(0)", "Symbol('s0', positive=True, integer=True)", "Symbol('r', real=True)",
    "Rational(1, 2)", "Float('1.0e-5', precision=24)", "Float('2.0', precision=53)", "oo", "-oo",
    "Pow(Integer(0), Integer(-1))", "Add(oo, -oo)",
)  # fmt: skip
_MODULI = ("Integer(4)", "Symbol('s1', positive=True, integer=True)", "oo")


def _recurses(function: Any, args: list[Any]) -> bool:
    """Whether torch's call recurses without end: run with a limit 250 frames above here (about a hundred of its
    levels), so that each such call fails in milliseconds where the default limit takes seconds."""
    import inspect
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 250)
    try:
        function(*args)
    except RecursionError:
        return True
    except Exception:  # torch refuses these arguments in some other way: ended
        return False
    finally:
        sys.setrecursionlimit(limit)
    return False


def test_a_modular_indexing_torch_recurses_on_without_end_is_refused_at_once_and_no_other() -> None:
    # the fuzz finding (Note [endless indexing]): torch's ModularIndexing divided a Float by its gcd with the
    # divisor, 1.0, for ever: 10 s to RecursionError, in our builder and in sympify
    finding = "ModularIndexing(Float('1.0e-5', precision=24), Symbol('s0', integer=True), Integer(3))"
    with pytest.raises(SymExprError, match=r"ModularIndexing recurses without end .*\(line 1, column 1\)"):
        read_sym_expr(finding)
    from torch.utils._sympy.functions import ModularIndexing

    endless = built = 0
    for base in _INDEXING_ARGUMENTS:
        for divisor in _INDEXING_ARGUMENTS:
            for modulus in _MODULI:
                text = f"ModularIndexing({base}, {divisor}, {modulus})"
                if _recurses(ModularIndexing, [read_sym_expr(a) for a in (base, divisor, modulus)]):
                    endless += 1
                    with pytest.raises(SymExprError, match="recurses without end"):
                        read_sym_expr(text)
                    continue
                try:
                    read_sym_expr(text)
                except SymExprError as err:  # refused as torch refuses it, never as endless
                    assert "recurses without end" not in str(err), text
                else:
                    built += 1
    total = len(_INDEXING_ARGUMENTS) ** 2 * len(_MODULI)
    assert endless > 0 and built > 0 and endless + built <= total, (endless, built, total)


def test_the_vocabulary_is_sympy_s_and_torch_s() -> None:
    import sympy
    from sympy.core.assumptions import _assume_defined

    from piece_by_piece_serialize.sym_expr._sympy import TORCH_FUNCTIONS, _classes

    assert set(_assume_defined) == ASSUMPTIONS
    assert set(FUNCTIONS) >= TORCH_FUNCTIONS
    for name, (least, most) in FUNCTIONS.items():
        cls = _classes()[name]
        assert issubclass(cls, sympy.Basic) and cls.__name__ == name  # srepr writes the class's name
        nargs = getattr(cls, "nargs", None)
        if isinstance(nargs, sympy.FiniteSet):  # a torch function of fixed arity: ours is the same
            assert (least, most) == (min(nargs), max(nargs)), name


def test_every_expression_of_the_tiny_models_is_read_as_torch_reads_it(torch_reading: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    import sympy

    from piece_by_piece_serialize.sym_expr._sympy import TORCH_FUNCTIONS, _classes

    readings, namespaces = torch_reading
    assert len(readings) >= 25  # the three programs write 28 distinct expressions with torch 2.13
    agree = [text for text, theirs in readings.items() if (ours := read_sym_expr(text)) == theirs and type(ours) is type(theirs) and sympy.srepr(ours) == text]
    assert sorted(set(readings) - set(agree)) == []
    assert all(str(parse_sym_expr(text)) == text for text in readings)  # what torch writes is canonical
    # the names torch's namespace gives its own classes are ours, each the same class (Note [one namespace])
    for namespace in namespaces:
        functions = {name: value for name, value in namespace.items() if isinstance(value, type)}
        assert set(functions) == TORCH_FUNCTIONS
        assert all(_classes()[name] is cls for name, cls in functions.items())


@pytest.fixture(scope="module")
def torch_reading() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pytest.importorskip("transformers")
    from _sym_expr_exports import tiny_programs, torch_readings  # type: ignore[import-not-found]

    return torch_readings(tiny_programs())  # type: ignore[no-any-return]


def test_an_equal_subexpression_is_built_once() -> None:
    s0 = "Symbol('s0', positive=True, integer=True)"
    expr = parse_sym_expr(f"Add(Mul(Integer(2), {s0}), Max({s0}, Integer(3)), {s0})")
    built = sym_expr_to_sympy(expr)
    import sympy

    assert built == 2 * sympy.Symbol("s0", positive=True, integer=True) + sympy.Max(sympy.Symbol("s0", positive=True, integer=True), 3) + sympy.Symbol("s0", positive=True, integer=True)


def test_a_symbol_name_is_what_a_symbol_holds() -> None:
    assert [is_symbol_name(n) for n in ("s77", "u0", "zuf3", "_x1")] == [True] * 4
    assert [is_symbol_name(n) for n in ("", "s 0", "0s", "s0'", 's0"', "s\u00e9", "s0+1", "Symbol('s0')")] == [False] * 8
