"""ONNX translations of operators torch.onnx does not know, and the check that every operator has one.

A library can put part of its model behind a custom operator of its own: transformers 5 computes its
mixture-of-experts layers through ``transformers::grouped_mm_fallback`` whenever ``torch.export`` traces them
(its ``grouped_mm`` experts, the default on CPU, fall back to that operator under tracing unless the weights are
bfloat16). torch.onnx has no translation for such an operator, so this module holds the ones the library ships
(:data:`BUILTIN`, by the operator's qualified name, used only when the operator is registered), takes the user's
(``to_onnx(..., translations={operator: function})``), and before any export names an operator that has none.

A translation is what ``torch.onnx.export(custom_translation_table=...)`` takes: a Python function of the node's
arguments, in the operator's schema order, that builds its result from onnxscript ops; it is traced once per call
site, so it works for every dtype and every (dynamic) shape.

Note [grouped matmul in ONNX]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``grouped_mm_fallback(input (S, K), weight (E, K, N), offs (E,))`` multiplies the rows of ``input`` sorted by
expert: rows ``offs[e-1] <= s < offs[e]`` by ``weight[e]``; rows at or past ``offs[E-1]`` stay zero, and an expert
whose range is empty (it received no token) is skipped. ONNX has no grouped matmul. The translation gives row
``s`` the expert ``e(s) = #{e : offs[e] <= s}`` (the count of ranges that end at or before it, ``E`` past the
last), multiplies every row by every expert's weight in one batched MatMul ``(1, S, K) x (E, K, N) -> (E, S, N)``
and keeps, per row, the product with its own expert (GatherND), zero where ``e(s) = E``. That is exact, and
dtype- and shape-generic; it computes ``E`` products per row where eager computes one, a cost linear in the
model (E times the experts' matmuls of the step), which an ONNX Loop over the experts would avoid.

Imports: onnxscript and torch, on use; nothing of the library but the package's error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._errors import OnnxExportError

__all__ = ["BUILTIN", "grouped_mm_fallback", "translation_table", "check_translated"]

# Namespaces whose operators torch.onnx translates itself.
_TORCH_NAMESPACES = frozenset({"aten", "prims"})


def grouped_mm_fallback(input: Any, weight: Any, offs: Any) -> Any:
    """``transformers::grouped_mm_fallback`` in ONNX (Note [grouped matmul in ONNX])."""
    from onnxscript import opset18

    op: Any = opset18  # onnxscript types each op by ONNX dtype; a translation is traced for every dtype

    int64 = 7  # onnx.TensorProto.INT64
    zero, one = op.Constant(value_ints=[0]), op.Constant(value_ints=[1])
    rows_count = op.Shape(input, start=0, end=1)  # [S]
    experts = op.Shape(weight, start=0, end=1)  # [E]
    rows = op.Range(op.Squeeze(zero, zero), op.Squeeze(rows_count, zero), op.Squeeze(one, zero))  # (S,)
    ends = op.Unsqueeze(op.Cast(offs, to=int64), zero)  # (1, E)
    expert = op.ReduceSum(op.Cast(op.LessOrEqual(ends, op.Unsqueeze(rows, one)), to=int64), one, keepdims=0)  # (S,)
    products = op.MatMul(op.Unsqueeze(input, zero), weight)  # (E, S, N)
    own = op.Concat(op.Unsqueeze(op.Min(expert, op.Sub(experts, one)), one), op.Unsqueeze(rows, one), axis=1)  # (S, 2)
    picked = op.GatherND(products, own)  # (S, N)
    past_the_last = op.Unsqueeze(op.GreaterOrEqual(expert, experts), one)  # (S, 1)
    return op.Where(past_the_last, op.CastLike(op.Constant(value_float=0.0), picked), picked)


# The translations the library ships, by the operator's qualified name (namespace::name, overload).
BUILTIN: dict[tuple[str, str], Callable[..., Any]] = {
    ("transformers::grouped_mm_fallback", ""): grouped_mm_fallback,
}


def _qualified(target: Any) -> tuple[str, str]:
    """(namespace::name, overload) of an operator overload, from its schema."""
    schema = target._schema
    return schema.name, schema.overload_name


def _overload(operator: Any) -> Any:
    """The overload a translation is keyed by: an ``OpOverloadPacket`` means its ``default``."""
    import torch

    if isinstance(operator, torch._ops.OpOverloadPacket):
        return operator.default
    if isinstance(operator, torch._ops.OpOverload):
        return operator
    raise OnnxExportError(
        f"to_onnx: a key of translations= must be a torch operator (torch.ops.<namespace>.<name> or its "
        f".default), got {operator!r}"
    )


def translation_table(programs: Iterable[Any], given: Mapping[Any, Callable[..., Any]] | None) -> dict[Any, Callable[..., Any]]:
    """The translations for the operators the ``programs`` call: the user's (``given``) first, then the library's."""
    import torch

    chosen = {_overload(k): v for k, v in (given or {}).items()}
    for program in programs:
        for node in program.graph.nodes:
            target = node.target
            if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target not in chosen:
                builtin = BUILTIN.get(_qualified(target))
                if builtin is not None:
                    chosen[target] = builtin
    return chosen


def check_translated(program: Any, where: str, translations: Mapping[Any, Any]) -> None:
    """Raise :class:`OnnxExportError` naming the first operator of ``program`` (a custom operator, of a namespace
    torch.onnx does not translate) that has no translation, and how to give one."""
    import torch

    for node in program.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or target in translations:
            continue
        if target.namespace in _TORCH_NAMESPACES:
            continue
        name, overload = _qualified(target)
        python = f"torch.ops.{target.namespace}.{target._opname}.{overload or 'default'}"
        raise OnnxExportError(
            f"to_onnx: {where} calls the operator {name}{'.' + overload if overload else ''}, which has no ONNX "
            f"translation; give one with to_onnx(..., translations={{{python}: function}}), a function of the "
            f"operator's arguments built from onnxscript ops (docs/onnx.md, 'Operators without a translation')"
        )
