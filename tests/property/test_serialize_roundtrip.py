"""The round-trip contract of the serialization API, as a property.

For hypothesis-generated arguments (nested structures of tensors of several dtypes and shapes, ``None``,
scalars, every container kind, namedtuples; transformers caches with full, sliding-window and empty
layers, at the top level and nested inside containers), ``deserialize_args(serialize_args(args, None, ...), [type_as_str_with_info(a) for a in args])``
rebuilds every argument: same types, tensor values, dtypes and shapes, and with ``clone=False`` the very
same tensor objects. With ``clone=True`` the values are equal and no tensor object is shared.
"""

from __future__ import annotations

import collections
from typing import Any, NamedTuple

import pytest
import torch
from _pbp_compare import assert_same
from hypothesis import event, given, note
from hypothesis import strategies as st

from piece_by_piece_serialize.serialize import deserialize_args, serialize_args, type_as_str_with_info
from piece_by_piece_serialize.type_info import parse_type_info

transformers = pytest.importorskip("transformers")
from transformers.cache_utils import (  # noqa: E402
    DynamicCache,
    DynamicLayer,
    DynamicSlidingWindowLayer,
    EncoderDecoderCache,
)


class Point(NamedTuple):
    x: Any
    y: Any


class Triple(NamedTuple):
    a: Any
    b: Any
    c: Any


DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool]
SHAPES = [(), (1,), (3,), (2, 3), (0, 4), (1, 2, 1)]


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from(SHAPES))
    start = draw(st.integers(-5, 5))
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(start, start + n).reshape(shape) % 3).to(dtype)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True, width=64))
plain_keys = st.from_regex(r"[A-Za-z0-9]{1,6}(_[A-Za-z0-9]{1,4}){0,2}", fullmatch=True)
odd_keys = st.one_of(
    st.sampled_from(["a__b", "_x", "y_", "__init__", "", "a b", "é"]),
    st.integers(-3, 3),
    st.none(),
    st.tuples(st.integers(0, 2), st.sampled_from(["k", "v"])),
)
keys = st.one_of(plain_keys, plain_keys, odd_keys)
leaves = st.one_of(tensors(), tensors(), tensors(), scalars)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    small = st.lists(children, max_size=4)
    return st.one_of(
        small,
        small.map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(plain_keys, tensors(), min_size=1, max_size=4),  # the compact dict__ form
        st.lists(tensors(), max_size=4),  # the compact list__ form
        st.dictionaries(keys, children, max_size=3).map(lambda d: collections.OrderedDict(d)),
        st.dictionaries(plain_keys, children, max_size=3).map(lambda d: collections.defaultdict(list, d)),
        st.tuples(small, st.one_of(st.none(), st.integers(0, 5))).map(
            lambda p: collections.deque(p[0], maxlen=max(p[1], len(p[0])) if p[1] is not None else None)
        ),
        st.builds(Point, children, children),
        st.builds(Triple, children, children, children),
        st.tuples(children, children).map(torch.return_types.max),  # a structseq
    )


nested = st.recursive(leaves, _containers, max_leaves=12)


@st.composite
def dynamic_caches(draw: st.DrawFn) -> Any:
    kinds = draw(st.lists(st.tuples(st.sampled_from([None, 2, 4, 64]), st.booleans()), max_size=4))
    cache = DynamicCache()
    cache.layers = [DynamicLayer() if w is None else DynamicSlidingWindowLayer(sliding_window=w) for w, _ in kinds]
    dtype = draw(st.sampled_from([torch.float32, torch.float16]))
    for i, (_, populated) in enumerate(kinds):
        if populated:
            seq = draw(st.integers(1, 5))
            cache.update(torch.randn(1, 2, seq, 3).to(dtype), torch.randn(1, 2, seq, 3).to(dtype), i)
    return cache


caches = st.one_of(
    dynamic_caches(),
    st.builds(EncoderDecoderCache, dynamic_caches(), dynamic_caches()),
)
# caches also appear as pytree leaves (inside lists, dicts, namedtuples, ...): WithCaches strings
nested_with_caches = st.recursive(st.one_of(leaves, caches), _containers, max_leaves=8)
arguments = st.lists(
    st.one_of(leaves, nested, nested, caches, nested_with_caches, nested_with_caches), min_size=1, max_size=3
).map(tuple)


def _tensor_ids(value: Any, out: set[int]) -> None:  # noqa: C901 - one branch per container kind
    if isinstance(value, torch.Tensor):
        out.add(id(value))
    elif isinstance(value, (DynamicCache, EncoderDecoderCache)):
        for layer in list(getattr(value, "layers", [])) + (
            list(value.self_attention_cache.layers) + list(value.cross_attention_cache.layers)
            if isinstance(value, EncoderDecoderCache)
            else []
        ):
            if layer.is_initialized:
                out.update((id(layer.keys), id(layer.values)))
    elif isinstance(value, dict):
        for v in value.values():
            _tensor_ids(v, out)
    elif isinstance(value, (list, tuple, collections.deque)):
        for v in value:
            _tensor_ids(v, out)


@given(arguments)
def test_round_trip_same_objects(args: tuple[Any, ...]) -> None:
    types = [type_as_str_with_info(a) for a in args]
    note(f"types={types}")
    for text in types:  # shown by --hypothesis-show-statistics: which forms were exercised
        event(type(parse_type_info(text)).__name__)
    flat = serialize_args(args, None, schema=None)
    assert type(flat) is tuple
    assert len(flat) == sum(_n_items(t) for t in types)
    back = deserialize_args(list(flat), types)
    assert len(back) == len(args)
    for i, (a, b) in enumerate(zip(args, back)):
        assert_same(a, b, same_objects=True, path=f"args[{i}]")


@given(arguments)
def test_round_trip_clone(args: tuple[Any, ...]) -> None:
    types = [type_as_str_with_info(a) for a in args]
    back = deserialize_args(list(serialize_args(args, None, schema=None)), types, clone=True)
    for i, (a, b) in enumerate(zip(args, back)):
        assert_same(a, b, path=f"args[{i}]")
    before: set[int] = set()
    after: set[int] = set()
    _tensor_ids(args, before)
    _tensor_ids(back, after)
    assert not before & after


@given(arguments)
def test_type_strings_are_canonical_identifiers(args: tuple[Any, ...]) -> None:
    for a in args:
        text = type_as_str_with_info(a)
        assert text.isascii() and text.replace("_", "x").isalnum(), text
        assert str(parse_type_info(text)) == text


def _n_items(text: str) -> int:
    return parse_type_info(text).n_items
