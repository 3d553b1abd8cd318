"""Flattening: which form of Note [flat order] a value takes, and the flat items of the forms that need work.

:func:`_kind` is the one decision that ``serialize_one`` and ``type_as_str_with_info`` share, so the flat
order always matches what the string announces; :func:`_compact_key` is the writer's rule for dict keys;
the pytree helpers flatten any other structure and replace its cache leaves by their tensors. The public
functions that use them are in the package (:mod:`piece_by_piece_serialize.serialize`).

Imports: :mod:`._caches` only (and torch, bound by :func:`_setup` on first use).
"""

from __future__ import annotations

from typing import Any

from . import _caches

# torch objects, bound on first use by _setup (called by the package's own _setup)
_Tensor: Any = None
_tree_flatten: Any = None


def _setup() -> None:
    global _Tensor, _tree_flatten
    import torch
    from torch.utils import _pytree

    _tree_flatten = _pytree.tree_flatten
    _Tensor = torch.Tensor

# _kind() results
_K_TENSOR, _K_NONE, _K_SCALAR, _K_LIST, _K_DICT, _K_CACHE, _K_TREE = range(7)
_SCALAR_NAMES = {bool: "bool", int: "int", float: "float"}
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


# str key -> fits the compact dict form; bounded (cleared when full), keys repeat on every forward call
_COMPACT_KEYS: dict[str, bool] = {}
_COMPACT_KEYS_MAX = 4096


def _compact_key(key: Any) -> bool:
    r"""Whether ``key`` fits the compact ``dict__N_k1__k2`` form as the writer produces it.

    The writer's rule: a non-empty ``str`` of ASCII letters, digits and ``_``, neither starting nor ending with
    ``_``, without ``__``. It is a strict subset of the language's ``KEY`` terminal (``grammars/type_info.lark``,
    ``/[^_\s](?:_?[^_\s])*/``, which ``TensorDictInfo`` checks exactly): writer ⊂ grammar. Every key accepted
    here is read back as one ``KEY`` token and round-trips; keys the grammar also takes but this rule refuses
    (``"é"``, ``"a-b"``) are written as TreeSpec names, so every type-info string the writer makes stays
    ``[A-Za-z0-9_]`` (``tests/property/test_compact_keys.py`` checks both).
    """
    if type(key) is not str:
        return False
    known = _COMPACT_KEYS.get(key)
    if known is not None:
        return known
    ok = bool(key) and key[0] != "_" and key[-1] != "_" and "__" not in key
    ok = ok and all(ch in _ALNUM or ch == "_" for ch in key)
    if len(_COMPACT_KEYS) >= _COMPACT_KEYS_MAX:
        _COMPACT_KEYS.clear()
    _COMPACT_KEYS[key] = ok
    return ok


def _kind(obj: Any) -> int:
    """Which form of Note [flat order] ``obj`` takes; the one decision shared by writer and flattener."""
    if isinstance(obj, _Tensor):
        return _K_TENSOR
    if obj is None:
        return _K_NONE
    cls = type(obj)
    if cls in _SCALAR_NAMES or isinstance(obj, (bool, int, float)):
        return _K_SCALAR
    if cls is list:
        for item in obj:
            if not isinstance(item, _Tensor):
                return _K_TREE
        return _K_LIST
    if cls is dict and obj:
        for key, value in obj.items():
            if not isinstance(value, _Tensor) or not _compact_key(key):
                return _K_TREE
        return _K_DICT
    if _caches.is_cache(obj):
        return _K_CACHE
    return _K_TREE


def _scalar_name(obj: Any) -> str:
    if isinstance(obj, bool):
        return "bool"
    if isinstance(obj, int):
        return "int"
    return "float"


def _flatten_tree(obj: Any) -> tuple[list[Any], Any, list[int]]:
    """pytree leaves, spec, and the indices of the leaves that are transformers caches."""
    cu = _caches.cache_module()
    if cu is None:  # a cache can only exist if transformers is already imported
        leaves, spec = _tree_flatten(obj)
        return leaves, spec, []
    # A cache is a leaf even when its class is registered with pytree (transformers' export helpers do
    # that): this library rebuilds it itself, with all its state and without copies. pytree's is_leaf hook
    # costs a call per node, so it is only passed when some cache class is registered.
    is_cache = _caches.is_cache
    if _caches.pytree_registered_caches():
        leaves, spec = _tree_flatten(obj, is_leaf=is_cache)
    else:
        leaves, spec = _tree_flatten(obj)
    cache_type, registered = cu.Cache, _caches.SUPPORTED
    caches = [i for i, leaf in enumerate(leaves) if isinstance(leaf, cache_type) or type(leaf) in registered]
    return leaves, spec, caches


def _expand_caches(leaves: list[Any], caches: list[int], what: str) -> list[Any]:
    """The flat items of a pytree whose leaves ``caches`` are caches: each replaced by its tensors."""
    out: list[Any] = []
    start = 0
    for i in caches:
        out.extend(leaves[start:i])
        info = _caches.describe(leaves[i], f"{what}, pytree leaf {i}")
        out.extend(_caches.flatten(leaves[i], info))
        start = i + 1
    out.extend(leaves[start:])
    return out


def _argument(name: str | int | None, schema: str | None = None) -> str:
    where = f" of schema {schema!r}" if schema else ""
    if isinstance(name, int):
        return f"positional argument {name}{where}"
    return f"argument {name!r}{where}"


def _extend(out: list[Any], r: Any) -> None:
    cls = type(r)
    if cls is list or cls is tuple:
        out.extend(r)
    else:
        out.append(r)
