"""``defaultdict(None, ...)`` (no default factory) has a canonical TreeSpec name and round-trips.

Fuzz finding defaultdict_none_factory (reproducer replayed from tests/corpus/regressions/pytree_roundtrip/):
the encoder first wrote a name the decoder refused, then refused the value with a message naming ``?.?``.
A missing factory is safe to encode (no code can run), so it is spelled with the format's None constant ``N``.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import pytest
import torch.utils._pytree as pytree

from piece_by_piece_serialize.errors import TreeSpecNameError
from piece_by_piece_serialize.treespec_name import pretty_name, tree_spec_as_name, tree_spec_from_name

CASES = [
    (defaultdict(None, {"a": 1}), "___v1_DD_N_D_a_X_E"),
    (defaultdict(None), "___v1_DD_N_D_E"),
    (defaultdict(None, {"N": 1, 2: 3}), "___v1_DD_N_D_SN_X_I2_X_E"),
    (defaultdict(list, {"a": 1, "b": defaultdict(None, {"c": 2})}), "___v1_DD_list_D_a_X_b_DD_N_D_c_X_E_E"),
    ([defaultdict(None, {"a": 1}), defaultdict(int, {"a": 2})], "___v1_L_DD_N_D_a_X_E_DD_int_D_a_X_E_E"),
]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_none_factory_round_trips(value: object, expected: str) -> None:
    leaves, spec = pytree.tree_flatten(value)
    name = tree_spec_as_name(spec, len(leaves))
    assert name == expected
    n, back = tree_spec_from_name(name)
    assert n == len(leaves) and back == spec
    assert tree_spec_as_name(back, n) == name  # canonical: a fixed point
    rebuilt = pytree.tree_unflatten(leaves, back)
    assert rebuilt == value and type(rebuilt) is type(value)
    assert pytree.tree_flatten(rebuilt)[1] == spec


def test_none_factory_rebuilt_without_factory() -> None:
    _, back = tree_spec_from_name("___v1_DD_N_D_a_X_E")
    rebuilt = pytree.tree_unflatten([1], back)
    assert type(rebuilt) is defaultdict and rebuilt.default_factory is None
    with pytest.raises(KeyError):
        rebuilt["missing"]  # no factory: nothing runs on a missing key


def test_pretty_name() -> None:
    assert pretty_name("___v1_DD_N_D_a_X_E").splitlines()[0] == "defaultdict(None)"


def test_factory_that_is_not_a_class_named_by_repr() -> None:
    spec = pytree.tree_structure(defaultdict(functools.partial(list), {"a": 1}))
    with pytest.raises(TreeSpecNameError) as err:
        tree_spec_as_name(spec, 1)
    message = str(err.value)
    assert message.startswith("cannot encode defaultdict factory functools.partial(<class 'list'>): it is not a class")
    assert "?.?" not in message


@pytest.mark.parametrize(
    ("name", "expected", "pos"),
    [
        ("___v1_DD_Nx_D_a_X_E", "unknown defaultdict factory 'Nx'", 6),  # a reference, not N: points at DD
        ("___v1_DD_N_a_X_E", "expected '_D', got 'a'", 11),  # the separator is fine, 'a' is not
        ("___v1_DD_N_N_D_E", "expected '_D', got '_N'", 10),  # a whole token that cannot come here
    ],
)
def test_malformed_none_factory_refused(name: str, expected: str, pos: int) -> None:
    with pytest.raises(TreeSpecNameError, match=expected) as err:
        tree_spec_from_name(name)
    assert err.value.pos == pos
