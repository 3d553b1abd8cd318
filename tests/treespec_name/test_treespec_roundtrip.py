"""TreeSpec names round-trip every realistic corpus input against torch's own pytree (the oracle).

For each case: the name is an identifier in the alphabet, decoding gives a spec equal to ``tree_flatten``'s,
unflattening with it rebuilds the same object as unflattening with torch's spec (same types at every level),
and printing the decoded spec gives the same name. Nesting is tested as deep as ``tree_flatten`` itself allows.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, defaultdict, deque

import pytest
import torch.utils._pytree as pytree
from corpus_inputs import build_corpus, nest

from piece_by_piece_serialize import treespec_name
from piece_by_piece_serialize.treespec_name import (
    NameLimits,
    clear_name_cache,
    tree_spec_as_name,
    tree_spec_from_name,
)

CORPUS = build_corpus()


def decode_cold(name: str, limits: NameLimits | None = None) -> tuple[int, pytree.TreeSpec]:
    """Decode without the cache (tree_spec_as_name caches what it encodes, which would skip the decoder)."""
    return treespec_name._decode(name, limits or treespec_name.DEFAULT_LIMITS)
ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def same_tree(a: object, b: object) -> bool:
    """Iterative structural equality: same type at every node, same keys in the same order, equal leaves."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, (dict, OrderedDict, defaultdict)):
            if list(x.keys()) != list(y.keys()):
                return False
            if isinstance(x, defaultdict) and x.default_factory is not y.default_factory:
                return False
            stack.extend(zip(x.values(), y.values()))
        elif isinstance(x, (list, tuple, deque)):
            if len(x) != len(y) or (isinstance(x, deque) and x.maxlen != y.maxlen):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


def same_spec(a: pytree.TreeSpec, b: pytree.TreeSpec) -> bool:
    """TreeSpec equality without recursion (torch's ``__eq__`` recurses and fails near its own flatten limit)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if str(x.type) != str(y.type) or x.num_children != y.num_children or x.context != y.context:
            return False
        stack.extend(zip(x.children(), y.children()))
    return True


def check_round_trip(tree: object) -> str:
    leaves, spec = pytree.tree_flatten(tree)
    name = tree_spec_as_name(spec, len(leaves))
    assert name.isidentifier() and set(name) <= ALPHABET and name.startswith("___v1_")
    n, decoded = decode_cold(name)
    assert tree_spec_from_name(name) == (n, decoded)
    assert n == len(leaves)
    assert decoded == spec
    placeholders = list(range(n))
    assert same_tree(pytree.tree_unflatten(placeholders, decoded), pytree.tree_unflatten(placeholders, spec))
    assert tree_spec_as_name(decoded, n) == name
    return name


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_corpus_case_round_trips(case: str) -> None:
    check_round_trip(CORPUS[case])


def test_whole_corpus_round_trips_and_names_are_distinct() -> None:
    names = {}
    for case, tree in CORPUS.items():
        names[case] = check_round_trip(tree)
    assert len(names) == len(CORPUS) == 48
    # Different structures get different names (two cases with the same structure would share one).
    specs = {case: pytree.tree_flatten(tree)[1] for case, tree in CORPUS.items()}
    for a in CORPUS:
        for b in CORPUS:
            if a < b:
                assert (names[a] == names[b]) == (specs[a] == specs[b]), (a, b)


def test_unflatten_rebuilds_the_original_values() -> None:
    tree = CORPUS["detection_targets"]
    leaves, spec = pytree.tree_flatten(tree)
    _, decoded = decode_cold(tree_spec_as_name(spec, len(leaves)))
    rebuilt = pytree.tree_unflatten(leaves, decoded)
    assert [sorted(d) for d in rebuilt] == [sorted(d) for d in tree]
    assert all(rebuilt[i][k] is tree[i][k] for i in range(3) for k in tree[i])


def _deepest_flattenable() -> int:
    lo, hi = 1, 4 * sys.getrecursionlimit()
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            pytree.tree_flatten(nest(mid))
            lo = mid
        except RecursionError:
            hi = mid - 1
    return lo


def test_nesting_as_deep_as_tree_flatten_allows() -> None:
    depth = _deepest_flattenable()
    assert depth > 300  # about 490 levels under the default recursion limit of 1000
    leaves, spec = pytree.tree_flatten(nest(depth))
    name = tree_spec_as_name(spec, len(leaves))
    n, decoded = decode_cold(name)
    assert n == 1 and same_spec(decoded, spec)
    assert tree_spec_as_name(decoded, n) == name
    # Well past torch's own limit our side still works (explicit stacks): 5,000 levels within a raised limit.
    deep = "___v1_" + "L_" * 5000 + "X" + "_E" * 5000
    n, decoded = tree_spec_from_name(deep, limits=NameLimits(max_depth=5000))
    assert n == 1 and decoded.num_nodes == 5001
    assert tree_spec_as_name(decoded, 1, limits=NameLimits(max_depth=5000)) == deep


def test_decode_is_cached_and_bounded() -> None:
    clear_name_cache()
    name = "___v1_D_input_ids_X_attention_mask_X_E"
    first = tree_spec_from_name(name)
    assert tree_spec_from_name(name) is first
    clear_name_cache()
    again = tree_spec_from_name(name)
    assert again is not first and again == first
    # Encoding stores the name, so a same-process decode is a lookup that returns the encoded spec itself.
    clear_name_cache()
    _, spec = pytree.tree_flatten(CORPUS["detection_targets"])
    name = tree_spec_as_name(spec, 9)
    assert tree_spec_from_name(name) == (9, spec) and tree_spec_from_name(name)[1] is spec
    # ... and the cold path agrees with it.
    assert treespec_name._decode(name, treespec_name.DEFAULT_LIMITS) == (9, spec)
    for k in range(2, treespec_name.CACHE_SIZE + 500):
        tree_spec_as_name(pytree.TreeSpec(list, None, [pytree.treespec_leaf()] * k), k)
    assert len(treespec_name._CACHE) == treespec_name.CACHE_SIZE == 4096
    # Other limits are cached apart from the default ones.
    limits = NameLimits(max_depth=5)
    assert tree_spec_from_name("___v1_L_X3_E", limits=limits) == tree_spec_from_name("___v1_L_X3_E")
    assert ("___v1_L_X3_E", limits) in treespec_name._CACHE
    clear_name_cache()
    assert not treespec_name._CACHE


EDGE_KEYS = ["\ud800", "a\x00b", "Z", "aZ_b", "a_B", "E", "X", "N", "1abc", "a\n", "___", ".", "..", "a.", ".a", "a._b",
             "a_.b", "a__", "ÿ", "\uffff", "\U0010ffff", 1e16, -0.0, 5e-324, float("-inf"), 0.1, -(10**4299),
             10**4299, 0, ((),), ((((1,),),),)]


@pytest.mark.parametrize("key", EDGE_KEYS, ids=[repr(k)[:20] for k in EDGE_KEYS])
def test_edge_keys_round_trip(key: object) -> None:
    leaves, spec = pytree.tree_flatten({key: 1, "n": 2})
    name = tree_spec_as_name(spec, 2)
    assert set(name) <= ALPHABET
    n, decoded = decode_cold(name)
    assert n == 2 and decoded == spec and list(decoded.context) == [key, "n"]
    assert type(decoded.context[0]) is type(key)
