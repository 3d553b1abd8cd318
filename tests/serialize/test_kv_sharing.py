"""transformers' KVSharingDict, through which Gemma3n's layers share keys and values: carried as
``KVSharingDict_N__<key>__<count>...`` (the tensors themselves, key by key) and rebuilt as a new KVSharingDict."""

from __future__ import annotations

import pytest
import torch

cache_utils = pytest.importorskip("transformers.cache_utils")

from piece_by_piece_serialize import deserialize_args, serialize_args, type_as_str_with_info  # noqa: E402
from piece_by_piece_serialize.type_info import KVSharingInfo, parse_type_info, pretty_type_info  # noqa: E402


def _shared() -> object:
    shared = cache_utils.KVSharingDict()
    shared["sliding_attention"] = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    shared["full_attention"] = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    return shared


def test_round_trip_keeps_the_tensors_and_the_key_order():
    shared = _shared()
    info = type_as_str_with_info(shared)
    assert info == "KVSharingDict_2__sliding_attention__2__full_attention__2"
    flat = serialize_args((torch.ones(1), shared), None, None)
    assert len(flat) == 5 and flat[1] is shared["sliding_attention"][0] and flat[4] is shared["full_attention"][1]
    x, back = deserialize_args(list(flat), ["Tensor", info])
    assert type(back) is type(shared) and back is not shared and list(back) == list(shared)
    assert all(a is b for key in shared for a, b in zip(back[key], shared[key], strict=True))
    (empty,) = deserialize_args([], ["KVSharingDict_0"])
    assert type(empty) is type(shared) and len(empty) == 0
    assert type_as_str_with_info(cache_utils.KVSharingDict()) == "KVSharingDict_0"


def test_the_language_and_the_view():
    info = parse_type_info("KVSharingDict_2__sliding_attention__2__full_attention__2")
    assert info == KVSharingInfo((("sliding_attention", 2), ("full_attention", 2))) and info.n_items == 4
    assert pretty_type_info(str(info)).splitlines() == [
        "KVSharingDict (2 keys, 4 tensors: keys and values shared between layers)",
        "  'sliding_attention': 2 tensors",
        "  'full_attention': 2 tensors",
    ]


def test_what_it_cannot_hold_is_refused():
    shared = cache_utils.KVSharingDict()
    shared["full_attention"] = [torch.ones(1)]
    with pytest.raises(TypeError, match=r"^value: KVSharingDict\['full_attention'\] is a list, not a tuple of tensors$"):
        type_as_str_with_info(shared)
    shared = cache_utils.KVSharingDict()
    shared["full attention"] = (torch.ones(1),)
    with pytest.raises(TypeError, match=r"^positional argument 0: TensorDictInfo: key 'full attention' has no spelling"):
        serialize_args((shared,), None, None)
    with pytest.raises(TypeError, match=r"^expected_types\[0\]='KVSharingDict_1__a__2' expects tensors only, got a str$"):
        deserialize_args([torch.ones(1), "x"], ["KVSharingDict_1__a__2"])
