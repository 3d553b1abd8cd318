"""Objects pytree does not open are refused by the serializer, saying how to make them carriable (Note [opaque
leaves] in serialize/_flatten.py); a dataclass registered with pytree is carried field by field and rebuilt."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils import _pytree

from piece_by_piece_serialize import deserialize_args, serialize_args, type_as_str_with_info
from piece_by_piece_serialize.serialize import OpaqueLeafError


@dataclasses.dataclass
class Plain:
    a: torch.Tensor
    b: int


@dataclasses.dataclass
class Registered:
    hidden: torch.Tensor
    mask: torch.Tensor | None
    scale: float


_pytree.register_dataclass(Registered)


class Handle:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


def test_a_dataclass_is_refused_with_the_registration_hint():
    x = torch.ones(2)
    with pytest.raises(OpaqueLeafError) as info:
        serialize_args((x, Plain(x, 1)), None, None)
    assert str(info.value) == (
        f"positional argument 1 is of type {__name__}.Plain, which pytree does not flatten: it would reach the "
        "operator as one opaque object; register it with torch.utils._pytree.register_dataclass(Plain) and its "
        "fields are carried like any other container's"
    )
    assert isinstance(info.value, TypeError) and info.value.path == "" and info.value.leaf_type is Plain
    with pytest.raises(OpaqueLeafError, match=r"^value is of type .*\.Plain, which pytree does not flatten"):
        type_as_str_with_info(Plain(x, 1))


def test_a_set_and_an_object_deep_inside_are_refused_where_they_sit():
    x = torch.ones(2)
    with pytest.raises(OpaqueLeafError) as info:
        serialize_args((x,), {"state": {"k": [x, {1, 2}]}}, None, ["x", "state"])
    assert str(info.value) == (
        "argument 'state' at ['k'][1] is of type set, which pytree does not flatten: it would reach the operator "
        "as one opaque object; pass a sorted list or a tuple instead (a set has no order to flatten in)"
    )
    with pytest.raises(OpaqueLeafError, match=r"positional argument 0 at \[1\] is of type .*\.Handle, .*register_pytree_node\(Handle, \.\.\.\)"):
        serialize_args(([x, Handle(x)],), None, None)


def test_plain_leaves_still_pass():
    x = torch.ones(2)
    value = {"x": x, "name": "rope", "n": 3, "f": 0.5, "none": None, "dtype": torch.float16, "size": torch.Size([2, 3])}
    flat = serialize_args((value,), None, None)
    assert flat == (x, "rope", 3, 0.5, None, torch.float16, 2, 3)  # pytree opens torch.Size into its ints


def test_a_registered_dataclass_is_carried_and_rebuilt():
    h, m = torch.randn(2, 3), torch.ones(2, 3)
    value = Registered(h, m, 0.5)
    info = type_as_str_with_info(value)
    # a TreeSpec name whose node is the class, by module.qualname, and whose context lists the fields
    assert info == f"___v1_C_{__name__}__Registered_K_L_L_Shidden_Smask_Sscale_E_L_E_E_X3_E"
    flat = serialize_args((value,), None, None)
    assert len(flat) == 3 and flat[0] is h and flat[1] is m and flat[2] == 0.5
    (back,) = deserialize_args(list(flat), [info])
    assert type(back) is Registered and back.hidden is h and back.mask is m and back.scale == 0.5
