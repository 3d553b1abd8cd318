"""deserialize_args refuses the mismatches the type_info fuzz harness found, with messages that name the position.

Each case was a silent wrong answer or an IndexError (fuzz findings cache_1d_tensor, list_item_as_tree_leaf,
scalar_kind_unchecked; their reproducers are replayed from tests/corpus/regressions/type_info/). The contract
these tests pin: a scalar string announces the item's exact Python kind (bool is not an int, an int is not a
float, no coercion; torch's SymBool/SymInt/SymFloat are accepted), a TreeSpec name's leaves are never a list,
tuple or dict taken from the middle of ``res``, and a cache layer's key and value tensors have rank >= 2.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize.serialize import deserialize_args  # noqa: E402

KINDS = {"bool": True, "int": 3, "float": 2.5}


@pytest.mark.parametrize("announced", sorted(KINDS))
@pytest.mark.parametrize("given", sorted(KINDS))
def test_scalar_kind_is_checked(announced: str, given: str) -> None:
    item = KINDS[given]
    if announced == given:
        out = deserialize_args([item], [announced])
        assert out == (item,) and type(out[0]) is type(item)
        return
    with pytest.raises(TypeError) as err:
        deserialize_args([item], [announced])
    assert str(err.value) == f"expected_types[0]='{announced}' expects a Python {announced} but res[0] is a {given}"


def test_all_scalar_mismatches_refused() -> None:
    refused = 0
    for announced in KINDS:
        for given, item in KINDS.items():
            try:
                deserialize_args([torch.zeros(1), item], ["Tensor", announced])
            except TypeError as err:
                assert "res[1]" in str(err)
                refused += 1
    assert refused == 6  # 9 pairs, 3 of them matching


def test_symbolic_scalars_accepted() -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    sym_int = env.create_unbacked_symint()
    sym_float = env.create_unbacked_symfloat()
    sym_bool = sym_int == 3
    assert isinstance(sym_bool, torch.SymBool)
    out = deserialize_args([sym_int, sym_float, sym_bool], ["int", "float", "bool"])
    assert out[0] is sym_int and out[1] is sym_float and out[2] is sym_bool


@pytest.mark.parametrize("container", [[torch.ones(1)], (torch.ones(1),), {"a": torch.ones(1)}])
def test_container_item_is_not_a_tree_leaf(container: Any) -> None:
    a, b = torch.zeros(1), torch.ones(1)
    with pytest.raises(TypeError) as err:
        deserialize_args([a, b, container], ["___v1_T_X3_E"])
    assert str(err.value) == (
        "expected_types[0]='___v1_T_X3_E' expects leaves (tensors, scalars, None) but item 2 of its 3 items "
        f"is a {type(container).__name__}"
    )


def test_packed_group_still_accepted() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    (out,) = deserialize_args([[a, b, c]], ["___v1_T_X3_E"])
    assert type(out) is tuple and out[0] is a and out[1] is b and out[2] is c
    (out,) = deserialize_args([a, 3, None], ["___v1_T_X3_E"])
    assert out == (a, 3, None)


def test_cache_tensors_need_rank_two() -> None:
    pytest.importorskip("transformers")
    with pytest.raises(ValueError) as err:
        deserialize_args([torch.zeros(1)] * 6, ["DynamicCache_2D_W4"])
    assert str(err.value) == (
        "expected_types[0]='DynamicCache_2D_W4': layer 0 (DynamicLayer): item keys has shape (1,); the key and value "
        "tensors of a cache layer need rank >= 2 (..., seq_len, head_dim)"
    )
    kv = [torch.zeros(1, 1, 2, 4) for _ in range(5)] + [torch.zeros(4)]
    with pytest.raises(ValueError, match=r"layer 2 \(DynamicSlidingWindowLayer\): item values has shape \(4,\)"):
        deserialize_args(kv, ["DynamicCache_2D_W4"])
    (cache,) = deserialize_args([torch.zeros(2, 4) for _ in range(6)], ["DynamicCache_2D_W4"])
    assert len(cache.layers) == 3 and cache.get_seq_length() == 2
