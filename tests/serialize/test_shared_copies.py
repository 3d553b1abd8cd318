"""Copies that share the clone of a tensor unchanged since an earlier copy (Note [shared copies]).

Each case compares with what independent deep copies (``make_copy``) would hold: the same values, never the
original object, and one object only where the tensor is the same object at the same version.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from piece_by_piece_serialize import make_copy  # noqa: E402
from piece_by_piece_serialize.serialize import shared_copies as SharedCopies  # noqa: E402


def test_an_unchanged_tensor_is_cloned_once_and_never_shared_with_the_original():
    x, y = torch.randn(3), torch.randn(2)
    copies = SharedCopies()
    first, second = copies.copy({"x": x, "y": [y]}), copies.copy((x, y))
    assert second[0] is first["x"] and second[1] is first["y"][0]
    assert first["x"] is not x and first["x"].data_ptr() != x.data_ptr()
    torch.testing.assert_close(second[0], x, rtol=0, atol=0)


def test_a_tensor_changed_in_place_between_two_copies_is_cloned_again():
    x = torch.zeros(3)
    copies = SharedCopies()
    before = copies.copy([x])
    x.add_(1)
    after = copies.copy([x])
    assert after[0] is not before[0]
    assert before[0].tolist() == [0.0, 0.0, 0.0] and after[0].tolist() == [1.0, 1.0, 1.0]
    x.add_(1)
    assert copies.copy([x])[0].tolist() == [2.0, 2.0, 2.0]


def test_a_tensor_met_twice_in_one_value_gets_two_clones_as_make_copy_gives():
    x = torch.randn(2)
    copies = SharedCopies()
    pair = copies.copy((x, x))
    plain = make_copy((x, x))
    assert (pair[0] is pair[1]) == (plain[0] is plain[1]) is False
    later = copies.copy((x, x))
    assert later[0] is pair[0] and later[1] is not later[0]


def test_inference_tensors_have_no_version_and_are_never_shared():
    with torch.inference_mode():
        x = torch.randn(2)
    copies = SharedCopies()
    a, b = copies.copy([x]), copies.copy([x])
    assert a[0] is not b[0]
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)


def test_a_dynamic_cache_shares_the_layers_an_update_left_alone():
    cache = transformers.DynamicCache()
    for i in range(3):
        cache.update(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), i)
    copies = SharedCopies()
    before = copies.copy(cache)
    cache.update(torch.randn(1, 2, 1, 8), torch.randn(1, 2, 1, 8), 1)  # layer 1 grows by a token: new tensors
    after = copies.copy(cache)
    assert type(after) is type(cache) and after is not before
    for i in (0, 2):
        assert after.layers[i].keys is before.layers[i].keys and after.layers[i].values is before.layers[i].values
    assert after.layers[1].keys.shape[-2] == 5 and before.layers[1].keys.shape[-2] == 4
    for copied, layer in zip(after.layers, cache.layers, strict=True):
        torch.testing.assert_close(copied.keys, layer.keys, rtol=0, atol=0)
        assert copied.keys is not layer.keys
