"""The symbolic expressions real exports write: tiny models exported with dynamic dimensions, each program serialized
by torch's own serializer, every ``expr_str`` of its JSON document collected (the oracle's inputs)."""

from __future__ import annotations

import json
from typing import Any

import torch
from torch.export import Dim


def expressions_of(program: Any) -> set[str]:
    """Every expression text torch's serializer writes for ``program`` (an ExportedProgram)."""
    from torch._export.serde.serialize import serialize

    document = json.loads(serialize(program).exported_program)
    found: set[str] = set()
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("expr_str"), str):
                found.add(item["expr_str"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


class _Shapes(torch.nn.Module):
    """Sizes through floor division, modulo, min/max, a product and a square (what attention layers do)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        n, m = x.shape[0], x.shape[1]
        half = x[: n // 2]
        rest = x[: n % 3 + 1]
        pad = torch.nn.functional.pad(y, (0, 0, 0, max(n, y.shape[0]) - y.shape[0]))
        flat = x.reshape(-1)
        grid = flat.reshape(n, m).unsqueeze(0) * flat.reshape(n, m).unsqueeze(1)[:, :1]
        return half.sum() + rest.sum() + pad[:n].sum() + grid.sum() + torch.ones(n * n).sum()


class _Unbacked(torch.nn.Module):
    """Data-dependent sizes: unbacked symbols, checked ranges, a boolean of them."""

    def forward(self, x: torch.Tensor) -> Any:
        idx = torch.nonzero(x > 0)
        k = idx.shape[0]
        torch._check(k < 1000)
        n = x.sum().to(torch.int64).item()
        torch._check(n >= 0)
        torch._check(n <= 64)
        return idx.float().sum() + torch.zeros(n, 2).sum() + torch.zeros(k * 2 + 1).sum()


def torch_readings(programs: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What torch's own loader makes of every expression of ``programs``: each program saved with
    ``torch.export.save`` and loaded back with ``torch.export.load``, with ``sympy.sympify`` watched while it loads.
    Returns text -> the object sympify gave for it, and the namespaces (``locals=``) it was given."""
    import io

    import sympy

    readings: dict[str, Any] = {}
    namespaces: list[dict[str, Any]] = []
    original = sympy.sympify

    def watched(a: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(a, *args, **kwargs)
        if isinstance(a, str):
            readings[a] = result
            namespaces.append(dict(kwargs.get("locals") or {}))
        return result

    sympy.sympify = watched
    try:
        for program in programs:
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
            buffer.seek(0)
            torch.export.load(buffer)
    finally:
        sympy.sympify = original
    return readings, namespaces


def tiny_programs() -> list[Any]:
    """Real exports with dynamic dimensions: two small modules of size arithmetic and data-dependent sizes, and a
    tiny transformers Llama (two layers, built from its config)."""
    import _tiny_models as tiny

    auto = Dim.DYNAMIC  # torch infers the ranges (and the guards the branches add) instead of checking given ones
    x, y = torch.randn(8, 4), torch.randn(5, 4)
    model = tiny.llama_sized(32, 2)
    return [
        torch.export.export(_Shapes(), (x, y), dynamic_shapes=({0: auto, 1: auto}, {0: auto}), strict=False),
        torch.export.export(_Unbacked(), (torch.tensor([1.0, -1.0, 2.0, 0.0]),), dynamic_shapes=({0: auto},), strict=False),
        torch.export.export(
            model, (tiny.ids(6, 2),), {"use_cache": False},
            dynamic_shapes={"input_ids": {0: Dim("batch", min=1, max=32), 1: Dim("seq", min=2, max=128)}, "use_cache": None},
            strict=False,
        ),
    ]  # fmt: skip
