"""Fuzz harness: the symbolic-expression language (the ``expr_str`` of an exported program), differential with sympify.

Run: ``python fuzz/fuzz_sym_expr.py [libFuzzer flags] [corpus dirs]``.

An input is one of two kinds, told apart by its first byte. **Structured** (``0xff`` + choices): the bytes choose an
AST over the whole vocabulary (every function with an arity it takes, integers up to 20 digits, rationals, floats,
symbols with torch's assumptions, the constants), up to 8 calls deep; a node past a limit refuses itself
(``ValueError``) and the draw stops there; its text goes through the checks below. **Text** (any other input): the
bytes, decoded as UTF-8, are one expression text. ``parse_sym_expr`` either raises ``SymExprError`` (with a
sane position and a caret) or returns an AST whose printed form is canonical: ``parse(str(x)) == x`` and printing
again gives the same text. The parse makes a number of Python calls bounded by a linear function of the length.
An accepted expression is then built into a sympy object by our code (``sym_expr_to_sympy``) and, as the oracle,
its canonical text is given to ``sympy.sympify`` in the namespace torch's deserializer uses: both must give equal
objects of the same class, or both refuse (ours with ``SymExprError``). sympify sees only text our reader
accepted, whose cost the AST bounded (Note [bounded evaluation]); where our builder refused a ModularIndexing that
recurses without end in torch (Note [endless indexing]), sympify runs with a recursion limit 80 frames
deep: the oracle cannot hang the harness either.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import ByteReader, CallCounter, Stats, decode_text, fail, over_budget, reporting, start

TARGET = "sym_expr"
STATS = Stats(TARGET)
STRUCTURED_MARKER = 0xFF
MAX_DRAWN_DEPTH = 8
_NAMES = ("s0", "s1", "s77", "u0", "u1", "zuf0", "x")
_ASSUMPTIONS = ((), (("integer", True),), (("positive", True), ("integer", True)), (("real", True),), (("nonnegative", True), ("integer", True)), (("integer", False),), (("positive", True), ("negative", True)))
_DECIMALS = ("1.5", "-0.25", "0.0", "2.0", "1.0e-5", "3.0e+20", "123456.789")

# Calls allowed per parse: linear in the length (the engine makes a few calls per token, each node's check a few
# more); a quadratic parse blows past it.
CALLS_PER_CHAR = 60
CALLS_BASE = 20_000
# Frames the oracle may use past the harness's own where we refused a ModularIndexing that recurses without end:
# sympy gives up after a few of its levels (about 50 ms); at Python's default limit it takes about 10 s.
ORACLE_FRAMES = 80

_T: dict[str, object] = {}


def _targets() -> dict[str, object]:
    """Import the library lazily (so ``main`` instruments it first), sympy, and torch's namespace for sympify."""
    if not _T:
        import sympy

        from piece_by_piece_serialize import sym_expr
        from piece_by_piece_serialize.errors import SymExprError
        from piece_by_piece_serialize.sym_expr._sympy import TORCH_FUNCTIONS, _classes

        namespace = {name: cls for name, cls in _classes().items() if name in TORCH_FUNCTIONS}
        _T.update(sympy=sympy, se=sym_expr, Error=SymExprError, namespace=namespace)
        sym_expr.read_sym_expr("Integer(1)")  # builds the parser and the classes: the call budget measures parsing
    return _T


def _check_error(data: bytes, text: str, err: BaseException) -> None:
    pos, lineno, colno = getattr(err, "pos", None), getattr(err, "lineno", None), getattr(err, "colno", None)
    if not isinstance(pos, int) or not 0 <= pos <= len(getattr(err, "text", text)):
        raise fail(data, f"error position {pos!r} outside the text: {err}")
    if not (isinstance(lineno, int) and lineno >= 1 and isinstance(colno, int) and colno >= 1):
        raise fail(data, f"bad line/column {lineno!r}/{colno!r}: {err}")
    if "^" not in str(err):
        raise fail(data, f"error message has no caret line: {err}")


def _differential(data: bytes, expr: object, canonical: str) -> None:
    # sympy warns (SymPyDeprecationWarning) on a boolean in arithmetic (Add(true, 0)), which torch never writes;
    # both sides build the same deprecated object, so the warning is silenced here, in the harness only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _compare(data, expr, canonical)


@contextlib.contextmanager
def _oracle_depth(bounded: bool) -> Iterator[None]:
    """Where we refused a ModularIndexing that recurses without end (Note [endless indexing] in
    sym_expr/_sympy.py), sympify recurses too, about 10 s to Python's default limit; a limit ORACLE_FRAMES above
    the current depth makes it give up at once. Only the oracle runs under it (this process is the harness's
    own); tests/sym_expr checks the refusal against torch's own call at the default limit."""
    if not bounded:
        yield
        return
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + ORACLE_FRAMES)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _compare(data: bytes, expr: object, canonical: str) -> None:
    t = _targets()
    se, sympy, error = t["se"], t["sympy"], t["Error"]
    try:
        ours = se.sym_expr_to_sympy(expr)  # type: ignore[attr-defined]
    except error as err:  # type: ignore[misc]
        ours, refused = None, err
    else:
        refused = None
    try:
        with _oracle_depth(refused is not None and "endless indexing" in str(refused)):
            theirs = sympy.sympify(canonical, locals=dict(t["namespace"]))  # type: ignore[attr-defined]  # the oracle
    except Exception as exc:  # whatever sympify raises is its refusal, compared with ours below
        if refused is None:
            raise fail(data, f"sympify refuses {canonical!r} ({type(exc).__name__}: {exc}), we built {ours!r}") from exc
        STATS.add("both refuse to build")
        return
    if refused is not None:
        raise fail(data, f"we refuse {canonical!r} ({refused}), sympify builds {theirs!r}")
    if ours != theirs or type(ours) is not type(theirs):
        raise fail(data, f"{canonical!r}: we build {ours!r} ({type(ours).__name__}), sympify {theirs!r} ({type(theirs).__name__})")
    STATS.add("built equal to sympify's")


def _draw(r: ByteReader, depth: int = 0) -> object:
    """An AST chosen by the bytes (Note [bounded evaluation] nodes refuse themselves: the caller stops there)."""
    ast = _targets()["se"]
    kind = r.below(10) if depth < MAX_DRAWN_DEPTH else r.below(5)
    if kind == 0:
        return ast.Integer(r.pick((0, 1, -1, 2, 3, 64, 2048, 10**19, -(10**19))) if r.flag() else r.signed() % 10**6 - 500_000)  # type: ignore[attr-defined]
    if kind == 1:
        return ast.Rational(r.signed() % 199 - 99, r.pick((1, 2, 3, -6, 7, 100)))  # type: ignore[attr-defined]
    if kind == 2:
        return ast.Float(r.pick(_DECIMALS), r.pick((53, 24, 100)))  # type: ignore[attr-defined]
    if kind == 3:
        return ast.Symbol(r.pick(_NAMES), r.pick(_ASSUMPTIONS))  # type: ignore[attr-defined]
    if kind == 4:
        return ast.Constant(r.pick(("true", "false", "oo", "-oo")))  # type: ignore[attr-defined]
    name = r.pick(sorted(ast.FUNCTIONS))  # type: ignore[attr-defined]
    least, most = ast.FUNCTIONS[name]  # type: ignore[attr-defined]
    n = least + r.below((most if most is not None else least + 3) - least + 1)
    n += name == "IsNonOverlappingAndDenseIndicator" and n % 2
    return ast.Call(name, tuple(_draw(r, depth + 1) for _ in range(n)))  # type: ignore[attr-defined]


def _structured_text(data: bytes) -> str | None:
    try:
        return str(_draw(ByteReader(data)))
    except ValueError:  # a drawn node past a limit refused itself, as the parser would refuse its text
        STATS.add("drawn node past a limit")
        return None


def check(data: bytes) -> None:
    """The properties for one input; raises Finding on failure."""
    with reporting(data):
        t = _targets()
        se = t["se"]
        if data[:1] == bytes([STRUCTURED_MARKER]):
            drawn = _structured_text(data[1:])
            if drawn is None:
                return
            STATS.add("structured")
            text = drawn
        else:
            text = decode_text(data)
        counter = CallCounter()
        try:
            expr = counter.run(lambda: se.parse_sym_expr(text))  # type: ignore[attr-defined]
        except t["Error"] as err:  # type: ignore[misc]
            STATS.add("text rejected")
            _check_error(data, text, err)
            expr = None
        budget = CALLS_PER_CHAR * len(text) + CALLS_BASE
        if counter.calls > budget:
            calls = over_budget(lambda: se.parse_sym_expr(text), budget, t["Error"])  # type: ignore[attr-defined,arg-type]
            if calls is not None:
                raise fail(data, f"parse_sym_expr made {calls} calls for {len(text)} characters (budget {budget})")
        if expr is None:
            return
        STATS.add("text accepted")
        canonical = str(expr)
        again = se.parse_sym_expr(canonical)  # type: ignore[attr-defined]
        if again != expr:
            raise fail(data, f"canonical text {canonical!r} parses to {again!r}, not {expr!r}")
        if str(again) != canonical:
            raise fail(data, f"printing is not a fixed point: {canonical!r} -> {str(again)!r}")
        if canonical != text:
            STATS.add("text accepted, non-canonical spelling")
        _differential(data, expr, canonical)


def TestOneInput(data: bytes) -> None:
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()

    def warm_up() -> None:
        check(b"Mul(Integer(4), Pow(Symbol('s13', positive=True, integer=True), Integer(2)))")
        check(b"FloorDiv(Integer(1), Integer(0))")
        check(bytes([STRUCTURED_MARKER]) + b"\x07\x05\x03\x01\x00\x02")

    start(
        sys.argv,
        TestOneInput,
        [
            "piece_by_piece_serialize.sym_expr",
            "piece_by_piece_serialize.sym_expr._ast",
            "piece_by_piece_serialize.sym_expr._transform",
            "piece_by_piece_serialize.sym_expr._sympy",
        ],
        warm_up,
    )


if __name__ == "__main__":
    main()
