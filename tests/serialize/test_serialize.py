"""The serialization API: the original module's contract, its tests, and the bugs it had, fixed.

Grouped by function. Every behaviour the issue lists from the original's tests is its own test.
"""

from __future__ import annotations

import collections
import inspect
import subprocess
import sys
from typing import Any, NamedTuple

import pytest
import torch
from _pbp_compare import assert_same

from piece_by_piece_serialize.serialize import (
    choose_kwargs_for_dynamic_shapes,
    deserialize_args,
    deserialize_args_kwargs,
    make_copy,
    serialize_args,
    serialize_one,
    type_as_str_with_info,
)


def t(*shape: int) -> torch.Tensor:
    return torch.randn(shape or (2, 3))


class Point(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


# serialize_one ---------------------------------------------------------------------------------


def test_serialize_one_tensor_is_itself() -> None:
    x = t()
    assert serialize_one(x, "x", None) is x


@pytest.mark.parametrize("container", [list, tuple])
def test_serialize_one_sequence_of_tensors_is_itself(container: type) -> None:
    value = container([t(), t()])
    assert serialize_one(value, "x", None) is value


def test_serialize_one_dict_of_tensors_in_insertion_order() -> None:
    """A dict keeps its own order (the original sorted the keys, so a rebuilt dict had another order)."""
    a, b, c = t(), t(), t()
    out = serialize_one({"c": c, "a": a, "b": b}, "d", None)
    assert len(out) == 3
    assert out[0] is c and out[1] is a and out[2] is b


@pytest.mark.parametrize("value", [None, True, False, 0, 7, -3, 1.5, float("inf")])
def test_serialize_one_scalars_pass_through(value: Any) -> None:
    assert serialize_one(value, "s", None) is value


def test_serialize_one_other_values_use_pytree() -> None:
    a, b, c = t(), t(), t()
    value = {"p": Point(a, b), "l": [c, None, 3]}
    flat = serialize_one(value, "v", None)
    expected, _ = torch.utils._pytree.tree_flatten(value)
    assert len(flat) == len(expected) == 5
    assert all(x is y for x, y in zip(flat, expected))


def test_serialize_one_dynamic_cache_interleaved() -> None:
    cache = _cache(3)
    flat = serialize_one(cache, "cache", None)
    assert len(flat) == 6
    for i, layer in enumerate(cache.layers):
        assert flat[2 * i] is layer.keys
        assert flat[2 * i + 1] is layer.values


# serialize_args (the original's tests) --------------------------------------------------------


def test_serialize_args_empty_kwargs_and_args_names() -> None:
    x = t(5, 6)
    args, kwargs = serialize_args((x,), {}, schema=None, args_names=["x", "flash_args"])
    assert kwargs == {}
    assert type(args) is tuple and len(args) == 1 and args[0] is x


def test_serialize_args_keeps_a_bare_tensor_as_the_original_did() -> None:
    # the original module's own tests assert serialize_args(x, None, schema=...) is x
    x = t(3, 2)
    assert serialize_args(x, None, schema="f(Tensor x) -> Tensor") is x
    assert serialize_args(x, None, schema=None) is x
    same, kwargs = serialize_args(x, {}, schema=None)
    assert same is x and kwargs == {}
    flat, kwargs = serialize_args(x, {"y": x}, schema=None, args_names=["x", "y"])
    assert len(flat) == 2 and flat[0] is x and flat[1] is x and kwargs == {}
    args, kwargs = serialize_args((x,), {}, schema=None)
    assert kwargs == {} and type(args) is tuple and len(args) == 1 and args[0] is x


def test_serialize_args_two_tensors_with_schema() -> None:
    x, y = t(), t()
    args, kwargs = serialize_args((x, y), {}, schema="(Tensor x, Tensor y) -> Tensor")
    assert kwargs == {}
    assert len(args) == 2 and args[0] is x and args[1] is y


def test_serialize_args_keyword_tensor_with_args_names() -> None:
    x, y = t(), t()
    args, kwargs = serialize_args((x,), {"y": y}, schema=None, args_names=["x", "y"])
    assert kwargs == {}
    assert len(args) == 2 and args[0] is x and args[1] is y


def test_serialize_args_no_kwargs_returns_flat_tuple() -> None:
    x, y = t(), t()
    out = serialize_args((x, y), None, schema=None)
    assert type(out) is tuple and len(out) == 2 and out[0] is x and out[1] is y




def test_serialize_args_fills_missing_parameters_with_none() -> None:
    x, z = t(), t()
    args, kwargs = serialize_args((x,), {"z": z}, schema=None, args_names=["x", "y", "z", "w"])
    assert kwargs == {}
    assert len(args) == 4
    assert args[0] is x and args[1] is None and args[2] is z and args[3] is None


def test_serialize_args_names_from_schema() -> None:
    x, z = t(), t()
    args, _ = serialize_args((x,), {"z": z}, schema="(Tensor x, Tensor? y, Tensor z) -> Tensor")
    assert len(args) == 3 and args[0] is x and args[1] is None and args[2] is z


def test_serialize_args_appends_remaining_kwargs_in_order() -> None:
    x, e1, e2 = t(), t(), t()
    args, _ = serialize_args((x,), {"e2": e2, "e1": [e1, e1]}, schema=None, args_names=["x"])
    assert len(args) == 4
    assert args[0] is x and args[1] is e2 and args[2] is e1 and args[3] is e1


def test_serialize_args_nested_positional_arguments_flatten_per_argument() -> None:
    a, b, c = t(), t(), t()
    d = {"b": b, "a": a}
    flat = serialize_args((c, d, [a, b], 3), None, schema=None)
    assert len(flat) == 6
    assert [x is y for x, y in zip(flat, (c, b, a, a, b))] == [True] * 5 and flat[5] == 3


def test_serialize_args_positional_count_is_arguments_not_tensors() -> None:
    """The original skipped len(flat) names instead of len(args): a list argument shifted the names."""
    a, b, y = t(), t(), t()
    args, _ = serialize_args(([a, b],), {"y": y}, schema=None, args_names=["xs", "y"])
    assert len(args) == 3 and args[2] is y


def test_nested_structure_six_tensors_round_trip_through_treespec_name() -> None:
    nested = [t(4, 5), [t(7, 5), t(8, 5)], {"a": t(14, 5), "b": t(12, 5), "cl": [t(11, 5)]}]
    flat = serialize_one(nested, "nested", None)
    assert len(flat) == 6
    name = type_as_str_with_info(nested)
    assert name[:3] == "___"
    (back,) = deserialize_args(list(flat), [name])
    assert assert_same(nested, back, same_objects=True) == 6


# fixed bugs of the original ---------------------------------------------------------------------


def test_remaining_kwargs_none_is_appended_once() -> None:
    x = t()
    args, _ = serialize_args((x,), {"extra": None}, schema=None, args_names=["x"])
    assert len(args) == 2 and args[0] is x and args[1] is None


def test_remaining_kwargs_errors_name_their_own_argument() -> None:
    from transformers.cache_utils import DynamicCache

    class MyCache(DynamicCache):
        pass

    x = t()
    bad = {"inner": MyCache()}  # an unsupported cache is refused, naming the argument
    with pytest.raises(TypeError, match="argument 'extra'.*MyCache is not supported"):
        serialize_args((x,), {"y": x, "extra": bad}, schema=None, args_names=["x", "y"])


@pytest.mark.parametrize(
    "keys",
    [["a__b", "c"], ["_a", "b"], ["a_", "b"], ["__x__"], ["", "a"], [1, 2], [("a", 1)], [None], ["a b"]],
    ids=repr,
)
def test_dict_keys_the_original_got_wrong_use_a_treespec_name(keys: list[Any]) -> None:
    value = {k: t() for k in keys}
    text = type_as_str_with_info(value)
    assert text[:3] == "___"
    flat = serialize_one(value, "d", None)
    (back,) = deserialize_args(list(flat), [text])
    assert list(back) == keys  # insertion order kept
    assert assert_same(value, back, same_objects=True) == len(keys)


def test_mixed_unsortable_keys_do_not_crash() -> None:
    value = {1: t(), "a": t(), None: t()}
    (back,) = deserialize_args(list(serialize_one(value, "d", None)), [type_as_str_with_info(value)])
    assert list(back) == [1, "a", None]


def test_dict_subclasses_keep_their_type() -> None:
    value = collections.OrderedDict([("b", t()), ("a", t())])
    text = type_as_str_with_info(value)
    assert text[:3] == "___"
    (back,) = deserialize_args(list(serialize_one(value, "d", None)), [text])
    assert type(back) is collections.OrderedDict and list(back) == ["b", "a"]


def test_tuple_of_tensors_comes_back_as_tuple() -> None:
    value = (t(), t())
    (back,) = deserialize_args(list(serialize_one(value, "x", None)), [type_as_str_with_info(value)])
    assert type(back) is tuple and back[0] is value[0] and back[1] is value[1]


def test_positional_dict_order_matches_its_type_string() -> None:
    """The original flattened non-tensor args with pytree (insertion order) but wrote sorted keys."""
    x, first, second = t(), t(), t()
    d = {"zz": first, "aa": second}
    flat = serialize_args((x, d), None, schema=None)
    back = deserialize_args(list(flat), [type_as_str_with_info(x), type_as_str_with_info(d)])
    assert back[1]["zz"] is first and back[1]["aa"] is second


def test_user_errors_survive_python_O() -> None:
    code = (
        "import torch\n"
        "from piece_by_piece_serialize.serialize import deserialize_args\n"
        "try:\n"
        "    deserialize_args([torch.ones(1)], ['Tensor', 'Tensor'])\n"
        "except ValueError as e:\n"
        "    print('ValueError', e)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("ValueError expected_types[1]='Tensor' needs res[1]"), out.stdout + out.stderr


# type_as_str_with_info --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (torch.ones(2), "Tensor"),
        (None, "None"),
        (True, "bool"),
        (3, "int"),
        (2.5, "float"),
        ([torch.ones(1)] * 3, "list__3"),
        ([], "list__0"),
        ({"input_ids": torch.ones(1), "attention_mask": torch.ones(1)}, "dict__2_input_ids__attention_mask"),
        ({"da": torch.ones(1), "dm": torch.ones(1)}, "dict__2_da__dm"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_type_as_str_with_info_compact_forms(value: Any, expected: str) -> None:
    assert type_as_str_with_info(value) == expected


def test_type_as_str_with_info_caches() -> None:
    assert type_as_str_with_info(_cache(2)) == "DynamicCache_2D"
    assert type_as_str_with_info(_cache(0)) == "DynamicCache_0"
    # the sliding layers carry their cumulative_length as an item: S, not the legacy W
    assert type_as_str_with_info(_hybrid_cache()) == "DynamicCache_D_S4_D_d"
    encdec = _encdec()
    assert type_as_str_with_info(encdec) == "EncoderDecoderCache_2D__S3"


# deserialize_args -------------------------------------------------------------------------------


def test_deserialize_single_tensor_returns_itself() -> None:
    x = t()
    assert deserialize_args(x, ["Tensor"]) is x
    assert deserialize_args(x, ["Tensor"], return_n_args=True) == (x, 1)


def test_deserialize_single_tensor_with_other_types_is_an_error() -> None:
    with pytest.raises(ValueError, match="res is a single tensor"):
        deserialize_args(t(), ["list__2"])


def test_deserialize_return_n_args_allows_more_items() -> None:
    x, y, z = t(), t(), t()
    des, n = deserialize_args([x, y, z], ["Tensor", "list__1"], return_n_args=True)
    assert n == 2 and des[0] is x and des[1] == [y]


def test_deserialize_packed_groups() -> None:
    """An operator returning Tensor[] gives a group as one list; the original accepted it too."""
    a, b, c = t(), t(), t()
    des = deserialize_args([a, [b, c], [b, c], [a, b, c, a]], ["Tensor", "list__2", "dict__2_k__v", "DynamicCache__4"])
    assert des[0] is a and des[1][0] is b and des[2] == {"k": b, "v": c}
    assert des[3].layers[1].keys is c and des[3].layers[1].values is a


def test_deserialize_none_and_scalars() -> None:
    des = deserialize_args([None, 3, 2.5, True], ["None", "int", "float", "bool"])
    assert des == (None, 3, 2.5, True)
    assert deserialize_args([None], [None]) == (None,)


def test_deserialize_trailing_empty_list_is_an_empty_kwargs() -> None:
    x = t()
    assert deserialize_args([x, []], ["Tensor"])[0] is x


def test_deserialize_clone() -> None:
    x, y = t(), t()
    cache = _hybrid_cache()
    flat = [x, [y], *serialize_one(cache, "c", None)]
    des = deserialize_args(flat, ["Tensor", "list__1", type_as_str_with_info(cache)], clone=True)
    assert des[0] is not x and torch.equal(des[0], x)
    assert des[1][0] is not y and torch.equal(des[1][0], y)
    assert des[2].layers[0].keys is not cache.layers[0].keys
    assert assert_same(cache, des[2]) == 6


@pytest.mark.parametrize(
    ("res", "types", "error", "match"),
    [
        ([t()], ["Tensor", "Tensor"], ValueError, r"expected_types\[1\]='Tensor' needs res\[1\]"),
        ([t(), t()], ["Tensor"], ValueError, "describe 1 items but res has 2"),
        ([3], ["Tensor"], TypeError, r"expected_types\[0\]='Tensor' but res\[0\] is a int"),
        ([t()], ["None"], TypeError, r"expected_types\[0\]='None' but res\[0\] is a Tensor"),
        ([t()], ["int"], TypeError, r"expected_types\[0\]='int' expects a Python int but res\[0\] is a Tensor"),
        ([t()], ["list__2"], ValueError, r"needs 2 items from res\[0\] but res has only 1"),
        ([[t()]], ["list__2"], ValueError, r"needs 2 items but res\[0\] is a list of 1"),
        ([t(), 3], ["list__2"], TypeError, "expects tensors only, got a int"),
        ([t()], [3], TypeError, r"expected_types\[0\] must be a type-info string, got int"),
        ({"a": 1}, ["Tensor"], TypeError, "res must be a list or tuple, got dict"),
        ([t()], "Tensor", TypeError, "expected_types must be a list of str, got str"),
    ],
)
def test_deserialize_bad_input(res: Any, types: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        deserialize_args(res, types)


def test_deserialize_bad_type_string_is_treespec_name_error() -> None:
    from piece_by_piece_serialize.errors import TreeSpecNameError

    with pytest.raises(TreeSpecNameError, match="expected"):
        deserialize_args([t()], ["Tensr"])


def test_legacy_dynamic_cache_string_rebuilds_a_cache() -> None:
    ks = [t(1, 2, 3, 4) for _ in range(4)]
    (cache,) = deserialize_args(ks, ["DynamicCache__4"])
    assert type(cache).__name__ == "DynamicCache" and len(cache.layers) == 2
    assert cache.layers[0].keys is ks[0] and cache.layers[0].values is ks[1]
    assert cache.layers[1].keys is ks[2] and cache.layers[1].values is ks[3]


# deserialize_args_kwargs over real function signatures ------------------------------------------


def _f_positional(a: Any, b: Any) -> Any:
    return a, b


def _f_keyword(a: Any, *, k: Any) -> Any:
    return a, k


def _f_defaults(a: Any, b: Any = None, c: int = 3, d: Any = None) -> Any:
    return a, b, c, d


def _f_var_kwargs(a: Any, b: Any = None, **kwargs: Any) -> Any:
    return a, b, kwargs


def _round_trip(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], fill_kwargs: bool = False) -> Any:
    names = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)
    ]
    flat, empty = serialize_args(args, kwargs, schema=None, args_names=names)
    assert empty == {}
    flat = list(flat) + ([[]] if fill_kwargs else [])
    types = ([type_as_str_with_info(a) for a in args], {k: type_as_str_with_info(v) for k, v in kwargs.items()})
    new_args, new_kwargs = deserialize_args_kwargs(flat, {}, types, ordered_names=names, fill_kwargs=fill_kwargs)
    assert_same(args, new_args, same_objects=True)
    assert_same(kwargs, new_kwargs, same_objects=True)
    assert list(new_kwargs) == list(kwargs)
    # the rebuilt call is the same call
    assert_same(fn(*args, **kwargs), fn(*new_args, **new_kwargs), same_objects=True)
    return flat


def test_deserialize_args_kwargs_positional_only() -> None:
    flat = _round_trip(_f_positional, (t(), [t(), t()]), {})
    assert len(flat) == 3


def test_deserialize_args_kwargs_keyword_only() -> None:
    flat = _round_trip(_f_keyword, (t(),), {"k": {"x": t(), "y": t()}})
    assert len(flat) == 3


def test_deserialize_args_kwargs_defaults_are_left_out() -> None:
    flat = _round_trip(_f_defaults, (t(),), {"c": 5})
    assert flat[1] is None and flat[2] == 5 and flat[3] is None and len(flat) == 4


def test_deserialize_args_kwargs_explicit_none_is_kept() -> None:
    _round_trip(_f_defaults, (t(),), {"b": None, "d": t()})


def test_deserialize_args_kwargs_var_kwargs() -> None:
    flat = _round_trip(_f_var_kwargs, (t(),), {"extra": t(), "more": [t(), t()], "b": t(), "n": 2})
    assert len(flat) == 6  # a, b, extra, more (2 tensors), n


def test_deserialize_args_kwargs_fill_kwargs() -> None:
    flat = _round_trip(_f_var_kwargs, (t(), t()), {}, fill_kwargs=True)
    assert flat[-1] == []
    _round_trip(_f_var_kwargs, (t(),), {"b": t()}, fill_kwargs=True)


def test_deserialize_args_kwargs_nested_and_cache_kwargs() -> None:
    _round_trip(_f_var_kwargs, (Point(t(), t()),), {"cache": _hybrid_cache(), "pt": {"a": [t()], "b": (t(),)}})


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (dict(kwargs={"x": 1}), ValueError, "kwargs must be empty"),
        (dict(expected_types=(["Tensor"],)), TypeError, "must be a pair"),
        (dict(expected_types=["Tensor", {}]), TypeError, "must be a pair"),
        (dict(expected_types=(["Tensor"], {"y": "Tensor"})), ValueError, "need ordered_names"),
        (dict(expected_types=(["Tensor"], ["Tensor"])), TypeError, r"expected_types\[1\] must map"),
        (dict(fill_kwargs=True), ValueError, "does not end with an empty list"),
        (
            dict(expected_types=(["Tensor"], {"x": "Tensor"}), ordered_names=["x", "y"]),
            TypeError,
            "argument 'x' is given both positionally and by keyword",
        ),
        (
            dict(expected_types=(["Tensor"], {"z": "Tensor"}), ordered_names=["x", "y", "z"]),
            ValueError,
            r"parameter 'y' was not passed, args\[1\] should be its None placeholder, got a Tensor",
        ),
    ],
)
def test_deserialize_args_kwargs_bad_input(call: dict[str, Any], error: type, match: str) -> None:
    params: dict[str, Any] = dict(args=[t(), t()], kwargs={}, expected_types=(["Tensor", "Tensor"], {}))
    params.update(call)
    with pytest.raises(error, match=match):
        deserialize_args_kwargs(**params)


def test_serialize_args_bad_input() -> None:
    x = t()
    with pytest.raises(ValueError, match=r"keyword arguments \['y'\] need the parameter order"):
        serialize_args((x,), {"y": x}, schema=None)
    with pytest.raises(TypeError, match="argument 'x' is given both positionally and by keyword"):
        serialize_args((x,), {"x": x}, schema=None, args_names=["x"])
    with pytest.raises(TypeError, match="kwargs must be a dict or None"):
        serialize_args((x,), [("y", x)], schema=None, args_names=["x", "y"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="args_names must be a list of str"):
        serialize_args((x,), {"y": x}, schema=None, args_names="xy")  # type: ignore[arg-type]


# make_copy --------------------------------------------------------------------------------------


def _factory() -> list[Any]:
    return []


@pytest.mark.parametrize(
    "value",
    [
        t(),
        (t(), [t()]),
        {"a": t(), "b": {"c": t()}},
        collections.OrderedDict([("z", t()), ("a", t())]),
        collections.defaultdict(_factory, {"a": t()}),
        collections.deque([t(), t()], maxlen=4),
        Point(t(), t()),
        torch.return_types.max((t(), t())),
        torch.Size([2, 3]),
        [None, 1, 2.5, "s", True],
    ],
    ids=lambda v: type(v).__name__,
)
def test_make_copy_keeps_types_and_clones_tensors(value: Any) -> None:
    copied = make_copy(value)
    n = assert_same(value, copied)
    leaves, _ = torch.utils._pytree.tree_flatten(value)
    copied_leaves, _ = torch.utils._pytree.tree_flatten(copied)
    tensors = [(a, b) for a, b in zip(leaves, copied_leaves) if isinstance(a, torch.Tensor)]
    assert len(tensors) == n
    assert all(a is not b for a, b in tensors)


def test_make_copy_caches_layer_by_layer() -> None:
    for cache in (_hybrid_cache(), _encdec()):
        copied = make_copy(cache)
        assert type(copied) is type(cache)
        assert assert_same(cache, copied) > 0
        old = [ly.keys for ly in _layers(cache) if ly.is_initialized]
        new = [ly.keys for ly in _layers(copied) if ly.is_initialized]
        assert all(a is not b for a, b in zip(old, new))
    hybrid = _hybrid_cache()
    assert make_copy(hybrid).layers[1].cumulative_length == hybrid.layers[1].cumulative_length


def test_make_copy_of_a_cache_of_a_structure_copied_before_keeps_its_own_state() -> None:
    # Note [copies of a known structure]: the second copy matches the first's description; a cache whose state
    # differs (a sliding layer's count, a layer emptied) must not, and is copied as it is
    hybrid = _hybrid_cache()
    first = make_copy(hybrid)
    hybrid.layers[1].cumulative_length += 3
    second = make_copy(hybrid)
    assert first.layers[1].cumulative_length + 3 == second.layers[1].cumulative_length == hybrid.layers[1].cumulative_length
    assert assert_same(hybrid, second) > 0
    from transformers import DynamicCache

    cache = DynamicCache()
    for i in range(3):
        cache.update(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), i)
    copies = [make_copy(cache) for _ in range(2)]  # the second through the kept description
    cache.layers[2].keys = cache.layers[2].keys[:, :, :1]
    cache.layers[2].values = cache.layers[2].values[:, :, :1]
    copies.append(make_copy(cache))
    assert [c.layers[2].keys.shape[2] for c in copies] == [4, 4, 1]
    for copied in copies[1:]:
        assert type(copied) is DynamicCache and all(a is not b for a, b in zip(copied.layers, cache.layers))
    assert assert_same(cache, copies[2]) == 6
    cache.layers[1].is_initialized, cache.layers[1].keys, cache.layers[1].values = False, None, None  # emptied
    emptied = make_copy(cache)
    assert emptied.layers[1].is_initialized is False and emptied.layers[1].keys is None


def test_make_copy_numpy() -> None:
    np = pytest.importorskip("numpy")
    arr = np.arange(3)
    copied = make_copy(arr)
    assert copied is not arr and (copied == arr).all()


class _NoCopy:
    def __deepcopy__(self, memo: Any) -> Any:
        raise RuntimeError("refuses")


def test_make_copy_error_names_the_type() -> None:
    with pytest.raises(TypeError, match=r"cannot copy a .*_NoCopy: copy.deepcopy failed with RuntimeError: refuses"):
        make_copy([_NoCopy()])


# choose_kwargs_for_dynamic_shapes ---------------------------------------------------------------


def test_choose_kwargs_for_dynamic_shapes_merges_by_name() -> None:
    ds_kwargs = {"mask": {0: "batch"}}
    out = choose_kwargs_for_dynamic_shapes(({0: "batch", 1: "seq"},), ds_kwargs, ["input_ids", "mask"])
    assert out == {"input_ids": {0: "batch", 1: "seq"}, "mask": {0: "batch"}}
    assert list(out) == ["input_ids", "mask"]
    assert ds_kwargs == {"mask": {0: "batch"}}  # not modified


def test_choose_kwargs_for_dynamic_shapes_errors() -> None:
    with pytest.raises(ValueError, match=r"2 positional dynamic shapes but only 1 forward parameter names"):
        choose_kwargs_for_dynamic_shapes(({}, {}), {"y": {}}, ["x"])
    with pytest.raises(TypeError, match="argument 'x' has dynamic shapes both"):
        choose_kwargs_for_dynamic_shapes(({},), {"x": {}}, ["x"])
    with pytest.raises(TypeError, match="ds_kwargs must be a dict"):
        choose_kwargs_for_dynamic_shapes(({},), [], ["x"])  # type: ignore[arg-type]


# caches -----------------------------------------------------------------------------------------


def _layers(cache: Any) -> list[Any]:
    if hasattr(cache, "self_attention_cache"):
        return list(cache.self_attention_cache.layers) + list(cache.cross_attention_cache.layers)
    return list(cache.layers)


def _cache(n_layers: int) -> Any:
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    for i in range(n_layers):
        cache.update(t(1, 2, 3, 4), t(1, 2, 3, 4), i)
    return cache


def _hybrid_cache() -> Any:
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    cache = DynamicCache()
    cache.layers = [DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=4), DynamicLayer(), DynamicLayer()]
    for i in range(3):
        cache.update(t(1, 2, 6, 4), t(1, 2, 6, 4), i)
    return cache


def _encdec() -> Any:
    from transformers.cache_utils import DynamicCache, DynamicSlidingWindowLayer, EncoderDecoderCache

    cross = DynamicCache()
    cross.layers = [DynamicSlidingWindowLayer(sliding_window=3)]
    cross.update(t(1, 2, 2, 4), t(1, 2, 2, 4), 0)
    return EncoderDecoderCache(_cache(2), cross)


@pytest.mark.parametrize("make", [_cache, _hybrid_cache, _encdec], ids=["dynamic", "hybrid", "encoder_decoder"])
def test_cache_round_trip_same_layers_same_tensors(make: Any) -> None:
    cache = make(2) if make is _cache else make()
    text = type_as_str_with_info(cache)
    (back,) = deserialize_args(list(serialize_one(cache, "cache", None)), [text])
    assert type(back) is type(cache)
    flat = serialize_one(cache, "cache", None)
    # the key and value tensors (a sliding layer's count travels as an empty count tensor, compared as its int)
    kv = [x for x in flat if not (x.dim() == 2 and x.shape[1] == 0)]
    assert assert_same(cache, back, same_objects=True) == len(kv)


def test_rebuilt_cache_keeps_working() -> None:
    cache = _hybrid_cache()
    (back,) = deserialize_args(list(serialize_one(cache, "c", None)), [type_as_str_with_info(cache)])
    k = t(1, 2, 1, 4)
    ref = make_copy(cache)
    for c in (ref, back):
        c.update(k, k, 0)
        c.update(k, k, 1)
    assert assert_same(ref, back) == 6
    assert back.layers[1].keys.shape[-2] == 3  # the sliding window (4) keeps window - 1 states


class _UnknownLayer:  # a layer class nobody registered (a subclass of a supported one would do as well)
    pass


def test_unsupported_cache_layer_is_refused_by_name() -> None:
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    cache.layers = [_UnknownLayer()]
    with pytest.raises(TypeError, match="layer 0 is a .*_UnknownLayer, which is not supported.*register_cache_layer_class"):
        type_as_str_with_info(cache)
    with pytest.raises(TypeError, match="argument 'past'.*layer 0 is a .*_UnknownLayer"):
        serialize_one(cache, "past", None)


def test_unsupported_cache_class_is_refused_by_name() -> None:
    from transformers.cache_utils import DynamicCache

    class MyCache(DynamicCache):
        pass

    with pytest.raises(TypeError, match="MyCache is not supported"):
        type_as_str_with_info(MyCache())


def test_caches_nested_in_pytrees() -> None:
    """pytree leaves that are caches are replaced by their tensors; no pytree registration."""
    cache, encdec = _hybrid_cache(), _encdec()
    value = {"input_ids": t(), "past": [cache, t()], "enc": (None, encdec)}
    text = type_as_str_with_info(value)
    leaves = torch.utils._pytree.tree_flatten(value)[0]
    assert [i for i, leaf in enumerate(leaves) if leaf is cache or leaf is encdec] == [1, 4]
    assert text[:42] == "WithCaches__1_DynamicCache_D_S4_D_d__4_Enc"
    flat = serialize_one(value, "v", None)
    assert len(flat) == 1 + 7 + 1 + 1 + 7  # each sliding layer adds its cumulative_length
    (back,) = deserialize_args(list(flat), [text])
    assert assert_same(value, back, same_objects=True) == 14
    (cloned,) = deserialize_args(list(flat), [text], clone=True)
    assert assert_same(value, cloned) == 14
    assert cloned["past"][0].layers[0].keys is not cache.layers[0].keys


def test_model_output_with_a_cache() -> None:
    from transformers.modeling_outputs import CausalLMOutputWithPast

    out = CausalLMOutputWithPast(logits=t(1, 3, 5), cache=_cache(2))
    text = type_as_str_with_info(out)
    assert text[:31] == "WithCaches__1_DynamicCache_2D__"
    (back,) = deserialize_args(list(serialize_one(out, "out", None)), [text])
    assert type(back) is CausalLMOutputWithPast
    assert back.logits is out.logits
    assert assert_same(out.cache, back.cache, same_objects=True) == 4


def test_unsupported_nested_cache_is_refused_by_name() -> None:
    from transformers.cache_utils import DynamicCache

    cache = DynamicCache()
    cache.layers = [_UnknownLayer()]
    with pytest.raises(TypeError, match="pytree leaf 1.*layer 0 is a .*_UnknownLayer"):
        type_as_str_with_info([t(), cache])
    with pytest.raises(TypeError, match="argument 'v', pytree leaf 1.*_UnknownLayer"):
        serialize_one([t(), cache], "v", None)


def test_transformers_is_not_imported_for_plain_values() -> None:
    code = (
        "import sys, torch\n"
        "from piece_by_piece_serialize.serialize import serialize_args, type_as_str_with_info, deserialize_args\n"
        "x = torch.ones(2)\n"
        "v = [x, {'a': x}, (x, None), 3]\n"
        "flat = serialize_args(tuple(v), None, schema=None)\n"
        "types = [type_as_str_with_info(a) for a in v]\n"
        "deserialize_args(list(flat), types)\n"
        "print('transformers' in sys.modules, 'lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "False", out.stdout + out.stderr


# hostile input ----------------------------------------------------------------------------------


class _Evil:
    def __reduce__(self) -> Any:
        return (print, ("PWNED by a legacy name",))


def test_legacy_pickle_name_is_refused_without_running_code(capfd: Any) -> None:
    """The original decoded ``___`` names with pickle.load: a crafted name ran code."""
    import base64
    import pickle
    import zlib

    from piece_by_piece_serialize.errors import TreeSpecNameError

    name = "___" + base64.b32encode(zlib.compress(pickle.dumps((1, _Evil())))).decode().replace("=", "_")
    with pytest.raises(TreeSpecNameError):
        deserialize_args([t()], [name])
    with pytest.raises(TreeSpecNameError):
        deserialize_args_kwargs([t()], {}, ([name], {}))
    assert "PWNED" not in capfd.readouterr().out


@pytest.mark.parametrize("text", ["list__99999999999999", "DynamicCache_4096d", "dict__1_" + "k" * 100_000])
def test_huge_counts_fail_fast_or_stay_small(text: str) -> None:
    from piece_by_piece_serialize.type_info import parse_type_info

    info = parse_type_info(text)
    if info.n_items:
        with pytest.raises(ValueError, match="needs"):
            deserialize_args([], [text])
    else:  # 4096 empty layers: allowed, and bounded by MAX_CACHE_LAYERS
        (cache,) = deserialize_args([], [text])
        assert len(cache.layers) == 4096


def test_treespec_type_info_carries_the_decoded_spec() -> None:
    from piece_by_piece_serialize.type_info import TreeSpecInfo, parse_type_info

    value = {"x": [t(), t()], "y": (t(), None)}
    text = type_as_str_with_info(value)
    info = parse_type_info(text)
    assert isinstance(info, TreeSpecInfo) and str(info) == text
    assert info.n_items == 4
    assert info.spec == torch.utils._pytree.tree_flatten(value)[1]
