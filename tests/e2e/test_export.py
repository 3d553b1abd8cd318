"""End to end, the real use: a submodule with nested inputs and outputs replaced by a custom operator.

``Inner`` takes a dict holding a list of tensors, a namedtuple and a transformers ``DynamicCache``
(a full layer and a sliding-window layer) and returns a dict with a list, a namedtuple and a new
``DynamicCache``. ``Outer`` builds those structures from plain tensors and calls ``Inner``. The test
runs ``Outer`` eagerly, then replaces ``Inner`` by a wrapper that serializes its arguments, calls a
``torch.library.custom_op`` (with a fake implementation) on the flat list of tensors, and rebuilds
the outputs from their type-info strings. Outputs must equal the eager ones, and
``torch.export.export`` of ``Outer`` must succeed with the custom operator in its graph.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

import pytest
import torch
from _pbp_compare import assert_same

from piece_by_piece_serialize.serialize import (
    deserialize_args,
    serialize_args,
    serialize_one,
    type_as_str_with_info,
)

transformers = pytest.importorskip("transformers")
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer  # noqa: E402


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


class Inner(torch.nn.Module):
    def forward(self, inputs: dict[str, Any], pair: Pair, cache: Any) -> tuple[Any, Pair, Any]:
        h = inputs["ids"] + inputs["states"][0] * inputs["states"][1]
        q = pair.left @ pair.right
        new_cache = DynamicCache()
        new_cache.layers = [DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=8)]
        for i, layer in enumerate(cache.layers):
            new_cache.update(layer.keys + q.sum(), layer.values * 2, i)
        return {"h": h, "parts": [h.sum(0), q]}, Pair(q.t(), h), new_cache


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, ids, s0, s1, left, right, k0, v0, k1, v1):  # type: ignore[no-untyped-def]
        cache = DynamicCache()
        cache.layers = [DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=8)]
        cache.update(k0, v0, 0)
        cache.update(k1, v1, 1)
        out, pair, new_cache = self.inner({"ids": ids, "states": [s0, s1]}, Pair(left, right), cache)
        return (
            out["h"],
            out["parts"][0],
            out["parts"][1],
            pair.left,
            pair.right,
            new_cache.layers[0].keys,
            new_cache.layers[1].values,
        )


def _inputs() -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    kv = [torch.randn(1, 2, 5, 4) for _ in range(4)]
    return (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4), torch.randn(4, 6), torch.randn(6, 4), *kv)


def _flat_outputs(outputs: tuple[Any, ...]) -> List[torch.Tensor]:
    flat: List[torch.Tensor] = []
    for i, value in enumerate(outputs):
        r = serialize_one(value, i, None)
        flat.extend(r if isinstance(r, (list, tuple)) else [r])
    return flat


class AsCustomOp(torch.nn.Module):
    """Stands where ``Inner`` stood; flattens, calls the operator, rebuilds."""

    def __init__(self, op: Any, out_types: List[str]) -> None:
        super().__init__()
        self.op = op
        self.out_types = out_types

    def forward(self, *args: Any) -> tuple[Any, ...]:
        flat = serialize_args(args, None, schema=None)
        return deserialize_args(self.op(list(flat)), self.out_types)


def test_submodule_replaced_by_custom_op_exports() -> None:
    model = Outer()
    inputs = _inputs()

    # 1. eager run, recording the inner call's arguments and outputs
    seen: dict[str, Any] = {}

    def hook(module: Any, args: Any, output: Any) -> None:
        seen["args"], seen["output"] = args, output

    handle = model.inner.register_forward_hook(hook)
    expected = model(*inputs)
    handle.remove()
    in_types = [type_as_str_with_info(a) for a in seen["args"]]
    out_types = [type_as_str_with_info(o) for o in seen["output"]]
    assert in_types[1][:3] == "___" and in_types[2] == "DynamicCache_D_S8"
    assert out_types[2] == "DynamicCache_D_S8"
    inner = model.inner

    def run(flat: List[torch.Tensor]) -> List[torch.Tensor]:
        args = deserialize_args(flat, in_types)
        return [t.clone() for t in _flat_outputs(inner(*args))]

    @torch.library.custom_op("pbp_e2e::inner", mutates_args=())
    def inner_op(flat: List[torch.Tensor]) -> List[torch.Tensor]:
        return run(flat)

    @inner_op.register_fake
    def _(flat: List[torch.Tensor]) -> List[torch.Tensor]:
        return run(flat)

    # 2. the same model with the submodule replaced by the custom operator
    model.inner = AsCustomOp(torch.ops.pbp_e2e.inner, out_types)
    got = model(*inputs)
    assert len(got) == len(expected) == 7
    assert_same(expected, got)
    # the rebuilt outputs carry the same nested types as the eager ones
    _, rebuilt, _ = _rebuilt_outputs(model, inputs)
    assert_same(seen["output"], rebuilt)

    # 3. torch.export of the outer module keeps the custom operator as one node
    ep = torch.export.export(model, inputs)
    targets = [node.target for node in ep.graph.nodes if node.op == "call_function"]
    assert targets.count(torch.ops.pbp_e2e.inner.default) == 1
    assert_same(expected, tuple(ep.module()(*inputs)))


def _rebuilt_outputs(model: Outer, inputs: tuple[torch.Tensor, ...]) -> Any:
    captured: dict[str, Any] = {}

    def hook(module: Any, args: Any, output: Any) -> None:
        captured["output"] = output

    handle = model.inner.register_forward_hook(hook)
    model(*inputs)
    handle.remove()
    return None, captured["output"], None


class KwInner(torch.nn.Module):
    """Called with keyword arguments; returns a ModelOutput holding a new cache."""

    def forward(self, x: torch.Tensor, mask: Any = None, scale: float = 1.0, **extra: Any) -> Any:
        from transformers.modeling_outputs import CausalLMOutputWithPast

        past = extra["past"]
        new_cache = DynamicCache()
        for i, layer in enumerate(past.layers):
            new_cache.update(layer.keys * scale, layer.values + x.sum(), i)
        logits = x * mask if mask is not None else x
        return CausalLMOutputWithPast(logits=logits, cache=new_cache)


class KwOuter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = KwInner()

    def forward(self, x, m, k0, v0):  # type: ignore[no-untyped-def]
        cache = DynamicCache()
        cache.update(k0, v0, 0)
        out = self.inner(x, mask=m, past=cache)
        return out.logits, out.cache.layers[0].keys, out.cache.layers[0].values


class KwAsCustomOp(torch.nn.Module):
    """Serializes positional and keyword arguments, rebuilds a ModelOutput with a cache inside."""

    def __init__(self, op: Any, names: List[str], out_type: str) -> None:
        super().__init__()
        self.op, self.names, self.out_type = op, names, out_type

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        flat, empty = serialize_args(args, kwargs, schema=None, args_names=self.names)
        assert empty == {}
        (out,) = deserialize_args(self.op(list(flat)), [self.out_type])
        return out


def test_keyword_call_and_model_output_with_cache_export() -> None:
    import inspect

    from piece_by_piece_serialize.serialize import deserialize_args_kwargs

    model = KwOuter()
    torch.manual_seed(1)
    inputs = (torch.randn(2, 3), torch.randn(2, 3), torch.randn(1, 2, 4, 3), torch.randn(1, 2, 4, 3))
    seen: dict[str, Any] = {}

    def hook(module: Any, args: Any, kwargs: Any, output: Any) -> None:
        seen.update(args=args, kwargs=kwargs, output=output)

    handle = model.inner.register_forward_hook(hook, with_kwargs=True)
    expected = model(*inputs)
    handle.remove()
    names = [p.name for p in inspect.signature(KwInner.forward).parameters.values()][1:-1]  # x, mask, scale
    types = (
        [type_as_str_with_info(a) for a in seen["args"]],
        {k: type_as_str_with_info(v) for k, v in seen["kwargs"].items()},
    )
    out_type = type_as_str_with_info(seen["output"])
    assert types == (["Tensor"], {"mask": "Tensor", "past": "DynamicCache_D"})
    assert out_type[:29] == "WithCaches__1_DynamicCache_D_"
    inner = model.inner

    def run(flat: List[torch.Tensor]) -> List[torch.Tensor]:
        args, kwargs = deserialize_args_kwargs(flat, {}, types, ordered_names=names)
        return [t.clone() for t in serialize_one(inner(*args, **kwargs), "output", None)]

    @torch.library.custom_op("pbp_e2e::kw_inner", mutates_args=())
    def kw_op(flat: List[Optional[torch.Tensor]]) -> List[torch.Tensor]:
        return run(flat)  # type: ignore[arg-type]

    kw_op.register_fake(run)

    model.inner = KwAsCustomOp(torch.ops.pbp_e2e.kw_inner, names, out_type)
    got = model(*inputs)
    assert_same(expected, got)
    ep = torch.export.export(model, inputs)
    targets = [node.target for node in ep.graph.nodes if node.op == "call_function"]
    assert targets.count(torch.ops.pbp_e2e.kw_inner.default) == 1
    assert_same(expected, tuple(ep.module()(*inputs)))
