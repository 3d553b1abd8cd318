"""A program's domain: the input sizes an exported program accepts, read from the program without running any of
its code, evaluated on sizes, and written as ONNX nodes (:mod:`._onnx`).

Note [domains]
~~~~~~~~~~~~~~
A program exported with hint dimensions (``Dim.DYNAMIC``, as each piece is exported alone) holds what its trace
assumed of its inputs' sizes in three places: its inputs' shapes (a constant, a symbol, the same symbol at two
places), the range of each symbol (whose lower bound torch checks only above 2: a hint's range starts at 2, and
sizes 0 and 1 go through), and its guards (``program._guards_code``: Python text torch compiles into a
check run at every call, ``((4 + (-1)*(L['tensors'][1].size()[1] % 4)) % 4) > 0`` for code that pads to chunks of
4). Together they are the sizes on which the program computes what eager computes, and nothing else. A
:class:`Domain` is their conjunction as small expression trees over the inputs' sizes (:class:`Size`), read with
Python's own parser for the guards (never ``eval``: a guard is read node by node, and a form this module does not
know refuses the whole program with :class:`DomainError`).

Its value is the same in Python (:meth:`Domain.holds`) and in ONNX (:func:`._onnx.domain_nodes`): every condition
is evaluated, a division or remainder by zero anywhere makes the domain refuse, integer division is floor
division and a remainder takes the divisor's sign, as Python's. torch's own check stops at its first false guard,
so on a guard that divides by a size that only a failing guard excludes, both refuse; the tests compare
:meth:`Domain.holds` with the program's own check over a range of sizes.

Imports: the standard library; torch on use (reading a program).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any, cast

__all__ = ["Const", "Domain", "DomainError", "Op", "Size", "domain_of"]


class DomainError(ValueError):
    """A program's domain holds a form this module does not read (a stride, a float, an unknown function)."""


@dataclasses.dataclass(frozen=True)
class Size:
    """Dimension ``dim`` of flat input ``input``."""

    input: int
    dim: int

    def __str__(self) -> str:
        return f"in{self.input}.size({self.dim})"


@dataclasses.dataclass(frozen=True)
class Const:
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclasses.dataclass(frozen=True)
class Op:
    """An operation on integers or truth values: ``add sub mul floordiv mod neg max min`` (integers), ``eq ne lt
    le gt ge`` (integers to a truth value), ``and or not`` (truth values)."""

    name: str
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        if self.name in _INFIX:
            return "(" + f" {_INFIX[self.name]} ".join(str(a) for a in self.args) + ")"
        return f"{self.name}({', '.join(str(a) for a in self.args)})"


Expr = Size | Const | Op

_INFIX = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "and", "or": "or"}  # fmt: skip
_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}
_BOOL = _COMPARE | {"and", "or", "not"}
_FLIPPED = {"le": "ge", "lt": "gt", "ge": "le", "gt": "lt"}


class _Zero(Exception):
    """A division or remainder by zero: the domain refuses (Note [domains])."""


def _value(e: Expr, shapes: Sequence[Sequence[int]]) -> int:
    if isinstance(e, Size):
        return int(shapes[e.input][e.dim])
    if isinstance(e, Const):
        return e.value
    a = [_value(x, shapes) for x in e.args]
    name = e.name
    if name in ("floordiv", "mod"):
        if a[1] == 0:
            raise _Zero
        return a[0] // a[1] if name == "floordiv" else a[0] % a[1]
    return int(_OPS[name](*a))


_OPS: dict[str, Any] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "neg": lambda a: -a,
    "max": max, "min": min, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "and": lambda *a: all(a), "or": lambda *a: any(a), "not": lambda a: not a,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Domain:
    """The sizes a program accepts: every condition true (Note [domains])."""

    conditions: tuple[Expr, ...]
    n_inputs: int  # the program's flat inputs
    free: tuple[Size, ...] = ()  # the sizes the program takes as symbols (exported as dynamic), first of each
    ranks: tuple[int, ...] | None = None  # each input's number of dimensions; None: not checked (an ONNX input's type fixes it)

    def holds(self, shapes: Sequence[tuple[int, ...]]) -> bool:
        """Whether inputs of these shapes (one per flat input, each a tuple or a ``torch.Size``: the inputs whose
        sizes the domain fixes are compared as whole tuples) are in the domain."""
        if len(shapes) != self.n_inputs:
            return False
        if self.ranks is not None and tuple(map(len, shapes)) != self.ranks:
            return False  # a size of an extra dimension would be checked by no condition
        whole, fixed = self._whole
        _, pairs, _ = self._plan
        bounds, rest = self._bounds
        try:
            if (
                (whole is not None and whole[0](shapes) != whole[1])
                or any(shapes[i][d] != v for i, d, v in fixed)
                or any(shapes[i][d] != shapes[j][e] for (i, d), (j, e) in pairs)
                or any(not low <= shapes[i][d] <= high for i, d, low, high in bounds)
            ):
                return False
            values = [_value(c, shapes) for c in rest]  # all of them, as ONNX computes them
        except (_Zero, IndexError):
            return False
        return all(values)

    def one_size(self, input: int, dim: int) -> int | None:
        """The one size of dimension ``dim`` of flat input ``input`` the domain holds for (a condition ``size ==
        constant``, or a range whose ends meet), or None when it holds for several or none."""
        sizes = {v for i, d, v in self._plan[0] if (i, d) == (input, dim)}
        for i, d, low, high in self._bounds[0]:
            if (i, d) == (input, dim) and low == high:
                sizes.add(int(low))
        return sizes.pop() if len(sizes) == 1 else None

    @functools.cached_property
    def _plan(self) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[tuple[int, int], tuple[int, int]], ...], tuple[Expr, ...]]:
        """The conditions ``size == constant`` as triples (most of a layer's: its weights' sizes) and ``size == size``
        as pairs, compared without walking an expression, and the others (Note [one check of the sizes] in
        ..artifact: they are checked on every call)."""
        fixed, pairs, rest = [], [], []
        for c in self.conditions:
            match c:
                case Op("eq", (Size(i, d), Const(v))):
                    fixed.append((i, d, v))
                case Op("eq", (Size(i, d), Size(j, e))):
                    pairs.append(((i, d), (j, e)))
                case _:
                    rest.append(c)
        return tuple(fixed), tuple(pairs), tuple(rest)

    @functools.cached_property
    def _whole(self) -> tuple[tuple[Any, tuple[Any, ...]] | None, tuple[tuple[int, int, int], ...]]:
        """:attr:`_plan`'s ``size == constant`` conditions split in two: the inputs all of whose sizes they fix (a
        layer's weights), compared as one tuple of shapes read by one ``itemgetter``, and the others."""
        sizes: dict[int, dict[int, int]] = {}
        for i, d, v in self._plan[0]:
            sizes.setdefault(i, {})[d] = v
        fixed = dict.fromkeys(
            i for i, by_dim in sizes.items()
            if self.ranks is not None and i < len(self.ranks) and set(by_dim) == set(range(self.ranks[i]))
        )  # fmt: skip
        if not fixed:
            return None, self._plan[0]
        expected = tuple(tuple(sizes[i][d] for d in range(len(sizes[i]))) for i in fixed)
        # an itemgetter of one index gives that item, of several a tuple of them
        whole = (operator.itemgetter(*fixed), expected[0] if len(fixed) == 1 else expected)
        return whole, tuple(c for c in self._plan[0] if c[0] not in fixed)

    @functools.cached_property
    def _bounds(self) -> tuple[tuple[tuple[int, int, float, float], ...], tuple[Expr, ...]]:
        """:attr:`_plan`'s other conditions split in two: a size against a constant (the ranges, most of a top
        program's: two per dynamic size of each cache layer), merged per size into ``(input, dim, low, high)``, and
        the rest, walked as expressions. Only :meth:`holds` reads it: ONNX writes the conditions as they are."""
        bounds: dict[tuple[int, int], list[float]] = {}
        rest: list[Expr] = []
        for c in self._plan[2]:
            match c:
                case Op("le" | "lt" | "ge" | "gt" as op, (Size(i, d), Const(v))):
                    name: str = op
                case Op("le" | "lt" | "ge" | "gt" as op, (Const(v), Size(i, d))):
                    name = _FLIPPED[op]  # c <= size is size >= c
                case _:
                    rest.append(c)
                    continue
            low, high = bounds.setdefault((i, d), [-math.inf, math.inf])
            if name in ("le", "lt"):
                bounds[i, d][1] = min(high, v if name == "le" else v - 1)
            else:
                bounds[i, d][0] = max(low, v if name == "ge" else v + 1)
        return tuple((i, d, low, high) for (i, d), (low, high) in bounds.items()), tuple(rest)

    def why_not(self, shapes: Sequence[Sequence[int]]) -> str:
        """Why the domain does not hold for inputs of these shapes: its first false condition and the sizes it
        reads (``(in3.size(0) == in1.size(2)) is false at in3.size(0)=30, in1.size(2)=15``); "" where it holds.
        For errors: :meth:`holds` is the check."""
        if len(shapes) != self.n_inputs:
            return f"{len(shapes)} inputs where the program takes {self.n_inputs}"
        for i, (s, r) in enumerate(zip(shapes, self.ranks or [len(s) for s in shapes], strict=True)):
            if len(s) != r:
                return f"input {i} has {len(s)} dimensions where the program takes {r}"
        for c in self.conditions:
            try:
                if _value(c, shapes):
                    continue
                why = "is false"
            except (_Zero, IndexError):
                why = "divides by zero"
            at = ", ".join(f"{s}={shapes[s.input][s.dim]}" for s in dict.fromkeys(_sizes_in(c)))
            return f"{c} {why} at {at}"
        return ""

    def edges(self, shapes: Sequence[Sequence[int]], first: int, low: int, high: int) -> dict[tuple[Size, ...], set[int]]:
        """For each set of sizes of inputs ``first`` and later that the domain holds equal (its ``size == size``
        conditions), the sizes in ``[low, high]`` on either side of each place where one of its other conditions
        changes its truth value, those sizes moved together from inputs of these ``shapes`` (the others staying as
        they are; Note [edges of a domain] in ``export/_edges.py``). Conditions ``size == constant`` are left out:
        their edges are every other size. Empty sets are left out."""
        tied: dict[Size, Size] = {}  # a union-find over the sizes the domain holds equal

        def root(at: Size) -> Size:
            while tied.get(at, at) != at:
                at = tied[at]
            return at

        for (i, d), (j, e) in self._plan[1]:
            if i >= first and j >= first:
                a, b = root(Size(i, d)), root(Size(j, e))
                tied[max(a, b, key=_order)] = min(a, b, key=_order)
        read = [c for c in self._plan[2] if any(s.input >= first for s in _sizes_in(c))]
        classes: dict[Size, list[Size]] = {}
        for at in dict.fromkeys(s for c in read for s in _sizes_in(c) if s.input >= first):
            classes.setdefault(root(at), []).append(at)
        for at in tied:  # the sizes tied to one a condition reads
            if root(at) in classes and at not in classes[root(at)]:
                classes[root(at)].append(at)
        out: dict[tuple[Size, ...], set[int]] = {}
        for members in classes.values():
            moved = frozenset(members)
            try:  # each condition as a function of the one moving size: the same form once (one per layer, often)
                forms = dict.fromkeys(_fixed(c, moved, shapes) for c in read if moved & set(_sizes_in(c)))
            except IndexError:  # shapes of another rank than the program's: no edges to read
                continue
            start = int(shapes[min(members, key=_order).input][min(members, key=_order).dim])
            values = {v for form in forms for v in _crossings(form, start, low, high)}
            if values:
                out[tuple(sorted(members, key=_order))] = values
        return out

    def reading(self, first: int) -> Domain:
        """The conditions that read a size of input ``first`` or of a later one: those of the earlier inputs alone
        hold by construction where those are constants (a piece's weights, in an ONNX file)."""
        return dataclasses.replace(self, conditions=tuple(c for c in self.conditions if any(s.input >= first for s in _sizes_in(c))))

    def __str__(self) -> str:
        return " and ".join(str(c) for c in self.conditions) or "any sizes"


_NEAR = 64  # the sizes on each side of a start scanned one by one for edges (Note [edges of a domain])


def _order(at: Size) -> tuple[int, int]:
    return at.input, at.dim


def _fixed(e: Expr, moved: frozenset[Size], shapes: Sequence[Sequence[int]]) -> Expr:
    """``e`` with each size outside ``moved`` its value in ``shapes`` and each in ``moved`` the one free size
    ``Size(0, 0)``."""
    if isinstance(e, Size):
        return Size(0, 0) if e in moved else Const(int(shapes[e.input][e.dim]))
    if isinstance(e, Op):
        return Op(e.name, tuple(_fixed(a, moved, shapes) for a in e.args))
    return e


def _crossings(form: Expr, start: int, low: int, high: int) -> set[int]:
    """The sizes on either side of the change of ``form``'s value (of the one free size) nearest ``start`` in each
    direction within ``[low, high]``. Where every comparison in it is of two affine functions of the size, the
    sizes where one of them changes are solved for (:func:`_turns`), so a change at any distance is found, the
    point where a ``!=`` fails among them (Llama 4's ``8 * (past + new) != 65528`` at a chunk of 8,192); else
    scanned one by one up to :data:`_NEAR` away, then at doubling distances up to the end, a change between two of
    those bisected to one step (a bound far from the start)."""

    def at(v: int) -> int | None:
        try:
            return _value(form, ((v,),))
        except _Zero:
            return None

    out: set[int] = set()
    if not low <= start <= high:
        return out
    here = at(start)
    turns = _turns(form)
    if turns is not None:  # between two sizes where none of its comparisons changes, the form keeps its value
        above = sorted(v for v in turns if start < v <= high)  # a comparison changes between v - 1 and v
        below = sorted((v - 1 for v in turns if low <= v - 1 < start), reverse=True)  # ... between u and u + 1
        for side, step in ((above, -1), (below, 1)):
            v = next((v for v in side if at(v) != here), None)
            if v is not None:
                out.update((v + step, v))
        return out
    for step, end in ((1, high), (-1, low)):
        before = start
        for v in _walk(start, step, end):
            if at(v) != here:
                while abs(v - before) > 1:  # the one step where it changes (the first, where it changes once)
                    middle = (v + before) // 2
                    before, v = (middle, v) if at(middle) == here else (before, middle)
                out.update((before, v))
                break
            before = v
    return out


def _turns(form: Expr) -> set[int] | None:
    """The sizes ``v`` of the one free size where a comparison in ``form`` has another value at ``v - 1`` than at
    ``v`` (and sizes where none does, which do no harm), or ``None`` when a comparison is not of two affine
    functions of the size."""
    if isinstance(form, Op) and form.name in _COMPARE:
        left, right = _affine(form.args[0]), _affine(form.args[1])
        if left is None or right is None:
            return None
        slope, offset = left[0] - right[0], left[1] - right[1]
        if slope == 0:  # the same value at every size
            return set()
        root = -offset // slope  # the floor of the size where the sides meet: a change from root - 1 or from root
        return {root, root + 1}
    if isinstance(form, Op) and form.name in ("and", "or", "not"):
        out: set[int] = set()
        for arg in form.args:
            turns = _turns(arg)
            if turns is None:
                return None
            out |= turns
        return out
    return None


def _affine(e: Expr) -> tuple[int, int] | None:
    """``(a, b)`` where ``e`` is ``a * size + b`` of the one free size, whatever the size; ``None`` when it is not."""
    if isinstance(e, Size):
        return 1, 0
    if isinstance(e, Const):
        return 0, e.value
    args = [_affine(a) for a in e.args]
    if any(a is None for a in args):
        return None
    terms = cast("list[tuple[int, int]]", args)
    name = e.name
    if all(a == 0 for a, _ in terms):  # the same value at every size (``0 * size`` too): that value
        try:
            return 0, _value(Op(name, tuple(Const(b) for _, b in terms)), ())
        except _Zero:
            return None
    if name in ("add", "sub"):
        (a, b), (c, d) = terms
        return (a + c, b + d) if name == "add" else (a - c, b - d)
    if name == "neg":
        return -terms[0][0], -terms[0][1]
    if name == "mul" and (terms[0][0] == 0 or terms[1][0] == 0):
        (a, b), (c, d) = terms
        return a * d + c * b, b * d
    return None  # a division, a remainder, a max or min of the size, a product of it with itself


def _walk(start: int, step: int, end: int) -> Iterator[int]:
    """From ``start`` towards ``end`` (included): one by one up to :data:`_NEAR` away, then at doubling distances."""
    for distance in itertools.chain(range(1, _NEAR + 1), (_NEAR << k for k in itertools.count(1))):
        v = start + step * distance
        if (v - end) * step >= 0:
            if end != start:
                yield end
            return
        yield v


def _sizes_in(e: Expr) -> Iterator[Size]:
    if isinstance(e, Size):
        yield e
    elif isinstance(e, Op):
        for a in e.args:
            yield from _sizes_in(a)


def domain_of(program: Any, guards: bool = True) -> Domain:
    """The domain of an exported program whose inputs are one varargs ``tensors`` (a piece's flat call) or named
    tensors; raises :class:`DomainError` on a form it does not read. Without ``guards``: its inputs' shapes and
    ranges only, what torch checks of a program's inputs when it runs it without its guards."""
    placeholders = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    conditions: list[Expr] = []
    bound: dict[Any, Expr] = {}  # a symbol -> the first size it names
    ranks = []
    for index, name in enumerate(placeholders):
        value = nodes[name].meta.get("val")
        if value is None or not hasattr(value, "shape"):
            raise DomainError(f"input {name} of the program is not a tensor")
        ranks.append(len(value.shape))
        for dim, size in enumerate(value.shape):
            conditions.extend(_size_condition(Size(index, dim), size, bound))
            conditions.extend(_range_conditions(Size(index, dim), size, program.range_constraints))
    names = {name: i for i, name in enumerate(placeholders)}
    for text in (getattr(program, "_guards_code", None) or ()) if guards else ():
        conditions.append(_guard(text, names))
    free = tuple(at for at in bound.values() if isinstance(at, Size))
    return Domain(tuple(dict.fromkeys(conditions)), len(placeholders), free, tuple(ranks))


def _size_condition(at: Size, size: Any, bound: dict[Any, Expr]) -> Iterator[Expr]:
    if isinstance(size, int):
        yield Op("eq", (at, Const(size)))
        return
    expr = size.node.expr
    if expr.is_Integer:
        yield Op("eq", (at, Const(int(expr))))
    elif expr.is_Symbol:
        if expr in bound:
            yield Op("eq", (at, bound[expr]))
        else:
            bound[expr] = at
    elif len(expr.free_symbols - bound.keys()) == 1:
        # a size a*s + b whose one new symbol s it names, b of earlier symbols: s is solved from it, as torch solves
        # a size of one symbol (torch._export.utils._check_symint); linear forms only
        (symbol,) = expr.free_symbols - bound.keys()
        a, b = _linear(expr, symbol)
        # s = (size - b) / a, or (b - size) / -a: a sum the trace fixed (past + new == 15 gives a size 15 - s)
        rest = Op("sub", (at, _from_sympy(b, bound)) if a > 0 else (_from_sympy(b, bound), at))
        a = abs(a)
        if a == 1:  # s = size - b, with nothing to divide
            bound[symbol] = rest
            return
        yield Op("eq", (Op("mod", (rest, Const(a))), Const(0)))
        bound[symbol] = Op("floordiv", (rest, Const(a)))
    else:
        yield Op("eq", (at, _from_sympy(expr, bound)))


def _linear(expr: Any, symbol: Any) -> tuple[int, Any]:
    """``(a, b)`` of a size ``a*symbol + b``: an integer ``a != 0``, ``b`` free of ``symbol``."""
    a, b = expr.diff(symbol), expr.subs(symbol, 0)
    if not (a.is_Integer and a != 0 and symbol not in b.free_symbols and (a * symbol + b - expr).expand() == 0):
        raise DomainError(f"a size of a form this reader does not solve for its symbol: {expr}")
    return int(a), b


def _range_conditions(at: Size, size: Any, ranges: Any) -> Iterator[Expr]:
    """The range of a size of one symbol, as torch's check of a program's inputs reads it: the range its
    expression has (``s0`` or ``2*s0 + 1``), whose lower bound it checks only above 2 (a hint's range starts at 2,
    and sizes 0 and 1 go through)."""
    if isinstance(size, int) or len(size.node.expr.free_symbols) != 1 or size.node.expr not in ranges:
        return
    value_range = ranges[size.node.expr]
    if value_range.lower.is_Integer and int(value_range.lower) > 2:  # not -int_oo
        yield Op("ge", (at, Const(int(value_range.lower))))
    if value_range.upper.is_Integer:  # not int_oo
        yield Op("le", (at, Const(int(value_range.upper))))


def _from_sympy(expr: Any, bound: dict[Any, Expr]) -> Expr:
    """A shape's expression (``2*s0``, ``s0 + 1``) over symbols of earlier sizes."""
    if expr.is_Integer:
        return Const(int(expr))
    if expr.is_Symbol:
        if expr not in bound:
            raise DomainError(f"the size {expr} names a symbol no earlier size does")
        return bound[expr]
    name = {"Add": "add", "Mul": "mul", "FloorDiv": "floordiv", "Mod": "mod", "PythonMod": "mod", "Max": "max", "Min": "min"}.get(type(expr).__name__)
    if name is None:
        raise DomainError(f"a size of the form {type(expr).__name__} ({expr})")
    args = [_from_sympy(a, bound) for a in expr.args]
    out = args[0]
    for a in args[1:]:  # Add and Mul take any number of terms
        out = Op(name, (out, a))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Guards: torch's Python text, read node by node


def _guard(text: str, names: dict[str, int]) -> Expr:
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise DomainError(f"a guard that is not Python: {text[:80]!r}") from None
    return _node(tree.body, names, text)


_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}


def _node(node: ast.AST, names: dict[str, int], text: str) -> Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and abs(node.value) < 2**63:  # bool is an int
        return Const(int(node.value))  # and ONNX computes in int64
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return Op(_BIN[type(node.op)], (_node(node.left, names, text), _node(node.right, names, text)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        return Op("neg" if isinstance(node.op, ast.USub) else "not", (_node(node.operand, names, text),))
    if isinstance(node, ast.BoolOp):
        return Op("and" if isinstance(node.op, ast.And) else "or", tuple(_node(v, names, text) for v in node.values))
    if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
        sides = [_node(node.left, names, text), *(_node(c, names, text) for c in node.comparators)]
        pairs = tuple(Op(_CMP[type(o)], (a, b)) for o, a, b in zip(node.ops, sides, sides[1:], strict=False))
        return pairs[0] if len(pairs) == 1 else Op("and", pairs)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min") and len(node.args) == 2 and not node.keywords:
        return Op(node.func.id, (_node(node.args[0], names, text), _node(node.args[1], names, text)))
    if _rounded_division(node):  # math.floor(a / b), math.ceil(a / b) of sizes: floor division, exact on integers
        a, b = (_node(x, names, text) for x in (node.args[0].left, node.args[0].right))  # type: ignore[attr-defined]
        if node.func.attr == "floor":  # type: ignore[attr-defined]
            return Op("floordiv", (a, b))
        return Op("neg", (Op("floordiv", (Op("neg", (a,)), b)),))
    if isinstance(node, ast.Subscript):
        return _size(node, names, text)
    raise DomainError(f"a guard of a form this reader does not know ({type(node).__name__}): {text[:120]!r}")


def _rounded_division(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "math" and node.func.attr in ("floor", "ceil") and len(node.args) == 1 and not node.keywords
            and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div))  # fmt: skip


def _size(node: ast.Subscript, names: dict[str, int], text: str) -> Size:
    """``L['x'].size()[d]`` or ``L['tensors'][k].size()[d]``."""
    call, dim = node.value, node.slice
    if not (isinstance(dim, ast.Constant) and type(dim.value) is int and isinstance(call, ast.Call) and not call.args
            and isinstance(call.func, ast.Attribute) and call.func.attr == "size"):  # fmt: skip
        raise DomainError(f"a guard on something other than a size: {text[:120]!r}")
    tensor = call.func.value
    index: int | None = None
    if isinstance(tensor, ast.Subscript) and isinstance(tensor.slice, ast.Constant) and type(tensor.slice.value) is int:
        name, index = _local(tensor.value), tensor.slice.value
        if name is not None and name not in names:  # varargs: L['tensors'][k] is flat input k
            return Size(index, dim.value)
    else:
        name = _local(tensor)
        if name is not None and name in names:
            return Size(names[name], dim.value)
    raise DomainError(f"a guard on an input this reader cannot place: {text[:120]!r}")


def _local(node: ast.AST) -> str | None:
    """The name in ``L['name']``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "L":
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None
