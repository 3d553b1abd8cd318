"""A newer transformers' layer state, carried: LinearAttentionLayer's cumulative_length_linear (5.25).

transformers 5.25 counts the tokens a linear-attention layer has seen in a 0-d int64 tensor it updates in
place. The "l" parameter of the linear kinds announces it, and it travels as one item. The CI pins 5.24,
so the attribute is put where 5.25's constructor puts it (after conv_kernel_size) on real 5.24 layers; the
same tests pass against 5.25 itself (tests/serialize with transformers 5.25 installed).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import deserialize_args, serialize_one, type_as_str_with_info  # noqa: E402


def _as_in_525(layer: Any, length: Any) -> None:
    state = vars(layer)
    if "cumulative_length_linear" in state:  # transformers 5.25 itself
        state["cumulative_length_linear"] = length
        return
    items = list(state.items())
    at = [k for k, _ in items].index("conv_kernel_size") + 1
    state.clear()
    state.update(items[:at] + [("cumulative_length_linear", length)] + items[at:])


def _cache() -> Any:
    model = tiny.qwen3_next()
    _, cache = tiny.prefill(model, 7)
    for layer in cache.layers:
        if type(layer).__name__ == "LinearAttentionLayer":
            _as_in_525(layer, torch.tensor(7))
    return cache


def test_cumulative_length_linear_is_carried() -> None:
    cache = _cache()
    text = type_as_str_with_info(cache)
    assert text == "DynamicCache_On_3Aylsc4hp_D"
    rebuilt = deserialize_args(list(serialize_one(cache, "cache", "")), [text])[0]
    assert assert_same_state(cache, rebuilt, same_tensors=True) > len(cache.layers)
    assert all(a.cumulative_length_linear is b.cumulative_length_linear for a, b in zip(cache.layers[:3], rebuilt.layers[:3]))
    assert list(vars(rebuilt.layers[0])) == list(vars(cache.layers[0]))  # 5.25's attribute order


@pytest.mark.parametrize("bad", [7, torch.tensor([7]), torch.tensor(7.0)])
def test_a_misfit_length_is_refused_by_name(bad: Any) -> None:
    cache = _cache()
    vars(cache.layers[1])["cumulative_length_linear"] = bad
    with pytest.raises(TypeError, match="layer 1 .*cumulative_length_linear is .*not a 0-d int64 tensor"):
        type_as_str_with_info(cache)


def test_a_misfit_item_is_an_error_naming_it() -> None:
    cache = _cache()
    text = type_as_str_with_info(cache)
    flat = list(serialize_one(cache, "cache", ""))
    flat[0] = torch.zeros(2)  # layer 0's first item is its cumulative_length_linear
    with pytest.raises(ValueError, match="cumulative_length_linear must be a 0-d integer tensor"):
        deserialize_args(flat, [text])
