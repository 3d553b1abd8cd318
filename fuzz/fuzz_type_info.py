"""Fuzz harness: the type-info language and ``deserialize_args`` on random flat inputs.

Run: ``python fuzz/fuzz_type_info.py [libFuzzer flags] [corpus dirs]``.

An input is one of two kinds, told apart by its first byte:

* **text** (any input not starting with ``0xff``): the bytes, decoded as UTF-8, are a type-info string.
  ``parse_type_info`` either raises ``TreeSpecNameError`` (with a sane position) or returns an AST whose
  printed form is canonical: ``parse(str(t)) == t`` and printing again gives the same text. The parse
  makes a number of Python calls bounded by a linear function of the length (no quadratic work). An
  accepted string is then used to rebuild a value from a flat list of exactly ``n_items`` tensors, and
  from a list one item too long (which must be refused).
* **values** (``0xff`` + choices): the remaining bytes build a few Python values of every kind the
  serializer handles (tensors, ``None``, scalars, lists and dicts of tensors, transformers
  ``DynamicCache``/``EncoderDecoderCache`` with sliding-window and empty layers, nested pytrees). Their
  type-info strings and flat list must rebuild the very same values. Then the flat list or one of the
  strings is mutated (item dropped, duplicated, replaced, packed into a list, string swapped for
  another): ``deserialize_args`` must either raise one of its documented errors (``TypeError``,
  ``ValueError``, ``TreeSpecNameError``) or return values that are exactly what the strings announce,
  built from exactly the items they consume: never a silently wrong object.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import ByteReader, CallCounter, Stats, decode_text, fail, over_budget, reporting, start  # noqa: E402

TARGET = "type_info"

# Findings reported and not yet fixed (fuzz/pending/type_info/<name>.md): the check is skipped so the
# campaign keeps looking for new problems. Empty the set once fixed.
OPEN_FINDINGS: set[str] = set()
STATS = Stats(TARGET)
VALUES_MARKER = 0xFF

# Calls allowed per parse: a linear budget in the input length (the constant is generous: the lark
# lexer and parser make several calls per character; a quadratic parser blows past it quickly).
CALLS_PER_CHAR = 80
CALLS_BASE = 20_000
# Accepted strings are exercised with a synthetic flat list only up to this many items.
MAX_SYNTHETIC_ITEMS = 512

_KEY_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

_T: dict[str, object] = {}


def _targets() -> dict[str, object]:
    """Import the library lazily (so ``main`` instruments it first), torch and transformers' caches."""
    if not _T:
        import torch
        import torch.utils._pytree as pytree
        import transformers.cache_utils as cu

        from piece_by_piece_serialize import serialize, type_info
        from piece_by_piece_serialize.errors import TreeSpecNameError

        import fuzz_pytree_roundtrip  # its classes and registered nodes appear in the seed names

        fuzz_pytree_roundtrip._targets()

        _T.update(torch=torch, pytree=pytree, cu=cu, serialize=serialize, ti=type_info, Error=TreeSpecNameError)
        type_info.parse_type_info("list__1")  # builds the parser, so the call budget measures parsing only
    return _T


# --------------------------------------------------------------------------------------------------
# Text mode


def _check_text(data: bytes) -> None:
    t = _targets()
    ti = t["ti"]
    text = decode_text(data)
    counter = CallCounter()
    try:
        info = counter.run(lambda: ti.parse_type_info(text))  # type: ignore[attr-defined]
    except t["Error"] as err:  # type: ignore[misc]
        STATS.add("text rejected")
        _check_error(data, text, err)
        info = None
    budget = CALLS_PER_CHAR * len(text) + CALLS_BASE
    if counter.calls > budget:
        # Recount with the uncached parser (a repeat of parse_type_info would be a cache hit).
        calls = over_budget(lambda: ti._parse(text), budget, t["Error"])  # type: ignore[attr-defined]
        if calls is not None:
            raise fail(data, f"parse_type_info made {calls} calls for {len(text)} characters (budget {budget})")
        STATS.add("call budget exceeded once only (lazy set-up on first use)")
    if info is None:
        return
    STATS.add("text accepted")
    canonical = str(info)
    again = ti.parse_type_info(canonical)  # type: ignore[attr-defined]
    if again != info:
        raise fail(data, f"canonical text {canonical!r} parses to {again!r}, not {info!r}")
    if str(again) != canonical:
        raise fail(data, f"printing is not a fixed point: {canonical!r} -> {str(again)!r}")
    if canonical != text:
        STATS.add("text accepted, non-canonical spelling")
    pretty = ti.pretty_type_info(text)  # type: ignore[attr-defined]
    if not isinstance(pretty, str) or not pretty:
        raise fail(data, f"pretty_type_info returned {pretty!r}")
    n = info.n_items
    if not 0 <= n <= MAX_SYNTHETIC_ITEMS:
        return
    torch = t["torch"]
    # 4-d tensors, so that a cache string receives tensors shaped like keys/values (see _Values.tensor)
    res = [torch.full((1, 1, 1, 2), float(i)) for i in range(n)]  # type: ignore[attr-defined]
    _deserialize_and_verify(data, res, [text], expect_success=False)
    if n:
        # The last item replaced by each other kind of item: a scalar of each kind, None, a 1-d tensor (a
        # cache needs rank >= 2) and a list (never a tree leaf). Each is refused or rebuilt as announced
        # (regressions scalar_kind_unchecked, cache_1d_tensor, list_item_as_tree_leaf).
        for other in (3, 2.5, True, None, torch.zeros(1), [torch.zeros(1, 1, 1, 2)]):  # type: ignore[attr-defined]
            _deserialize_and_verify(data, res[:-1] + [other], [text], expect_success=False)
        _deserialize_and_verify(data, [torch.zeros(1) for _ in range(n)], [text], expect_success=False)  # type: ignore[attr-defined]
    try:
        t["serialize"].deserialize_args(res + [torch.zeros(1)], [text])  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        STATS.add("one item too many refused")
    else:
        raise fail(data, f"deserialize_args accepted {n + 1} items for {text!r} ({n} announced)")


def _check_error(data: bytes, text: str, err: BaseException) -> None:
    pos, lineno, colno = getattr(err, "pos", None), getattr(err, "lineno", None), getattr(err, "colno", None)
    if not isinstance(pos, int) or not 0 <= pos <= len(getattr(err, "text", text)):
        raise fail(data, f"error position {pos!r} outside the text: {err}")
    if not (isinstance(lineno, int) and lineno >= 1 and isinstance(colno, int) and colno >= 1):
        raise fail(data, f"bad line/column {lineno!r}/{colno!r}: {err}")
    if "^" not in str(err):
        raise fail(data, f"error message has no caret line: {err}")


# --------------------------------------------------------------------------------------------------
# Values mode


class _Values:
    """Builds the values of one input from the reader; tensors get distinct contents."""

    def __init__(self, reader: ByteReader, t: dict[str, object]) -> None:
        self.r = reader
        self.t = t
        self.counter = 0

    def tensor(self) -> object:
        self.counter += 1
        torch = self.t["torch"]
        # Rank 0 to 4: a mutated string naming a cache may receive tensors of a rank below 2, which
        # deserialize_args must refuse (regression cache_1d_tensor), never pass on to transformers.
        shape = tuple(1 + self.r.below(2) for _ in range(self.r.below(5)))
        return torch.full(shape, float(self.counter))  # type: ignore[attr-defined]

    def kv(self, n: int | None = None) -> object:
        self.counter += 1
        n = 1 + self.r.below(3) if n is None else n
        return self.t["torch"].full((1, 1, n, 2), float(self.counter))  # type: ignore[attr-defined]

    def key(self) -> object:
        r = self.r
        kind = r.below(6)
        if kind <= 2:  # the compact dict__N form needs [A-Za-z0-9] runs joined by single "_"
            return r.pick("abcxyzAZ") + r.text(6, _KEY_CHARS)
        if kind == 3:
            return r.text(6)
        if kind == 4:
            return r.signed()
        return r.pick(["", "_a", "a_", "a__b", "__x__", "0", None, True, 1.5])

    def layer(self, dummy: bool = True) -> object:
        cu, r = self.t["cu"], self.r
        kind = r.below(12 if dummy else 11)
        if kind < 4:
            layer = cu.DynamicLayer()  # type: ignore[attr-defined]
        elif kind < 8:
            layer = cu.DynamicSlidingWindowLayer(sliding_window=1 + r.below(8))  # type: ignore[attr-defined]
        elif kind < 10:
            layer = cu.StaticLayer(max_cache_len=8)  # at most 2 updates of 3 tokens below: never full  # type: ignore[attr-defined]
        elif kind < 11:
            layer = cu.StaticSlidingWindowLayer(max_cache_len=4, sliding_window=1 + r.below(6))  # type: ignore[attr-defined]
        else:
            return cu.DummyLayer()  # type: ignore[attr-defined]
        for _ in range(r.below(3) if kind % 2 == 0 else 0):  # 0 to 2 updates of 1 to 3 tokens
            n = 1 + r.below(3)
            layer.update(self.kv(n), self.kv(n))
        return layer

    def cache(self, allow_encoder_decoder: bool = True) -> object:
        cu = self.t["cu"]
        r = self.r
        if allow_encoder_decoder and r.below(4) == 0:
            # transformers' EncoderDecoderCache() reads the sequence length of every cross-attention layer,
            # which a DummyLayer refuses: no dummy layers in either part
            return cu.EncoderDecoderCache(self.cache(False), self.cache(False))  # type: ignore[attr-defined]
        cache = cu.DynamicCache()  # type: ignore[attr-defined]
        if r.flag():
            cache.layer_class_to_replicate = None  # as DynamicCache(config=...) makes it
        for _ in range(r.count(4)):
            cache.layers.append(self.layer(dummy=allow_encoder_decoder))
        return cache

    def value(self, depth: int = 0) -> object:
        r = self.r
        kind = r.below(11)
        if kind <= 1:
            return self.tensor()
        if kind == 2:
            return r.pick([None, True, False, 0, -7, 2**70, 0.5, float("inf"), -0.0])
        if kind == 3:
            return [self.tensor() for _ in range(r.count(4))]
        if kind == 4:
            return {self.key(): self.tensor() for _ in range(r.count(4))}
        if kind == 5:
            return tuple(self.tensor() for _ in range(r.count(3)))
        if kind == 6:
            return self.cache()
        if kind == 7 and depth < 2:
            return [self.value(depth + 1) for _ in range(r.count(3))]
        if kind == 8 and depth < 2:
            return {self.key(): self.value(depth + 1) for _ in range(r.count(3))}
        return self.tensor()


def _flat(serialize: object, values: list[object]) -> list[object]:
    out: list[object] = []
    for i, value in enumerate(values):
        part = serialize.serialize_one(value, i, "")  # type: ignore[attr-defined]
        if type(part) in (list, tuple):
            out.extend(part)
        else:
            out.append(part)
    return out


def _check_values(data: bytes) -> None:
    t = _targets()
    serialize = t["serialize"]
    r = ByteReader(data)
    builder = _Values(r, t)
    values = [builder.value() for _ in range(1 + r.below(3))]
    types = [serialize.type_as_str_with_info(v) for v in values]  # type: ignore[attr-defined]
    res = _flat(serialize, values)
    out = serialize.deserialize_args(res, types)  # type: ignore[attr-defined]
    if len(out) != len(values):
        raise fail(data, f"deserialize_args returned {len(out)} values for {len(values)} types {types!r}")
    for before, after, tt in zip(values, out, types):
        if not _same(t, before, after):
            raise fail(data, f"round trip changed a value of type {tt!r}:\n  {before!r}\n  {after!r}")
    _verify(data, res, types, out, clone=False)
    STATS.add("values round trips ok")
    # Now break the agreement between the flat list and the strings, in one of several ways.
    res2, types2 = list(res), list(types)
    how = r.below(7)
    if how == 0 and res2:
        del res2[r.below(len(res2))]
    elif how == 1 and res2:
        i = r.below(len(res2))
        res2.insert(i, res2[i])
    elif how == 2 and res2:
        res2[r.below(len(res2))] = r.pick([None, 3, 2.5, True, builder.tensor(), [builder.tensor()], []])
    elif how == 3 and len(res2) >= 2:
        i, j = r.below(len(res2)), r.below(len(res2))
        res2[i:j] = [res2[i:j]]  # pack a group into one list, as an operator returning Tensor[] gives it
    elif how == 4:
        types2[r.below(len(types2))] = serialize.type_as_str_with_info(builder.value())  # type: ignore[attr-defined]
    elif how == 5:
        types2.reverse()
    else:
        res2 = res2[::-1]
    STATS.add(f"mutation {how}")
    _deserialize_and_verify(data, res2, types2, expect_success=False, clone=r.flag())


def _deserialize_and_verify(data: bytes, res: list[object], types: list[str], expect_success: bool, clone: bool = False) -> None:
    t = _targets()
    try:
        out = t["serialize"].deserialize_args(res, types, clone=clone)  # type: ignore[attr-defined]
    except (TypeError, ValueError) as err:  # the documented errors (TreeSpecNameError is a ValueError)
        if expect_success:
            raise fail(data, f"deserialize_args refused a consistent input: {err}") from err
        STATS.add(f"deserialize refused ({type(err).__name__})")
        return
    _verify(data, res, types, out, clone)
    STATS.add("deserialize accepted and verified")


def _scalar_ok(t: dict[str, object], kind: str, obj: object) -> bool:
    torch = t["torch"]
    if kind == "bool":
        return type(obj) is bool or isinstance(obj, torch.SymBool)  # type: ignore[attr-defined]
    if kind == "int":
        return (isinstance(obj, int) and type(obj) is not bool) or isinstance(obj, torch.SymInt)  # type: ignore[attr-defined]
    return type(obj) is float or isinstance(obj, torch.SymFloat)  # type: ignore[attr-defined]


def _verify(data: bytes, res: list[object], types: list[str], out: object, clone: bool) -> None:
    """``out`` is exactly what ``types`` announce, built from exactly the items they consume of ``res``."""
    t = _targets()
    ti, torch, pytree, serialize = t["ti"], t["torch"], t["pytree"], t["serialize"]
    if not isinstance(out, tuple) or len(out) != len(types):
        raise fail(data, f"deserialize_args returned {out!r} for {len(types)} types")

    def same_item(got: object, want: object) -> bool:
        if isinstance(want, torch.Tensor):  # type: ignore[attr-defined]
            if not isinstance(got, torch.Tensor):  # type: ignore[attr-defined]
                return False
            if want.dim() == 2 and want.shape[1] == 0:  # a count tensor: it carries its shape, nothing else
                return tuple(got.shape) == tuple(want.shape)
            return (got is not want and torch.equal(got, want)) if clone else got is want  # type: ignore[attr-defined]
        return got is want

    def same_items(got: list[object], want: list[object]) -> bool:
        return len(got) == len(want) and all(same_item(g, w) for g, w in zip(got, want))

    pos = 0
    for tt, obj in zip(types, out):
        info = ti.parse_type_info(tt)  # type: ignore[attr-defined]
        name = type(info).__name__
        if name in ("TensorInfo", "NoneInfo", "ScalarInfo"):
            if pos >= len(res):
                raise fail(data, f"{tt!r} consumed res[{pos}] beyond the end")
            item = res[pos]
            pos += 1
            if name == "TensorInfo" and not (isinstance(item, torch.Tensor) and same_item(obj, item)):  # type: ignore[attr-defined]
                raise fail(data, f"'Tensor' rebuilt as {obj!r} from {item!r}")
            if name == "NoneInfo" and not (obj is None and item is None):
                raise fail(data, f"'None' rebuilt as {obj!r} from {item!r}")
            if name == "ScalarInfo" and obj is not item:
                raise fail(data, f"{tt!r} rebuilt as {obj!r}, not the item {item!r}")
            if name == "ScalarInfo" and not _scalar_ok(t, info.kind, obj):
                if "scalar_kind_unchecked" not in OPEN_FINDINGS:
                    raise fail(data, f"{tt!r} rebuilt as a {type(obj).__name__} {obj!r} from {item!r}")
                STATS.add("OPEN scalar_kind_unchecked hit")
            continue
        n = info.n_items
        if n and pos < len(res) and type(res[pos]) in (list, tuple):
            group, pos = list(res[pos]), pos + 1  # a group packed as one list
        else:
            group, pos = list(res[pos : pos + n]), pos + n
        if len(group) != n:
            raise fail(data, f"{tt!r} announces {n} items, only {len(group)} were available")
        if name == "TensorListInfo":
            if type(obj) is not list or not same_items(obj, group):
                raise fail(data, f"{tt!r} rebuilt as {obj!r}")
        elif name == "TensorDictInfo":
            if type(obj) is not dict or list(obj) != list(info.keys) or not same_items(list(obj.values()), group):
                raise fail(data, f"{tt!r} rebuilt as {obj!r}")
        elif name in ("CacheInfo", "EncoderDecoderCacheInfo"):
            described = ti.parse_type_info(serialize.type_as_str_with_info(obj))  # type: ignore[attr-defined]
            if described != _modern(ti, info) or not same_items(_no_legacy_counts(torch, serialize.serialize_one(obj, 0, ""), info), group):  # type: ignore[attr-defined]
                raise fail(data, f"{tt!r} rebuilt as a cache described {str(described)!r} or holding other tensors")
        elif name in ("TreeSpecInfo", "TreeWithCachesInfo"):
            tree = info if name == "TreeSpecInfo" else info.tree
            caches = {} if name == "TreeSpecInfo" else {leaf.index: leaf.cache for leaf in info.caches}
            if any(type(x) in (list, tuple, dict) for x in group):
                if "list_item_as_tree_leaf" in OPEN_FINDINGS:
                    STATS.add("OPEN list_item_as_tree_leaf hit (not verified)")
                    continue
                raise fail(data, f"{tt!r} took a container item of res as a leaf: {group!r}")
            # torch's own rebuild from the consumed items is the oracle for the structure (it rebuilds
            # torch.Size as a tuple, ModelOutput drops None fields, ...); a cache leaf stands for its items.
            rest = iter(group)
            expected_leaves: list[object] = []
            cache_items: dict[int, list[object]] = {}
            for index in range(tree.n_leaves):
                if index in caches:
                    cache_items[index] = [next(rest, None) for _ in range(caches[index].n_items)]
                    expected_leaves.append(object())  # a placeholder leaf where the cache goes
                else:
                    expected_leaves.append(next(rest, None))
            expected = pytree.tree_unflatten(expected_leaves, tree.spec)  # type: ignore[attr-defined]
            got_leaves, got_spec = pytree.tree_flatten(obj)  # type: ignore[attr-defined]
            want_leaves, want_spec = pytree.tree_flatten(expected)  # type: ignore[attr-defined]
            # torch.Size nodes come back as torch.Size (torch's own unflatten gives a tuple, which it then
            # flattens as a tuple node): the rebuilt value's spec is the decoded one, Size nodes included
            if _size_as_tuple(torch, pytree, got_spec) != want_spec or len(got_leaves) != len(want_leaves):
                raise fail(data, f"{tt!r} rebuilt as {obj!r}, torch rebuilds {expected!r}")
            placeholder_at = {id(leaf): index for index, leaf in zip(caches, [expected_leaves[i] for i in caches])}
            for got, want in zip(got_leaves, want_leaves):
                index = placeholder_at.get(id(want))
                if index is not None:
                    described = ti.parse_type_info(serialize.type_as_str_with_info(got))  # type: ignore[attr-defined]
                    if described != caches[index] or not same_items(serialize.serialize_one(got, 0, ""), cache_items[index]):  # type: ignore[attr-defined]
                        raise fail(data, f"{tt!r}: leaf {index} rebuilt as a cache described {str(described)!r}")
                elif not same_item(got, want):
                    raise fail(data, f"{tt!r}: a leaf is not the item it consumed: {got!r} vs {want!r}")
        else:
            raise fail(data, f"the harness does not know type-info node {name}")
    rest = res[pos:]
    if rest and not (len(rest) == 1 and type(rest[0]) in (list, tuple) and len(rest[0]) == 0):
        raise fail(data, f"deserialize_args ignored {len(rest)} trailing items {rest!r}")


def _same(t: dict[str, object], a: object, b: object, top: bool = True) -> bool:
    """Deep equality for the values built here: tensors by identity, caches by layers and tensors."""
    torch, cu = t["torch"], t["cu"]
    if isinstance(a, torch.Tensor):  # type: ignore[attr-defined]
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, cu.Cache):  # type: ignore[attr-defined]
        # every attribute of the cache and of each layer: names, order and values (what later computation sees)
        return _same_state(t, a, b)
    if isinstance(a, dict):
        if list(a) != list(b):  # type: ignore[arg-type]
            return False  # every dict keeps its insertion order, the compact dict__N form included
        return all(_same(t, a[k], b[k], False) for k in a)  # type: ignore[index,arg-type]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(t, x, y, False) for x, y in zip(a, b))  # type: ignore[arg-type]
    return a is b or a == b


def _size_as_tuple(torch: object, pytree: object, spec: object) -> object:
    """``spec`` with its torch.Size nodes turned into the tuple nodes torch's own rebuild makes of them."""
    if spec.type is None:  # type: ignore[attr-defined]
        return spec
    children = [_size_as_tuple(torch, pytree, c) for c in spec.children()]  # type: ignore[attr-defined]
    if spec.type is torch.Size:  # type: ignore[attr-defined]
        return pytree.TreeSpec(tuple, None, children)  # type: ignore[attr-defined]
    return pytree.TreeSpec(spec.type, spec.context, children)  # type: ignore[attr-defined]


def _modern(ti: object, info: object) -> object:
    """``info`` as the writer spells the rebuilt cache: a legacy sliding layer ``W<n>`` is an ``S<n>``."""
    if type(info).__name__ == "EncoderDecoderCacheInfo":
        return ti.EncoderDecoderCacheInfo(_modern(ti, info.self_attention), _modern(ti, info.cross_attention))  # type: ignore[attr-defined]
    layers = [ti.LayerInfo("S", x.populated, x.number) if x.kind == "W" else x for x in info.layers]  # type: ignore[attr-defined]
    return ti.CacheInfo.of_layers(layers, info.name, info.options)  # type: ignore[attr-defined]


def _no_legacy_counts(torch: object, items: list[object], info: object) -> list[object]:
    """The rebuilt cache's items without the counts a legacy ``W`` layer did not carry (it stored none)."""
    parts = [info.self_attention, info.cross_attention] if type(info).__name__ == "EncoderDecoderCacheInfo" else [info]  # type: ignore[attr-defined]
    layers = [layer for part in parts for layer in part.layers]
    out: list[object] = []
    pos = 0
    for layer in layers:
        n = layer.n_items + (1 if layer.kind == "W" and layer.populated else 0)
        chunk = items[pos : pos + n]
        out.extend(chunk[:-1] if n != layer.n_items else chunk)
        pos += n
    return out + items[pos:]


def _same_state(t: dict[str, object], a: object, b: object) -> bool:
    torch = t["torch"]
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):  # type: ignore[attr-defined]
        # items come back as the very same objects; derived tensors (a sliding window as a tensor) equal
        return a is b or (a.dtype == b.dtype and a.device == b.device and a.shape == b.shape and torch.equal(a, b))  # type: ignore[attr-defined]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_state(t, x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_state(t, a[k], b[k]) for k in a)  # type: ignore[index,arg-type]
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return _same_state(t, vars(a), vars(b))
    return a is b or a == b


def check(data: bytes) -> None:
    """The properties for one input (text or values mode); raises Finding on failure."""
    with reporting(data):
        if data[:1] == bytes([VALUES_MARKER]):
            _check_values(data[1:])
        else:
            _check_text(data)


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()

    def warm_up() -> None:
        check(b"DynamicCache_2D_W4")
        check(bytes([VALUES_MARKER]) + b"\x06\x01\x02\x00\x03\x02\x04")

    start(
        sys.argv,
        TestOneInput,
        [
            "piece_by_piece_serialize.type_info",
            "piece_by_piece_serialize.type_info._ast",
            "piece_by_piece_serialize.type_info._transform",
            "piece_by_piece_serialize.serialize",
            "piece_by_piece_serialize.serialize._caches",
        ],
        warm_up,
    )


if __name__ == "__main__":
    main()
