"""A registered cache class with lists of tensors and optional tensors (``register_cache_class(lists=...)``):
MiniMaxCache keeps one linear-attention state per layer in ``linear_cache``, ``[]`` where a layer is attention."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from _tiny_models import ids, minimax, register_minimax_cache  # noqa: E402

from piece_by_piece_serialize import deserialize_args, serialize_args, type_as_str_with_info  # noqa: E402
from piece_by_piece_serialize.type_info import parse_type_info, pretty_type_info  # noqa: E402


@pytest.fixture(scope="module")
def model_and_cache():
    register_minimax_cache()
    model = minimax()
    with torch.no_grad():
        out = model(ids(5, batch=2), use_cache=True)
    return model, out.cache


def test_the_cache_is_spelled_with_its_list_length(model_and_cache):
    _, cache = model_and_cache
    assert [type(x).__name__ for x in cache.linear_cache] == ["Tensor", "list", "Tensor"]  # 3 entries, 4 layers
    info = type_as_str_with_info(cache)
    assert info == "MiniMaxCache_Ol3_d_D_d_D"
    parsed = parse_type_info(info)
    assert (parsed.list_length, parsed.n_items) == (3, 3 + 4)  # the list's entries, then two populated layers
    assert pretty_type_info(info).splitlines()[0] == "MiniMaxCache (4 layers, 7 items); linear_cache of 3 entries"


def test_round_trip_keeps_every_tensor_and_the_empty_entry(model_and_cache):
    model, cache = model_and_cache
    flat = serialize_args((cache,), None, None)
    assert len(flat) == 7 and flat[0] is cache.linear_cache[0] and flat[1] is None and flat[2] is cache.linear_cache[2]
    (back,) = deserialize_args(list(flat), [type_as_str_with_info(cache)])
    assert type(back) is type(cache) and back is not cache
    assert back.linear_cache[0] is cache.linear_cache[0] and back.linear_cache[1] == [] and back.linear_cache[2] is cache.linear_cache[2]
    assert [layer.keys is other.keys for layer, other in zip(back.layers, cache.layers, strict=True)] == [True] * 4
    step = ids(1, batch=2, seed=3)
    with torch.no_grad():
        assert torch.equal(model(step, cache=back).logits, model(step, cache=cache).logits)


def test_what_a_list_cannot_hold_is_refused(model_and_cache):
    _, cache = model_and_cache
    broken = type(cache)()
    broken.linear_cache = [torch.ones(1), "x"]
    with pytest.raises(TypeError, match=r"linear_cache\[1\] is a str, neither a tensor nor an empty entry \(None or \[\]\)"):
        type_as_str_with_info(broken)
    with pytest.raises(Exception, match="'l' \\(the length of registered lists\\) is for a class registered with lists="):
        parse_type_info("DynamicCache_Ol3_D")
    with pytest.raises(TypeError, match=r"linear_cache\[0\] must be a tensor"):
        deserialize_args(["oops", None, None], ["MiniMaxCache_Ol3_0"])


def test_optional_tensors_and_a_list_in_tensors_gets_the_hint():
    from transformers import DynamicCache

    from piece_by_piece_serialize import register_cache_class

    class ScratchCache(DynamicCache):
        def __init__(self) -> None:
            super().__init__()
            self.scratch = None  # an optional tensor

    class ListedCache(DynamicCache):
        def __init__(self) -> None:
            super().__init__()
            self.states = [torch.ones(1)]

    register_cache_class(ScratchCache, like=DynamicCache, tensors=("scratch",))
    register_cache_class(ListedCache, like=DynamicCache, tensors=("states",))
    cache = ScratchCache()
    assert serialize_args((cache,), None, None) == (None,)
    (back,) = deserialize_args([None], [type_as_str_with_info(cache)])
    assert type(back) is ScratchCache and back.scratch is None
    cache.scratch = torch.zeros(2)
    (back,) = deserialize_args(list(serialize_args((cache,), None, None)), [type_as_str_with_info(cache)])
    assert back.scratch is cache.scratch
    with pytest.raises(TypeError, match=r"states is a list, not a tensor \(or None\); register it with lists=\('states',\)"):
        type_as_str_with_info(ListedCache())
