"""A :class:`~. Domain` as ONNX nodes: one boolean scalar, true where :meth:`~.Domain.holds` is (Note [domains]).

Sizes are read with ``Shape(start=d, end=d+1)`` (an int64 tensor of one element), computed on with ONNX's integer
operators, and compared; floor division is ``(a - a mod b) / b`` (``Mod`` with ``fmod=0`` takes the divisor's
sign, as Python's ``%``, and the division is then exact, which ``Div``'s truncation computes right), a divisor of
zero is replaced by one and makes the domain false. The conditions ``size == constant`` are one comparison of
the inputs' shapes, gathered, with a constant vector, those ``size == size`` one comparison of two gathers, and all
conditions are joined by one ``ReduceMin`` (the nodes run on every call).

Imports: onnx, on use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import Const, Domain, Expr, Op, Size

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min", "eq": "Equal", "lt": "Less",
           "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual", "and": "And", "or": "Or"}  # fmt: skip
_TRUTH = {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not"}


class _Writer:
    def __init__(self, inputs: Sequence[str], prefix: str) -> None:
        self.inputs = inputs
        self.prefix = prefix
        self.nodes: list[Any] = []
        self.done: dict[Expr, str] = {}  # a subexpression written once (guards repeat theirs many times)
        self.nonzero: list[str] = []  # the divisors' "!= 0"

    def fresh(self) -> str:
        return f"{self.prefix}{len(self.nodes)}"

    def node(self, op: str, inputs: list[str], **attributes: Any) -> str:
        import onnx

        out = self.fresh()
        self.nodes.append(onnx.helper.make_node(op, inputs, [out], **attributes))
        return out

    def const(self, value: int | bool) -> str:
        import onnx

        kind = onnx.TensorProto.BOOL if isinstance(value, bool) else onnx.TensorProto.INT64
        return self.node("Constant", [], value=onnx.helper.make_tensor(self.fresh() + "v", kind, [1], [value]))

    def vector(self, values: Sequence[int]) -> str:
        import onnx

        return self.node("Constant", [], value=onnx.helper.make_tensor(self.fresh() + "v", onnx.TensorProto.INT64, [len(values)], list(values)))

    def sizes(self, at: Sequence[tuple[int, int]], ranks: Sequence[int] | None) -> str:
        """The sizes ``(input, dim)`` of ``at``, in order, in one vector: each input's whole shape read once, and
        gathered (ranks unknown: each size read alone)."""
        if ranks is None:
            sizes = [self.node("Shape", [self.inputs[i]], start=d, end=d + 1) for i, d in at]
            return self.node("Concat", sizes, axis=0) if len(sizes) > 1 else sizes[0]
        offsets: dict[int, int] = {}
        for i, _ in at:
            offsets.setdefault(i, sum(ranks[j] for j in offsets))
        shapes = [self.node("Shape", [self.inputs[i]]) for i in offsets]
        every = self.node("Concat", shapes, axis=0) if len(shapes) > 1 else shapes[0]
        return self.node("Gather", [every, self.vector([offsets[i] + d for i, d in at])], axis=0)

    def integer(self, e: Expr) -> str:
        name = self.write(e)
        return self.node("Cast", [name], to=7) if _truth(e) else name  # INT64

    def truth(self, e: Expr) -> str:
        name = self.write(e)
        return name if _truth(e) else self.node("Not", [self.node("Equal", [name, self.const(0)])])

    def write(self, e: Expr) -> str:
        if e in self.done:
            return self.done[e]
        if isinstance(e, Size):
            out = self.node("Shape", [self.inputs[e.input]], start=e.dim, end=e.dim + 1)
        elif isinstance(e, Const):
            out = self.const(e.value)
        else:
            out = self._op(e)
        self.done[e] = out
        return out

    def _op(self, e: Op) -> str:
        name = e.name
        if name in ("and", "or"):
            args = [self.truth(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = self.node(_BINARY[name], [out, a])
            return out
        if name == "not":
            return self.node("Not", [self.truth(e.args[0])])
        args = [self.integer(a) for a in e.args]
        if name == "neg":
            return self.node("Neg", args)
        if name == "ne":
            return self.node("Not", [self.node("Equal", args)])
        if name in ("floordiv", "mod"):
            a, b = args
            zero = self.node("Equal", [b, self.const(0)])
            self.nonzero.append(self.node("Not", [zero]))
            safe = self.node("Where", [zero, self.const(1), b])
            remainder = self.node("Mod", [a, safe], fmod=0)
            return remainder if name == "mod" else self.node("Div", [self.node("Sub", [a, remainder]), safe])
        return self.node(_BINARY[name], args)


def _truth(e: Expr) -> bool:
    return isinstance(e, Op) and e.name in _TRUTH


def domain_nodes(domain: Domain, inputs: Sequence[str], prefix: str) -> tuple[list[Any], str]:
    """The nodes computing whether ``inputs`` (the names of the program's flat inputs, in order) are in
    ``domain``, and the name of their boolean scalar; every name they make starts with ``prefix``.

    They run on every call, so they are few (Note [one check of the sizes] in ..artifact): most of a layer's
    conditions, ``size == constant`` (its weights' sizes) and ``size == size``, are two comparisons of vectors,
    and the conditions are joined by one reduction, not a chain of ``And``."""
    import onnx

    writer = _Writer(inputs, prefix)
    fixed, pairs, rest = domain._plan
    terms = [writer.truth(c) for c in rest]
    terms += writer.nonzero
    at = [(i, d) for i, d, _ in fixed] + [p for pair in pairs for p in pair]
    if at:
        sizes = writer.sizes(at, domain.ranks)
        if fixed:
            picked = writer.node("Gather", [sizes, writer.vector(range(len(fixed)))], axis=0)
            terms.append(writer.node("Equal", [picked, writer.vector([v for _, _, v in fixed])]))
        if pairs:
            first = writer.node("Gather", [sizes, writer.vector(range(len(fixed), len(at), 2))], axis=0)
            second = writer.node("Gather", [sizes, writer.vector(range(len(fixed) + 1, len(at), 2))], axis=0)
            terms.append(writer.node("Equal", [first, second]))
    if not terms:
        out = writer.const(True)
    else:
        joined = writer.node("Concat", terms, axis=0) if len(terms) > 1 else terms[0]
        # all true: the least of them, as integers, is 1 (ReduceMin has no boolean type)
        out = writer.node("Cast", [writer.node("ReduceMin", [writer.node("Cast", [joined], to=onnx.TensorProto.INT64)], keepdims=1)], to=onnx.TensorProto.BOOL)
    empty = onnx.helper.make_tensor(prefix + "scalar", onnx.TensorProto.INT64, [0], [])
    scalar = writer.node("Reshape", [out, writer.node("Constant", [], value=empty)])
    return writer.nodes, scalar
