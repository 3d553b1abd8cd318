"""Calls that carry only the cache layers they touch (Note [cut calls] in custom_op/_slices.py, Note [cache slices]
in serialize/_cache_slice.py).

A module that updates one layer of a cache gets, after its first call, only that layer's tensors through its
operator, and the caller's cache ends as eager leaves it, every layer compared; a later call that uses another
layer meets a spare layer and is refused by name; a module that iterates the layers, or a cache kind that is not
cut, is carried whole. Through a tiny Llama's decoder layers, the operator of each layer takes its own two cache
tensors whatever the depth, and decode steps equal the model's.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")
cache_utils = pytest.importorskip("transformers.cache_utils")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402
from piece_by_piece_serialize import as_custom_op, replace_with_custom_ops, restore_modules  # noqa: E402
from piece_by_piece_serialize.serialize._cache_slice import UntouchedLayerError  # noqa: E402

_names = (f"pbp_slices::m{i}" for i in itertools.count())


def _cache(n: int, batch: int = 1, past: int = 3) -> Any:
    cache = cache_utils.DynamicCache()
    g = torch.Generator().manual_seed(n + past)
    for i in range(n):
        cache.update(torch.randn(batch, 2, past, 4, generator=g), torch.randn(batch, 2, past, 4, generator=g), i)
    return cache


class OneLayer(torch.nn.Module):
    """Appends ``x`` to the keys and values of cache layer ``index`` (a decoder layer's use of its cache)."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def forward(self, x: Any, cache: Any) -> Any:
        keys, values = cache.update(x, x * 2, self.index)
        return keys.sum(dim=2) + values.mean(dim=2)


class EveryLayer(OneLayer):
    def forward(self, x: Any, cache: Any) -> Any:
        total = sum(layer.keys.sum() for layer in cache.layers)  # iterates: every layer is touched
        return super().forward(x, cache) + total


def _spied(wrapped: Any) -> list[int]:
    """The number of tensors of each operator call."""
    op = wrapped._pbp_op
    counts: list[int] = []
    run = op.eager  # the real kernel's work, on either route (Note [plain eager calls])
    op.eager = lambda tensors, rest: counts.append(len(tensors)) or run(tensors, rest)
    return counts


@pytest.mark.parametrize("n_layers", [2, 5])
def test_a_module_touching_one_layer_takes_only_that_layers_tensors(n_layers: int) -> None:
    module = OneLayer(1)
    wrapped = as_custom_op(module, next(_names))
    counts = _spied(wrapped)
    for batch, past in ((1, 3), (2, 5), (3, 4), (1, 7)):
        ours = _cache(n_layers, batch, past)
        theirs = copy.deepcopy(ours)
        x = torch.randn(batch, 2, 1, 4)
        got, want = wrapped(x, ours), module(x, theirs)
        assert torch.equal(got, want)
        assert_same_state(theirs, ours)  # layer 1 grown, the others as they were
    # the first call carries the cache whole and is watched; the others carry x and layer 1's keys and values
    assert counts == [1 + 2 * n_layers, 3, 3, 3]
    wrapped._pbp_op.close()


def test_a_module_touching_another_layer_later_is_refused_by_name() -> None:
    module = OneLayer(0)
    wrapped = as_custom_op(module, next(_names))
    wrapped(torch.randn(1, 2, 1, 4), _cache(3))
    wrapped.index = 2  # a layer the structure was not seen touching (the wrapper holds its own attributes)
    with pytest.raises(UntouchedLayerError, match=r"used layer 2 of its cache, which it did not touch .*touched layers \[0\]"):
        wrapped(torch.randn(1, 2, 1, 4), _cache(3))
    wrapped._pbp_op.close()


def test_a_module_iterating_the_layers_is_carried_the_whole_cache() -> None:
    module = EveryLayer(1)
    wrapped = as_custom_op(module, next(_names))
    counts = _spied(wrapped)
    for _ in range(2):
        ours = _cache(3)
        theirs = copy.deepcopy(ours)
        x = torch.randn(1, 2, 1, 4)
        assert torch.equal(wrapped(x, ours), module(x, theirs))
        assert_same_state(theirs, ours)
    assert counts == [7, 7]
    wrapped._pbp_op.close()


@pytest.mark.parametrize("n_layers", [2, 6])
def test_llama_decoder_layers_take_their_own_cache_layer(n_layers: int) -> None:
    model = tiny.llama_sized(32, n_layers)
    bare = copy.deepcopy(model)
    paths = replace_with_custom_ops(model, "LlamaDecoderLayer", "pbp_slices_llama")
    counts = _spied(model.get_submodule(paths[-1]))
    for batch, past, new in ((1, 4, 1), (2, 6, 1), (3, 5, 2)):
        _, ours = tiny.prefill(bare, past, batch=batch)
        theirs = copy.deepcopy(ours)
        x = tiny.ids(new, batch, seed=3)
        with torch.enable_grad():  # through the operator: a steady call without gradients is the module's own call
            got, want = model(x, cache=ours, use_cache=True), bare(x, cache=theirs, use_cache=True)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
        assert_same_state(theirs, ours)
    # hidden states, mask, cos and sin, positions; then the last layer's keys and values, whatever the depth
    assert counts[1:] == [5 + 2, 5 + 2]
    restore_modules(model)
