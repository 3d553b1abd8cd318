"""Fuzz harness: bytes -> a random pytree -> TreeSpec name -> decoded spec -> rebuilt tree.

Run: ``python fuzz/fuzz_pytree_roundtrip.py [libFuzzer flags] [corpus dirs]``.

The bytes are read as a sequence of structural choices (:class:`_fuzzlib.ByteReader`), so every input
is a valid pytree and libFuzzer's mutations change node kinds, keys and shapes. The tree uses every node
kind torch's pytree flattens (tuple, list, dict, OrderedDict, defaultdict with its factory, deque with its
maxlen, namedtuple and typing.NamedTuple, ``torch.return_types.*``, ``torch.Size``, torch.fx immutable
containers, a transformers ``ModelOutput`` subclass, and a node registered with ``serialized_type_name``
both with plain and with dumpable contexts) and every dict-key kind (identifiers, any Unicode string, the
empty string, dunder-like strings, ints of any size, ``None``, bools, floats, tuples of these, Enum members).

Properties, for ``spec = tree_structure(tree)`` with ``n`` leaves:

* ``name = tree_spec_as_name(spec, n)`` is an identifier of ``[A-Za-z0-9_]`` starting with ``___``;
* ``tree_spec_from_name(name) == (n, spec)``, and re-encoding the decoded spec gives ``name`` again;
* ``tree_unflatten(leaves, decoded)`` rebuilds what torch itself rebuilds from the original spec: same
  structure, same leaves, same top-level type, equal value;
* encoding a wrong leaf count raises ``ValueError``.

Only ``TreeSpecNameError`` may be raised by the library, and only where the property allows it: for the
trees built here (all encodable, within the default limits) no error is expected at all.
"""

from __future__ import annotations

import collections
import enum
import sys
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import ByteReader, Stats, fail, reporting, start  # noqa: E402

TARGET = "pytree_roundtrip"
STATS = Stats(TARGET)

# The byte budget bounds the tree: at most this many nodes, nested at most this deep (a separate
# "chain" choice reaches deeper, up to what torch's own recursive tree_flatten handles comfortably).
MAX_NODES = 64
MAX_DEPTH = 8
MAX_CHAIN = 120
MAX_CHILDREN = 6

_IDENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

# Findings reported and not yet fixed (fuzz/pending/pytree_roundtrip/<name>.md): the builder avoids
# the construct, so that the campaign keeps looking for new problems. Empty the set once fixed.
OPEN_FINDINGS: set[str] = set()


class Color(enum.Enum):
    """An Enum whose members serve as dict keys (resolved by the decoder from ``sys.modules``)."""

    RED = 1
    GREEN = "green"


Point = collections.namedtuple("Point", ["x", "y"])


class Span(typing.NamedTuple):
    start: object
    stop: object
    step: object


class Pair:
    """A user container registered with ``serialized_type_name`` and a plain-valued context."""

    def __init__(self, tag: str, left: object, right: object) -> None:
        self.tag, self.left, self.right = tag, left, right

    def __eq__(self, other: object) -> bool:
        return type(other) is Pair and (self.tag, self.left, self.right) == (other.tag, other.left, other.right)

    def __repr__(self) -> str:
        return f"Pair({self.tag!r}, {self.left!r}, {self.right!r})"


class Bag:
    """A user container registered with dumpable-context hooks (its context is a dict, dumped as JSON)."""

    def __init__(self, meta: dict, items: list) -> None:
        self.meta, self.items = meta, items

    def __eq__(self, other: object) -> bool:
        return type(other) is Bag and (self.meta, self.items) == (other.meta, other.items)

    def __repr__(self) -> str:
        return f"Bag({self.meta!r}, {self.items!r})"


def _register_user_nodes() -> None:
    import json

    import torch.utils._pytree as pytree

    module = Pair.__module__
    if Pair not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            Pair,
            lambda p: ([p.left, p.right], p.tag),
            lambda children, tag: Pair(tag, *children),
            serialized_type_name=f"{module}.Pair",
        )
    if Bag not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            Bag,
            lambda b: (list(b.items), b.meta),
            lambda children, meta: Bag(meta, list(children)),
            serialized_type_name=f"{module}.Bag",
            to_dumpable_context=lambda meta: json.dumps(meta, sort_keys=True),
            from_dumpable_context=json.loads,
        )


_TARGETS: dict[str, object] = {}


def _targets() -> dict[str, object]:
    """Import the library (lazily, so ``main`` can instrument it first) and torch's pytree."""
    if not _TARGETS:
        import torch
        import torch.utils._pytree as pytree
        from torch.fx.immutable_collections import immutable_dict, immutable_list
        from transformers.modeling_outputs import BaseModelOutput

        from piece_by_piece_serialize.errors import TreeSpecNameError
        from piece_by_piece_serialize.treespec_name import tree_spec_as_name, tree_spec_from_name

        _register_user_nodes()
        _TARGETS.update(
            torch=torch,
            pytree=pytree,
            immutable_dict=immutable_dict,
            immutable_list=immutable_list,
            BaseModelOutput=BaseModelOutput,
            TreeSpecNameError=TreeSpecNameError,
            tree_spec_as_name=tree_spec_as_name,
            tree_spec_from_name=tree_spec_from_name,
        )
    return _TARGETS


# --------------------------------------------------------------------------------------------------
# The tree builder: each node kind reads its own choices from the reader.


class _Builder:
    def __init__(self, reader: ByteReader, t: dict[str, object]) -> None:
        self.r = reader
        self.t = t
        self.nodes = 0
        self.next_leaf = 0
        self.kinds: set[str] = set()
        self.chained = False

    def leaf(self) -> object:
        self.next_leaf += 1
        kind = self.r.below(8)
        if kind == 0:
            return None  # None is a leaf in torch's pytree
        if kind == 1:
            return self.t["torch"].tensor([self.next_leaf])  # type: ignore[attr-defined]
        return self.next_leaf

    def key(self, depth: int = 0) -> object:
        r = self.r
        kind = r.below(12 if depth == 0 else 10)
        if kind <= 2:
            first = r.pick("abcdefghijklmnopqrstuvwxyz_")
            return first + r.text(12, _IDENT_CHARS)
        if kind == 3:
            return r.text(10)
        if kind == 4:
            return r.pick(["", "_", "__", "__x__", "a__b", "_a", "a_", "0", "1a", "___x", "input_ids"])
        if kind == 5:
            return r.signed()
        if kind == 6:
            return r.pick([None, True, False])
        if kind == 7:
            return r.pick([0.5, -1.25, 1e300, float("inf"), float("-inf"), -0.0, 3.0])
        if kind == 8:
            return r.pick([Color.RED, Color.GREEN])
        if kind == 9:
            return r.signed() if r.flag() else r.text(6, _IDENT_CHARS)
        return tuple(self.key(depth + 1) for _ in range(r.count(3)))

    def keys(self, n: int) -> list[object]:
        seen: dict[object, None] = {}
        for _ in range(n):
            seen.setdefault(self.key(), None)  # equal keys (1, True, 1.0) collapse as in any dict
        return list(seen)

    def children(self, depth: int, limit: int = MAX_CHILDREN) -> list[object]:
        return [self.node(depth + 1) for _ in range(self.r.count(limit))]

    def node(self, depth: int = 0) -> object:
        r = self.r
        if depth >= MAX_DEPTH or self.nodes >= MAX_NODES or r.remaining() == 0:
            return self.leaf()
        self.nodes += 1
        kind = r.below(20)
        t = self.t
        if kind <= 3:
            return self.leaf()
        if kind == 4:
            self.kinds.add("tuple")
            return tuple(self.children(depth))
        if kind == 5:
            self.kinds.add("list")
            return self.children(depth)
        if kind == 6:
            self.kinds.add("dict")
            return {k: self.node(depth + 1) for k in self.keys(r.count(MAX_CHILDREN))}
        if kind == 7:
            self.kinds.add("OrderedDict")
            return collections.OrderedDict((k, self.node(depth + 1)) for k in self.keys(r.count(MAX_CHILDREN)))
        if kind == 8:
            self.kinds.add("defaultdict")
            factories = [list, int, dict, str]
            if "defaultdict_none_factory" not in OPEN_FINDINGS:
                factories.append(None)
            factory = r.pick(factories)
            return collections.defaultdict(factory, {k: self.node(depth + 1) for k in self.keys(r.count(4))})
        if kind == 9:
            self.kinds.add("deque")
            items = self.children(depth)
            maxlen = r.pick([None, len(items), len(items) + 1, len(items) + 7])
            return collections.deque(items, maxlen=maxlen)
        if kind == 10:
            self.kinds.add("namedtuple")
            return Point(self.node(depth + 1), self.node(depth + 1))
        if kind == 11:
            self.kinds.add("NamedTuple")
            return Span(self.node(depth + 1), self.node(depth + 1), self.node(depth + 1))
        if kind == 12:
            self.kinds.add("return_types")
            torch = t["torch"]
            cls = r.pick([torch.return_types.max, torch.return_types.sort, torch.return_types.topk])  # type: ignore[attr-defined]
            return cls((self.node(depth + 1), self.node(depth + 1)))
        if kind == 13:
            self.kinds.add("Size")
            self.next_leaf += 1
            return t["torch"].Size([self.next_leaf + i for i in range(r.count(4))])  # type: ignore[attr-defined]
        if kind == 14:
            self.kinds.add("immutable_list")
            return t["immutable_list"](self.children(depth))  # type: ignore[operator]
        if kind == 15:
            self.kinds.add("immutable_dict")
            return t["immutable_dict"]({k: self.node(depth + 1) for k in self.keys(r.count(4))})  # type: ignore[operator]
        if kind == 16:
            self.kinds.add("ModelOutput")
            fields = {}
            if r.flag():
                # A leaf: ModelOutput reads a lone iterable first field as (key, value) pairs.
                fields["last_hidden_state"] = self.leaf()
            if r.flag():
                fields["hidden_states"] = tuple(self.children(depth, 3))
            if r.flag():
                fields["attentions"] = self.node(depth + 1)
            return t["BaseModelOutput"](**fields)  # type: ignore[operator]
        if kind == 17:
            self.kinds.add("Pair")
            return Pair(r.text(8), self.node(depth + 1), self.node(depth + 1))
        if kind == 18:
            self.kinds.add("Bag")
            meta = {r.text(5, _IDENT_CHARS): r.signed() for _ in range(r.count(3))}
            return Bag(meta, self.children(depth))
        # a chain of single-child containers, much deeper than the branching part of the tree; one per
        # tree, so that the total nesting stays well inside what torch's recursive tree_flatten handles
        # (about 500 levels at the default recursion limit: beyond that torch itself fails).
        if self.chained:
            return self.leaf()
        self.chained = True
        self.kinds.add("chain")
        length = 1 + r.below(MAX_CHAIN)
        wrap = r.pick([list, tuple, "dict"])
        value = self.node(depth + 1)
        for _ in range(length):
            value = {"k": value} if wrap == "dict" else wrap([value])  # type: ignore[operator]
        return value


def build_tree(data: bytes) -> object:
    """The pytree that ``data`` describes (deterministic; every byte string describes one)."""
    return _Builder(ByteReader(data), _targets()).node()


def _is_identifier_name(name: str) -> bool:
    allowed = set(_IDENT_CHARS)
    return name[:3] == "___" and len(name) > 3 and all(ch in allowed for ch in name)


def check(data: bytes) -> None:
    """The round-trip property for the pytree that ``data`` describes; raises Finding on failure."""
    with reporting(data):
        t = _targets()
        pytree = t["pytree"]
        tree = build_tree(data)
        leaves, spec = pytree.tree_flatten(tree)  # type: ignore[attr-defined]
        n = len(leaves)
        name = t["tree_spec_as_name"](spec, n)  # type: ignore[operator]
        STATS.add("trees encoded")
        if not isinstance(name, str) or not _is_identifier_name(name):
            raise fail(data, f"name is not an identifier starting with '___': {name!r}")
        k, decoded = t["tree_spec_from_name"](name)  # type: ignore[operator]
        if k != n:
            raise fail(data, f"decoded leaf count {k} != {n} for {name!r}")
        if decoded != spec:
            raise fail(data, f"decoded spec differs for {name!r}:\n  original: {spec}\n  decoded:  {decoded}")
        again = t["tree_spec_as_name"](decoded, k)  # type: ignore[operator]
        if again != name:
            raise fail(data, f"re-encoding the decoded spec changed the name:\n  {name!r}\n  {again!r}")
        expected = pytree.tree_unflatten(leaves, spec)  # type: ignore[attr-defined]
        rebuilt = pytree.tree_unflatten(leaves, decoded)  # type: ignore[attr-defined]
        if type(rebuilt) is not type(expected):
            raise fail(data, f"rebuilt {type(rebuilt)} where torch rebuilds {type(expected)}")
        if pytree.tree_structure(rebuilt) != pytree.tree_structure(expected):  # type: ignore[attr-defined]
            raise fail(data, "rebuilt tree has a different structure than torch's own rebuild")
        got_leaves = pytree.tree_leaves(rebuilt)  # type: ignore[attr-defined]
        if len(got_leaves) != n or any(a is not b for a, b in zip(got_leaves, leaves)):
            raise fail(data, "rebuilt tree does not hold the very same leaves in order")
        if not _equal(rebuilt, expected):
            raise fail(data, f"rebuilt tree != torch's rebuild:\n  {rebuilt!r}\n  {expected!r}")
        # the leaf count is part of the contract: a wrong one is a ValueError, never a wrong name
        try:
            t["tree_spec_as_name"](spec, n + 1)  # type: ignore[operator]
        except ValueError:
            STATS.add("wrong leaf count rejected")
        else:
            raise fail(data, "tree_spec_as_name accepted a wrong n_elements")
        STATS.add("round trips ok")


def _equal(a: object, b: object) -> bool:
    """Structural equality that treats tensors by identity (``==`` on tensors is elementwise)."""
    torch = _targets()["torch"]
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):  # type: ignore[attr-defined]
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):  # type: ignore[attr-defined]
            return False
        if isinstance(a, collections.defaultdict) and a.default_factory is not b.default_factory:  # type: ignore[attr-defined]
            return False
        return all(_equal(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, collections.deque):
        return a.maxlen == b.maxlen and len(a) == len(b) and all(map(_equal, a, b))  # type: ignore[attr-defined,arg-type]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_equal, a, b))  # type: ignore[arg-type]
    if isinstance(a, Pair):
        return a.tag == b.tag and _equal(a.left, b.left) and _equal(a.right, b.right)  # type: ignore[attr-defined]
    if isinstance(a, Bag):
        return a.meta == b.meta and _equal(a.items, b.items)  # type: ignore[attr-defined]
    return a == b


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()
    start(
        sys.argv,
        TestOneInput,
        ["piece_by_piece_serialize.treespec_name"],
        warm_up=lambda: check(b"\x05\x02\x06\x01\x61\x62"),
    )


if __name__ == "__main__":
    main()
