"""Flattening: which form of Note [flat order] a value takes, and the flat items of the forms that need work.

:func:`_kind` is the one decision that ``serialize_one`` and ``type_as_str_with_info`` share, so the flat
order always matches what the string announces; :func:`_compact_key` is the writer's rule for dict keys;
the pytree helpers flatten any other structure and replace its cache leaves by their tensors. The public
functions that use them are in the package (:mod:`piece_by_piece_serialize.serialize`).

Imports: :mod:`._caches` only (and torch, bound by :func:`_setup` on first use).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from . import _caches, _kv_sharing

# torch objects, bound on first use by _setup (called by the package's own _setup)
_Tensor: Any = None
_tree_flatten: Any = None
# Leaf types a flat list carries as they are (Note [opaque leaves]); torch's own constants are added by _setup.
_PLAIN_LEAVES: set[type] = {type(None), bool, int, float, complex, str}


def _setup() -> None:
    global _Tensor, _tree_flatten
    import torch
    from torch.utils import _pytree

    _tree_flatten = _pytree.tree_flatten
    _PLAIN_LEAVES.update((torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size))
    _PLAIN_LEAVES.update((torch.SymInt, torch.SymFloat, torch.SymBool))  # export's symbolic scalars
    _Tensor = torch.Tensor

# _kind() results
_K_TENSOR, _K_NONE, _K_SCALAR, _K_LIST, _K_DICT, _K_CACHE, _K_TREE, _K_SHARED = range(8)
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
    if _kv_sharing.is_kv_sharing(obj):
        return _K_SHARED
    return _K_TREE


def _scalar_name(obj: Any) -> str:
    if isinstance(obj, bool):
        return "bool"
    if isinstance(obj, int):
        return "int"
    return "float"


# Note [opaque leaves]
# ~~~~~~~~~~~~~~~~~~~~
# pytree opens only the containers it knows (tuples, lists, dicts, namedtuples and registered classes); anything
# else -- a dataclass, an object of the user's own class, a set -- comes out as one leaf, the object itself. Such a
# leaf would travel to the operator as an opaque Python object, which a custom operator cannot take (and which
# torch.export cannot trace through), and the rebuilt value would be that same object, not a copy made of
# tensors. So it is refused here, at the argument that holds it, saying how to make pytree open it
# (torch.utils._pytree.register_dataclass for a dataclass: then its fields are carried like any other container).
# Plain leaves pass: tensors, None, bool/int/float/complex, str, Enum members, torch's dtype/device/layout/
# memory_format/Size and export's symbolic scalars.


class OpaqueLeafError(TypeError):
    """A value holds an object pytree does not open (Note [opaque leaves]). ``str()`` is the whole message;
    ``what`` names the argument, ``path`` is where the object sits inside it (``"['k'][1]"``, ``""`` for the
    argument itself), ``leaf_type`` its class and ``how`` what makes it carriable."""

    def __init__(self, what: str, path: str, leaf_type: type, how: str) -> None:
        name = leaf_type.__qualname__ if leaf_type.__module__ == "builtins" else f"{leaf_type.__module__}.{leaf_type.__qualname__}"
        super().__init__(
            f"{what}{' at ' + path if path else ''} is of type {name}, which pytree does not flatten: it would reach "
            f"the operator as one opaque object; {how}"
        )
        self.what, self.path, self.leaf_type, self.how = what, path, leaf_type, how


def _check_leaves(obj: Any, leaves: list[Any], caches: list[int], what: str) -> None:
    """Refuse a leaf that is an object pytree did not open (Note [opaque leaves]); cache leaves are fine."""
    plain, tensor = _PLAIN_LEAVES, _Tensor
    for i, leaf in enumerate(leaves):
        if type(leaf) in plain or isinstance(leaf, (tensor, enum.Enum)):
            continue
        if caches and i in caches:
            continue
        raise _opaque(obj, i, leaf, what)


def _opaque(obj: Any, index: int, leaf: Any, what: str) -> OpaqueLeafError:
    from torch.utils import _pytree

    cls = type(leaf)
    path = _pytree.keystr(_pytree.tree_flatten_with_path(obj)[0][index][0])
    if dataclasses.is_dataclass(leaf):
        how = (f"register it with torch.utils._pytree.register_dataclass({cls.__qualname__}) and its fields are "
               "carried like any other container's")
    elif isinstance(leaf, (set, frozenset)):
        how = "pass a sorted list or a tuple instead (a set has no order to flatten in)"
    else:
        how = (f"make pytree open it with torch.utils._pytree.register_pytree_node({cls.__qualname__}, ...) (or "
               "register_dataclass for a dataclass), or pass its tensors instead")
    return OpaqueLeafError(what, path, cls, how)


def _flatten_tree(obj: Any, what: str = "value") -> tuple[list[Any], Any, list[int]]:
    """pytree leaves, spec, and the indices of the leaves that are transformers caches; ``what`` names ``obj`` in
    the error for a leaf pytree could not open (Note [opaque leaves])."""
    cu = _caches.cache_module()
    if cu is None:  # a cache can only exist if transformers is already imported
        leaves, spec = _tree_flatten(obj)
        _check_leaves(obj, leaves, [], what)
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
    _check_leaves(obj, leaves, caches, what)
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
