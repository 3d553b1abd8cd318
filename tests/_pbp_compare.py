"""Deep comparison used by the serialization tests: same types, same tensors, same cache layers.

``assert_same(expected, got)`` walks both values together and fails with the path of the first
difference. Types must match exactly (a tuple is not a list, an OrderedDict is not a dict); tensors
must have the same dtype, shape and values (NaN equal to NaN); transformers caches must have the same
layer classes, sliding windows, population and tensors. ``same_objects=True`` also requires every
tensor to be the very same object.
"""

from __future__ import annotations

import collections
import math
from typing import Any

import torch


def _cache_layers(cache: Any) -> list[Any]:
    if hasattr(cache, "self_attention_cache"):
        return list(cache.self_attention_cache.layers) + list(cache.cross_attention_cache.layers)
    return list(cache.layers)


def assert_same(expected: Any, got: Any, same_objects: bool = False, path: str = "value") -> int:
    """Assert equality as described in the module docstring; return the number of tensors compared."""
    assert type(got) is type(expected), f"{path}: type {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
        assert got.shape == expected.shape, f"{path}: shape {tuple(got.shape)} != {tuple(expected.shape)}"
        assert torch.equal(got, expected) or bool(
            torch.all((got == expected) | (torch.isnan(got) & torch.isnan(expected)))
            if got.is_floating_point() or got.is_complex()
            else False
        ), f"{path}: values differ"
        if same_objects:
            assert got is expected, f"{path}: not the same tensor object"
        return 1
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got), f"{path}: {got!r} != nan"
        return 0
    if type(expected).__module__ == "transformers.cache_utils" and (
        hasattr(expected, "layers") or hasattr(expected, "self_attention_cache")
    ):
        n = 0
        old, new = _cache_layers(expected), _cache_layers(got)
        assert len(old) == len(new), f"{path}: {len(new)} layers != {len(old)}"
        if hasattr(expected, "self_attention_cache"):
            assert len(got.self_attention_cache.layers) == len(expected.self_attention_cache.layers)
        for i, (a, b) in enumerate(zip(old, new)):
            assert type(a) is type(b), f"{path}.layers[{i}]: {type(b).__name__} != {type(a).__name__}"
            assert getattr(a, "sliding_window", None) == getattr(b, "sliding_window", None), f"{path}.layers[{i}]"
            if not hasattr(a, "is_initialized"):  # a linear-attention layer: its states, then all its state
                for k in ("conv_states", "recurrent_states"):
                    n += assert_same(vars(a)[k], vars(b)[k], same_objects, f"{path}.layers[{i}].{k}")
                assert_same_state(a, b, f"{path}.layers[{i}]")
                continue
            assert a.is_initialized == b.is_initialized, f"{path}.layers[{i}]: population differs"
            if a.is_initialized:
                n += assert_same(a.keys, b.keys, same_objects, f"{path}.layers[{i}].keys")
                n += assert_same(a.values, b.values, same_objects, f"{path}.layers[{i}].values")
        return n
    if isinstance(expected, dict):
        assert list(got.keys()) == list(expected.keys()) or (
            type(expected) is dict and set(got) == set(expected)
        ), f"{path}: keys {list(got)} != {list(expected)}"
        if isinstance(expected, collections.defaultdict):
            assert got.default_factory is expected.default_factory, f"{path}: default_factory differs"
        return sum(assert_same(expected[k], got[k], same_objects, f"{path}[{k!r}]") for k in expected)
    if isinstance(expected, (list, tuple, collections.deque)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        if isinstance(expected, collections.deque):
            assert got.maxlen == expected.maxlen, f"{path}: maxlen {got.maxlen} != {expected.maxlen}"
        return sum(
            assert_same(a, b, same_objects, f"{path}[{i}]") for i, (a, b) in enumerate(zip(expected, got))
        )
    assert got == expected, f"{path}: {got!r} != {expected!r}"
    return 0


def assert_same_state(expected: Any, got: Any, path: str = "cache", same_tensors: bool = False) -> int:
    """Every attribute of two caches, of their parts and of every layer: names, order and values.

    This is what later computation can see. Tensors compare by dtype, device, shape and values (the very
    same objects with ``same_tensors=True``, except the ones a rebuild derives, which only compare equal);
    dicts by keys in order; other values with ``==``; a ``torch.Stream`` by its device. Returns the number
    of objects compared (cache, parts, layers).
    """
    assert type(got) is type(expected), f"{path}: type {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert (got.dtype, got.device, got.shape) == (expected.dtype, expected.device, expected.shape), path
        if got.dtype.itemsize == 1 and got.is_floating_point():  # float8: compare the bytes (no == on CPU)
            assert torch.equal(got.view(torch.uint8), expected.view(torch.uint8)), f"{path}: values differ"
        else:
            assert torch.equal(got, expected), f"{path}: values differ"
        if same_tensors and "_sliding_window_tensor" not in path:  # derived, shared per window and device
            assert got is expected, f"{path}: not the same tensor object"
        return 0
    if isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        return sum(assert_same_state(e, g, f"{path}[{i}]", same_tensors) for i, (e, g) in enumerate(zip(expected, got)))
    if isinstance(expected, dict):
        assert list(got) == list(expected), f"{path}: keys {list(got)} != {list(expected)}"
        return sum(assert_same_state(expected[k], got[k], f"{path}[{k!r}]", same_tensors) for k in expected)
    if type(expected).__name__ == "Stream":
        assert got.device == expected.device, path
        return 0
    if isinstance(expected, type) or not hasattr(expected, "__dict__"):
        assert got == expected, f"{path}: {got!r} != {expected!r}"
        return 0
    state_e, state_g = vars(expected), vars(got)
    assert list(state_g) == list(state_e), f"{path}: attributes {list(state_g)} != {list(state_e)}"
    return 1 + sum(assert_same_state(state_e[k], state_g[k], f"{path}.{k}", same_tensors) for k in state_e)
