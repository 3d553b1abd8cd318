"""Registering a cache or layer class of one's own: what it carries, what it refuses, what it never does.

Registrations are process-wide and permanent (as pytree's are), so every test registers classes of its
own, with names no other test uses.
"""

from __future__ import annotations

import doctest
from typing import Any

import pytest

torch = pytest.importorskip("torch")
cu = pytest.importorskip("transformers.cache_utils")

from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import (  # noqa: E402
    caches,
    deserialize_args,
    make_copy,
    register_cache_class,
    register_cache_layer_class,
    serialize_one,
    type_as_str_with_info,
)
from piece_by_piece_serialize.errors import TreeSpecNameError  # noqa: E402


def kv(n: int = 3) -> Any:
    return torch.randn(1, 2, n, 4)


class BiasedLayer(cu.DynamicSlidingWindowLayer):
    """A sliding layer with a learned bias tensor and a step counter."""

    def __init__(self, sliding_window: int) -> None:
        super().__init__(sliding_window=sliding_window)
        self.bias = torch.zeros(4)
        self.steps = 0


class CountingCache(cu.DynamicCache):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen = 0
        self.scale = torch.ones(())


CODE = register_cache_layer_class(BiasedLayer, like=cu.DynamicSlidingWindowLayer, tensors=("bias",), counts=("steps",))
NAME = register_cache_class(CountingCache, like=cu.DynamicCache, counts=("seen",), tensors=("scale",))


def _cache() -> Any:
    cache = CountingCache()
    cache.layers = [BiasedLayer(sliding_window=4), cu.DynamicLayer()]
    for i, n in ((0, 6), (1, 6), (0, 1)):
        cache.update(kv(n), kv(n), i)
    cache.layers[0].steps = 2
    cache.layers[0].bias = torch.randn(4)
    cache.seen = 7
    return cache


def test_registered_classes_round_trip_with_their_extra_state() -> None:
    cache = _cache()
    text = type_as_str_with_info(cache)
    assert (NAME, CODE) == ("CountingCache", "E")
    assert text == "CountingCache_E4_D"
    flat = serialize_one(cache, "cache", None)
    # the cache's own items first (seen as a count tensor, then scale), then each layer's: keys, values,
    # cumulative_length, then the registered extras in their order (steps, bias)
    assert [tuple(x.shape) for x in flat] == [(7, 0), (), (1, 2, 3, 4), (1, 2, 3, 4), (7, 0), (2, 0), (4,), (1, 2, 6, 4), (1, 2, 6, 4)]
    (back,) = deserialize_args(list(flat), [text])
    assert type(back) is CountingCache and type(back.layers[0]) is BiasedLayer
    assert back.seen == 7 and back.layers[0].steps == 2 and back.layers[0].bias is cache.layers[0].bias
    assert back.layers[0].cumulative_length == 7
    for name in vars(cache):
        if name != "layers":
            assert_same_state(getattr(cache, name), getattr(back, name))
    copied = make_copy(cache)
    assert type(copied.layers[0]) is BiasedLayer and torch.equal(copied.layers[0].bias, cache.layers[0].bias)
    assert copied.layers[0].bias is not cache.layers[0].bias


def test_registered_extra_state_is_checked() -> None:
    cache = _cache()
    cache.layers[0].steps = -1
    with pytest.raises(TypeError, match="registered count 'steps' is -1"):
        type_as_str_with_info(cache)
    cache = _cache()
    del cache.layers[0].bias
    with pytest.raises(TypeError, match="registered extra attribute 'bias' is missing"):
        type_as_str_with_info(cache)
    cache = _cache()
    cache.scale = 2.0
    with pytest.raises(TypeError, match="scale is a float, not a tensor"):
        type_as_str_with_info(cache)
    cache = _cache()
    cache.layers[0].unregistered = 1
    with pytest.raises(TypeError, match="has attribute 'unregistered' that this library does not know"):
        type_as_str_with_info(cache)


def test_the_spelling_of_a_registered_class_only_parses_after_registration() -> None:
    class LateCache(cu.DynamicCache):
        pass

    with pytest.raises(TreeSpecNameError, match="unknown cache class 'LateCache'"):
        deserialize_args([], ["LateCache_0"])
    with pytest.raises(TypeError, match="LateCache is not supported.*register_cache_class"):
        type_as_str_with_info(LateCache())
    assert register_cache_class(LateCache, like=cu.DynamicCache) == "LateCache"
    (back,) = deserialize_args([], ["LateCache_0"])
    assert type(back) is LateCache


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"cls": CountingCache, "like": cu.DynamicCache}, ValueError, "already supported"),
        ({"cls": 3, "like": cu.DynamicCache}, TypeError, "cls must be a class"),
        ({"cls": type("A", (cu.DynamicCache,), {}), "like": int}, ValueError, "like must be one of the supported caches"),
        ({"cls": type("B", (cu.DynamicCache,), {}), "like": cu.EncoderDecoderCache}, ValueError, "not EncoderDecoderCache"),
        ({"cls": type("C", (cu.DynamicCache,), {}), "like": cu.DynamicCache, "name": "Mine"}, ValueError, "is not a cache name"),
        ({"cls": type("D", (cu.DynamicCache,), {}), "like": cu.DynamicCache, "name": "EncoderDecoderCacheX"}, ValueError, "is not a cache name"),
        ({"cls": type("E", (cu.DynamicCache,), {}), "like": cu.DynamicCache, "name": "DynamicCache"}, ValueError, "already registered"),
        ({"cls": type("FCache", (cu.DynamicCache,), {}), "like": cu.DynamicCache, "counts": "seen"}, TypeError, "sequence of attribute names"),
        ({"cls": type("GCache", (cu.DynamicCache,), {}), "like": cu.DynamicCache, "counts": ["a"], "tensors": ["a"]}, ValueError, "named once"),
    ],
)
def test_bad_cache_registrations(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        register_cache_class(**kwargs)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"cls": BiasedLayer, "like": cu.DynamicLayer}, ValueError, "already supported"),
        ({"cls": type("H", (cu.DynamicLayer,), {}), "like": cu.DynamicLayer, "code": "D"}, ValueError, "free layer kind letter"),
        ({"cls": type("I", (cu.DynamicLayer,), {}), "like": cu.DynamicLayer, "code": "E"}, ValueError, "free layer kind letter"),
        ({"cls": type("J", (cu.DynamicLayer,), {}), "like": CountingCache}, ValueError, "like must be one of the supported layers"),
    ],
)
def test_bad_layer_registrations(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        register_cache_layer_class(**kwargs)


def test_supported_caches_lists_every_kind() -> None:
    rows = caches.supported_caches()
    names = [row[0] for row in rows]
    assert names[:7] == ["DynamicCache", "StaticCache", "QuantizedCache", "MtpCache", "DFlashCache", "EncoderDecoderCache", "Cache"]
    assert {"D", "S", "W", "T", "V", "A", "X", "CountingCache", "E"} <= set(names)


def test_module_docstring_example_runs() -> None:
    failures, tried = doctest.testmod(caches, raise_on_error=False)
    assert tried >= 3 and failures == 0
