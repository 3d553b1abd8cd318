"""Rebuilding: type-info strings and flat items back into Python objects, with the steps that make it fast.

:func:`_deserialize_into` is the whole of ``deserialize_args``'s work: for each type-info string it runs the
compiled step of Note [deserialization steps] and, when that declines, the general route
(:func:`_general_route`), which accepts every valid input and raises the errors that name the position.
The checks on items (tensors only, leaves only, exact scalar kinds) and the pytree rebuild that keeps
``torch.Size`` nodes (Note [torch.Size in a pytree]) are here too.

Imports: :mod:`..type_info` (the nodes and the parse cache), :mod:`._caches` (cache rebuilds) and :mod:`._kv_sharing`, and torch,
bound by :func:`_setup` on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..type_info import (
    _CACHED_LENGTH,
    AnyCacheInfo,
    CacheInfo,
    EncoderDecoderCacheInfo,
    KVSharingInfo,
    NoneInfo,
    ScalarInfo,
    TensorDictInfo,
    TensorInfo,
    TensorListInfo,
    TreeSpecInfo,
    TreeWithCachesInfo,
    TypeInfo,
    _parse_cached,
)
from . import _caches, _kv_sharing

# torch objects, bound on first use by _setup (called by the package's own _setup)
_Tensor: Any = None
_Size: Any = None
_tree_unflatten: Any = None


def _setup() -> None:
    global _Tensor, _Size, _tree_unflatten
    import torch
    from torch.utils import _pytree

    _tree_unflatten = _pytree.tree_unflatten
    _Size = torch.Size
    _Tensor = torch.Tensor

def _type_info(tt: Any, where: str) -> TypeInfo:
    if type(tt) is str:
        return _parse_cached(tt)
    if tt is None:
        return NoneInfo()
    if isinstance(tt, TypeInfo):
        return tt
    raise TypeError(f"{where} must be a type-info string, got {type(tt).__name__}: {tt!r}")


def _take(res: Sequence[Any], pos: int, n: int, where: str, tt: Any) -> tuple[Sequence[Any], int]:
    """The ``n`` items for one argument: either packed as one list at ``pos`` or ``n`` flat items."""
    if n and pos < len(res):
        item = res[pos]
        if type(item) is list or type(item) is tuple:
            if len(item) != n:
                raise ValueError(
                    f"{where}={str(tt)!r} needs {n} items but res[{pos}] is a list of {len(item)}"
                )
            return item, pos + 1
    end = pos + n
    if end > len(res):
        raise ValueError(
            f"{where}={str(tt)!r} needs {n} items from res[{pos}] but res has only {len(res)} items"
        )
    return res[pos:end], end


def _clone_leaf(x: Any) -> Any:
    return x.clone() if isinstance(x, _Tensor) else x


# Note [deserialization steps]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# deserialize_args runs on every forward call with the same few type-info strings. The first time a string
# goes through _deserialize_into it is parsed, and compiled into a *step*: a small function holding what the
# node says (a count, dict keys, a TreeSpec, a cache builder) that rebuilds the argument in the common case --
# the items are plain torch.Tensor objects (or exact scalars, or non-container leaves), laid out flat in
# res, clone=False. A step either appends the value and returns the new position, or returns -1 without
# having changed anything, and the argument goes the general route below, which accepts the other cases
# (tensor subclasses such as FakeTensor under torch.export, packed groups, clone=True) and raises the
# errors that name the position. A step never accepts what the general route would refuse and builds the
# same value. Steps are kept per string (bounded), so a warm call does no parsing and no dispatch on node
# types: one dict lookup and one call per argument.

_Step = Callable[[list[Any], Sequence[Any], int, int], int]
_STEPS: dict[str, _Step] = {}
_STEPS_MAX = 4096


def _tensor_step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
    if pos < n_res:
        item = res[pos]
        if type(item) is _Tensor:
            des.append(item)
            return pos + 1
    return -1


def _none_step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
    if pos < n_res and res[pos] is None:
        des.append(None)
        return pos + 1
    return -1


def _general_step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
    return -1  # no shortcut for this node (TreeWithCachesInfo, zero items): always the general route


def _scalar_step(kind: type) -> _Step:
    # An exact bool/int/float is what _scalar_ok accepts without a symbolic type; anything else goes general.
    def step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
        if pos < n_res:
            item = res[pos]
            if type(item) is kind:
                des.append(item)
                return pos + 1
        return -1

    return step


def _tensor_list_step(n: int) -> _Step:
    def step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
        end = pos + n
        if end <= n_res:
            items = res[pos:end]
            for item in items:
                if type(item) is not _Tensor:
                    return -1  # a packed group starts with a list, a tensor subclass or an error: general route
            des.append(list(items))
            return end
        return -1

    return step


def _tensor_dict_step(keys: tuple[str, ...]) -> _Step:
    n = len(keys)

    def step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
        end = pos + n
        if end <= n_res:
            items = res[pos:end]
            for item in items:
                if type(item) is not _Tensor:
                    return -1
            des.append(dict(zip(keys, items)))  # noqa: B905 - n keys, n items; strict= doubles zip's cost
            return end
        return -1

    return step


# Note [torch.Size in a pytree]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch registers torch.Size as a pytree node whose unflatten gives a plain tuple, so tree_unflatten turns
# every torch.Size of a structure into a tuple. A structure holding one is rebuilt by _unflatten below, which
# follows the spec like tree_unflatten does and makes torch.Size objects of those nodes; any other structure
# goes through tree_unflatten itself.


def _has_size(spec: Any) -> bool:
    stack = [spec]
    size = _Size
    while stack:
        s = stack.pop()
        if s.type is size:
            return True
        stack.extend(c for c in s._children if c.type is not None)
    return False


def _unflatten_with_sizes(leaves: list[Any], spec: Any) -> Any:
    from torch.utils._pytree import SUPPORTED_NODES

    it = iter(leaves)

    def build(s: Any) -> Any:  # one frame per level: pytree's own depth limit (about 500) fits the stack
        if s.type is None:
            return next(it)
        children = []
        for c in s._children:
            children.append(build(c))
        if s.type is _Size:
            return _Size(children)
        return SUPPORTED_NODES[s.type].unflatten_fn(children, s._context)

    return build(spec)


def _unflatten(leaves: list[Any], spec: Any) -> Any:
    """``tree_unflatten``, except that torch.Size nodes come back as torch.Size (Note [torch.Size in a pytree])."""
    if _has_size(spec):
        return _unflatten_with_sizes(leaves, spec)
    return _tree_unflatten(leaves, spec)


def _tree_step(n: int, spec: Any) -> _Step:
    unflatten = _unflatten_with_sizes if _has_size(spec) else _tree_unflatten
    if spec.type is tuple and all(c.type is None for c in spec._children):
        # a plain tuple of leaves (a layer's position embeddings): what tree_unflatten makes of it, without its walk
        unflatten = _plain_tuple

    def step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
        end = pos + n
        if end <= n_res:
            items = res[pos:end]
            for item in items:
                if type(item) in _CONTAINERS:  # a packed group at pos, or a container leaf (an error)
                    return -1
            des.append(unflatten(list(items), spec))
            return end
        return -1

    return step


def _plain_tuple(leaves: list[Any], spec: Any) -> tuple[Any, ...]:
    return tuple(leaves)


def _cache_step(info: AnyCacheInfo) -> _Step:
    n = info.n_items
    build = _caches.builder(info)

    def step(des: list[Any], res: Sequence[Any], pos: int, n_res: int) -> int:
        end = pos + n
        if end <= n_res:
            cache = build(res[pos:end])  # None unless every item is what the common case holds
            if cache is not None:
                des.append(cache)
                return end
        return -1

    return step


def _compile_step(info: TypeInfo) -> _Step:
    cls = type(info)
    if cls is TensorInfo:
        return _tensor_step
    if cls is NoneInfo:
        return _none_step
    if cls is ScalarInfo:
        return _scalar_step({"bool": bool, "int": int, "float": float}[info.kind])  # type: ignore[attr-defined]
    if info.n_items == 0:
        return _general_step
    if cls is TensorListInfo:
        return _tensor_list_step(info.size)  # type: ignore[attr-defined]
    if cls is TensorDictInfo:
        return _tensor_dict_step(info.keys)  # type: ignore[attr-defined]
    if cls is TreeSpecInfo:
        return _tree_step(info.n_leaves, info.spec)  # type: ignore[attr-defined]
    if cls is CacheInfo or cls is EncoderDecoderCacheInfo:
        return _cache_step(info)  # type: ignore[arg-type]
    return _general_step


def _remember_step(text: str, info: TypeInfo) -> None:
    if len(text) > _CACHED_LENGTH:  # as for parsing: long strings are not kept
        return
    if len(_STEPS) >= _STEPS_MAX:
        _STEPS.clear()
    _STEPS[text] = _compile_step(info)

def _deserialize_into(
    des: list[Any], res: Sequence[Any], expected_types: Sequence[Any], clone: bool, pos: int, label: str
) -> int:
    n_res = len(res)
    steps = _STEPS
    for i, tt in enumerate(expected_types):
        if type(tt) is str and not clone:  # Note [deserialization steps]
            step = steps.get(tt)
            if step is _tensor_step:  # inlined, the most frequent step
                if pos < n_res:
                    item = res[pos]
                    if type(item) is _Tensor:
                        des.append(item)
                        pos += 1
                        continue
            elif step is not None:
                end = step(des, res, pos, n_res)
                if end >= 0:
                    pos = end
                    continue
            else:
                _remember_step(tt, _parse_cached(tt))  # raises TreeSpecNameError on a malformed string
        # The general route, a call of its own: taken only when there is no step, it declined, or clone=True.
        pos = _general_route(des, res, tt, i, clone, pos, n_res, label)
    return pos


def _general_route(
    des: list[Any], res: Sequence[Any], tt: Any, i: int, clone: bool, pos: int, n_res: int, label: str
) -> int:
    """Rebuild argument ``i`` (type-info ``tt``) from ``res[pos:]`` into ``des``, checking everything; the new position."""
    # The where-strings of error messages are only formatted on error.
    # Any, not TypeInfo: the dispatch below is on ``cls``, which mypy does not narrow (and a cast is a call)
    info: Any = _parse_cached(tt) if type(tt) is str else _type_info(tt, f"{label}[{i}]")
    cls = type(info)
    if cls is TensorInfo:
        if pos >= n_res:
            raise ValueError(f"{label}[{i}]='Tensor' needs res[{pos}] but res has only {n_res} items")
        item = res[pos]
        if not isinstance(item, _Tensor):
            raise TypeError(f"{label}[{i}]='Tensor' but res[{pos}] is a {type(item).__name__}")
        des.append(item.clone() if clone else item)
        pos += 1
    elif cls is NoneInfo:
        if pos >= n_res:
            raise ValueError(f"{label}[{i}]='None' needs res[{pos}] but res has only {n_res} items")
        if res[pos] is not None:
            raise TypeError(f"{label}[{i}]='None' but res[{pos}] is a {type(res[pos]).__name__}")
        des.append(None)
        pos += 1
    elif cls is ScalarInfo:
        if pos >= n_res:
            raise ValueError(f"{label}[{i}]={str(info)!r} needs res[{pos}] but res has only {n_res} items")
        item = res[pos]
        if not _scalar_ok(info.kind, item):
            raise TypeError(
                f"{label}[{i}]={str(info)!r} expects a Python {info.kind} "
                f"but res[{pos}] is a {type(item).__name__}"
            )
        des.append(item)
        pos += 1
    elif cls is TreeSpecInfo:
        items, pos = _take(res, pos, info.n_leaves, f"{label}[{i}]", info)
        _check_leaves(items, f"{label}[{i}]", info)
        leaves = [_clone_leaf(x) for x in items] if clone else list(items)
        des.append(_unflatten(leaves, info.spec))
    elif cls is TreeWithCachesInfo:
        items, pos = _take(res, pos, info.n_items, f"{label}[{i}]", info)
        _check_leaves(items, f"{label}[{i}]", info)
        des.append(_tree_with_caches(info, items, clone, f"{label}[{i}]"))
    elif cls is TensorListInfo:
        items, pos = _take(res, pos, info.size, f"{label}[{i}]", info)
        _check_tensors(items, f"{label}[{i}]", info)
        des.append([t.clone() for t in items] if clone else list(items))
    elif cls is TensorDictInfo:
        n = len(info.keys)
        end = pos + n
        if end <= n_res and (n == 0 or (type(res[pos]) is not list and type(res[pos]) is not tuple)):
            items = res[pos:end]  # the common, flat case, without _take's call
            pos = end
        else:
            items, pos = _take(res, pos, n, f"{label}[{i}]", info)
        for item in items:
            if not isinstance(item, _Tensor):
                _check_tensors(items, f"{label}[{i}]", info)
        des.append(dict(zip(info.keys, [t.clone() for t in items] if clone else items)))  # noqa: B905 - n keys, n items
    elif cls is KVSharingInfo:
        items, pos = _take(res, pos, info.n_items, f"{label}[{i}]", info)
        _check_tensors(items, f"{label}[{i}]", info)
        des.append(_kv_sharing.rebuild(info, [t.clone() for t in items] if clone else items))
    elif cls is CacheInfo or cls is EncoderDecoderCacheInfo:
        items, pos = _take(res, pos, info.n_items, f"{label}[{i}]", info)
        _check_leaves(items, f"{label}[{i}]", info)
        des.append(_caches.rebuild(info, [_clone_leaf(x) for x in items] if clone else items, f"{label}[{i}]={str(info)!r}:"))
    else:  # pragma: no cover - every node of type_info.py is handled above
        raise TypeError(f"{label}[{i}]: unhandled type-info node {cls.__name__}")
    return pos


def _tree_with_caches(info: TreeWithCachesInfo, items: Sequence[Any], clone: bool, where: str) -> Any:
    leaves: list[Any] = []
    pos = 0
    start = 0
    for leaf in info.caches:
        n = leaf.index - start
        plain = items[pos : pos + n]
        leaves.extend([_clone_leaf(x) for x in plain] if clone else plain)
        pos += n
        tensors = items[pos : pos + leaf.cache.n_items]
        rebuilt = _caches.rebuild(leaf.cache, [_clone_leaf(x) for x in tensors] if clone else tensors, f"{where}, cache leaf {leaf.index}:")
        leaves.append(rebuilt)
        pos += leaf.cache.n_items
        start = leaf.index + 1
    rest = items[pos:]
    leaves.extend([_clone_leaf(x) for x in rest] if clone else rest)
    return _unflatten(leaves, info.tree.spec)


def _check_tensors(items: Sequence[Any], where: str, info: TypeInfo) -> None:
    for item in items:
        if not isinstance(item, _Tensor):
            raise TypeError(f"{where}={str(info)!r} expects tensors only, got a {type(item).__name__}")


# Leaves of a TreeSpec name are what pytree leaves become after serialize_args: tensors, scalars, None (or
# any other unregistered object). A list, tuple or dict is a pytree container, never a leaf: such an item in
# the middle of res is a mismatch between res and the string, which pytree would silently accept.
_CONTAINERS = (list, tuple, dict)


def _check_leaves(items: Sequence[Any], where: str, info: TypeInfo) -> None:
    for k, item in enumerate(items):
        if type(item) in _CONTAINERS:
            raise TypeError(
                f"{where}={str(info)!r} expects leaves (tensors, scalars, None) but item {k} of its "
                f"{len(items)} items is a {type(item).__name__}"
            )


# A scalar string announces the item's kind exactly: bool is not an int here, an int is not a float (no
# coercion). Under torch.export an operator may return the symbolic kind (SymBool, SymInt, SymFloat).
def _scalar_ok(kind: str, item: Any) -> bool:
    import torch  # already imported by _setup: this is a dict lookup

    if isinstance(item, bool):
        return kind == "bool"
    if kind == "int":
        return isinstance(item, (int, torch.SymInt))
    if kind == "float":
        return isinstance(item, (float, torch.SymFloat))
    return isinstance(item, torch.SymBool)


def _is_empty_marker(x: Any) -> bool:
    return (type(x) is list or type(x) is tuple) and len(x) == 0
