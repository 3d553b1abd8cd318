"""Pass any nested input through a custom operator and back: flatten, describe, rebuild.

"Piece by piece" export replaces a submodule by a custom operator, which only accepts tensors, lists
of tensors and scalars. :func:`serialize_args` flattens the submodule's arguments into such a flat
tuple, :func:`type_as_str_with_info` describes each argument with a type-info string (the language of
``grammars/type_info.lark``), and :func:`deserialize_args` / :func:`deserialize_args_kwargs` rebuild
the original objects from the flat list and those strings.

Invariants (see Note [flat order]):

* for every supported value ``v``, ``deserialize_args(flat(serialize_one(v)), [type_as_str_with_info(v)])``
  rebuilds ``v``: same types, same tensors (the very same objects unless ``clone=True``);
  ``serialize_one`` and ``type_as_str_with_info`` take their decisions in one place
  (:func:`_kind`), so the flat order always matches what the string announces;
* bad input raises ``TypeError``/``ValueError`` naming the argument, never an ``assert``, and nothing
  is silently dropped or reordered; malformed type-info strings raise ``TreeSpecNameError``;
* decoding never runs code (no pickle, eval or import by name); torch is imported on first use and
  transformers only when a value is one of its classes or a type-info string names a cache;
* the hot path (``serialize_args`` + ``deserialize_args`` on every forward call) parses each distinct
  type-info string once (bounded cache) and does no other string work.

Note [flat order]
~~~~~~~~~~~~~~~~~
Per argument: a tensor, ``None`` or a ``bool``/``int``/``float`` is one item; a ``list`` of tensors is its
items; a ``dict`` of tensors whose keys are plain identifiers (``[A-Za-z0-9]`` runs joined by single
``_``) is its values in sorted-key order (the original module's order, kept for compatibility); a
transformers ``DynamicCache`` is ``k0, v0, k1, v1, ...`` and an ``EncoderDecoderCache`` its
self-attention then cross-attention tensors; anything else is ``torch.utils._pytree.tree_flatten``'s
leaves and is described by a TreeSpec name, except that a leaf which is a transformers cache (pytree
does not flatten them, and nothing is registered) is replaced by the cache's tensors and the string
becomes ``WithCaches__<leaf>_<cache>...___<name>``. ``serialize_args`` concatenates the arguments in
order.
"""

from __future__ import annotations

import collections
import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..type_info import (
    _CACHED_LENGTH,
    AnyCacheInfo,
    CacheInfo,
    CacheLeaf,
    EncoderDecoderCacheInfo,
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
from . import _caches

if TYPE_CHECKING:  # annotations only: torch is imported on first use (see _setup)
    from torch import Tensor

    # re-exported lazily by __getattr__ below; named here so that type checkers know them
    from ..schema import extract_names_from_schema
    from ..treespec_name import tree_spec_as_name, tree_spec_from_name

__all__ = [
    "choose_kwargs_for_dynamic_shapes",
    "deserialize_args",
    "deserialize_args_kwargs",
    "extract_names_from_schema",
    "make_copy",
    "serialize_args",
    "serialize_one",
    "tree_spec_as_name",
    "tree_spec_from_name",
    "type_as_str_with_info",
]

# torch objects, bound on first use (see _setup) so that importing this module stays cheap.
_Tensor: Any = None
_Size: Any = None
_tree_flatten: Any = None
_tree_unflatten: Any = None

# _kind() results
_K_TENSOR, _K_NONE, _K_SCALAR, _K_LIST, _K_DICT, _K_CACHE, _K_TREE = range(7)
_SCALAR_NAMES = {bool: "bool", int: "int", float: "float"}
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _setup() -> None:
    global _Tensor, _Size, _tree_flatten, _tree_unflatten
    import torch
    from torch.utils import _pytree

    _tree_flatten = _pytree.tree_flatten
    _tree_unflatten = _pytree.tree_unflatten
    _Size = torch.Size
    _Tensor = torch.Tensor  # set last: the other functions test it to know whether setup ran


def __getattr__(name: str) -> Any:
    # Re-exported from their own modules, loaded on first access like the package's top level.
    if name == "extract_names_from_schema":
        from ..schema import extract_names_from_schema

        return extract_names_from_schema
    if name in ("tree_spec_as_name", "tree_spec_from_name"):
        from .. import treespec_name

        return getattr(treespec_name, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def serialize_one(obj: Any, name: str | int, schema: str) -> Tensor | list[Tensor]:
    """Flatten one argument into what a custom operator accepts.

    Accepts any value; ``name`` (the argument's name or position) and ``schema`` only make error
    messages precise. Returns the tensor itself for a tensor, ``obj`` itself for ``None`` and a
    ``bool``/``int``/``float``, the list or tuple itself for a list or tuple of tensors, and otherwise a
    list of tensors (and scalars) in the order of Note [flat order]: dict values in sorted-key order,
    ``[k0, v0, k1, v1, ...]`` for a cache, pytree leaves for anything else (a cache among them
    replaced by its tensors).
    Raises ``TypeError`` naming the argument for an unsupported transformers cache, at any depth.
    """
    if _Tensor is None:
        _setup()
    # The return annotation is the original module's; None, scalars and tuples come back as themselves too
    # (see above), hence the ignores on those returns.
    if isinstance(obj, _Tensor) or obj is None:
        return obj  # type: ignore[return-value]
    cls = type(obj)
    if cls is tuple or cls is list:
        for item in obj:
            if not isinstance(item, _Tensor):
                break
        else:
            return obj  # type: ignore[no-any-return]
    if cls is dict and obj:  # the compact dict form, checked inline: this is the hot path
        for key, value in obj.items():
            if not isinstance(value, _Tensor) or not _compact_key(key):
                break
        else:
            return list(obj.values())
    kind = _kind(obj)
    if kind == _K_SCALAR:
        return obj  # type: ignore[no-any-return]
    if kind == _K_DICT:  # pragma: no cover - handled above
        return list(obj.values())
    if kind == _K_CACHE:
        # checked as type_as_str_with_info checks it (serialize_args takes the fast route of Note [fast layers])
        return _caches.flatten(obj, _caches.describe(obj, _argument(name, schema)))
    leaves, _, caches = _flatten_tree(obj)
    return _expand_caches(leaves, caches, _argument(name, schema)) if caches else leaves


def _argument(name: str | int | None, schema: str | None = None) -> str:
    where = f" of schema {schema!r}" if schema else ""
    if isinstance(name, int):
        return f"positional argument {name}{where}"
    return f"argument {name!r}{where}"


def type_as_str_with_info(obj: Any) -> str:
    """The type-info string that tells :func:`deserialize_args` how to rebuild ``obj``.

    Accepts any value :func:`serialize_one` accepts. Returns ``Tensor``, ``None``, ``bool``, ``int``,
    ``float``, ``list__N`` (a list of tensors), ``dict__N_k1__k2`` (a dict of tensors with plain
    identifier keys, sorted), ``DynamicCache_<layers>`` / ``EncoderDecoderCache_<layers>__<layers>``
    (layer kinds and sliding windows included), or a TreeSpec name (``___...``) for anything else,
    prefixed by ``WithCaches__<leaf>_<cache>...`` when some pytree leaves are transformers caches.
    Raises ``TypeError`` for an unsupported transformers cache and
    :class:`~piece_by_piece_serialize.errors.TreeSpecNameError` for a structure that has no TreeSpec name.
    """
    if _Tensor is None:
        _setup()
    kind = _kind(obj)
    if kind == _K_TENSOR:
        return "Tensor"
    if kind == _K_NONE:
        return "None"
    if kind == _K_SCALAR:
        return _scalar_name(obj)
    if kind == _K_LIST:
        return f"list__{len(obj)}"
    if kind == _K_DICT:
        return str(TensorDictInfo(tuple(obj)))
    if kind == _K_CACHE:
        return str(_caches.describe(obj, "value"))
    from ..treespec_name import tree_spec_as_name

    leaves, spec, caches = _flatten_tree(obj)
    name = tree_spec_as_name(spec, len(leaves))
    if not caches:
        return name
    tree = TreeSpecInfo(name, len(leaves), spec)
    described = tuple(CacheLeaf(i, _caches.describe(leaves[i], f"value, pytree leaf {i}")) for i in caches)
    return str(TreeWithCachesInfo(described, tree))


def _extend(out: list[Any], r: Any) -> None:
    cls = type(r)
    if cls is list or cls is tuple:
        out.extend(r)
    else:
        out.append(r)


def _serialize_into(flat: list[Any], value: Any, name: str | int, schema: str) -> None:
    """Append what :func:`serialize_one` gives for ``value`` to ``flat``; tensors and caches without a detour."""
    if isinstance(value, _Tensor):
        flat.append(value)
    elif type(value) not in _caches.SUPPORTED or not _caches.flatten_into(value, flat):
        _extend(flat, serialize_one(value, name, schema))


def serialize_args(
    args: tuple[Any],
    kwargs: dict[str, Any] | None,
    schema: str,
    args_names: list[str] | None = None,
) -> tuple[tuple[Tensor, ...], dict[str, Tensor]]:
    """Flatten positional and keyword arguments before calling a custom operator.

    Accepts ``args`` (a tuple or list of positional arguments, or a single tensor), ``kwargs`` (``None``,
    or a dict of keyword arguments), ``schema`` (the operator's schema, used for parameter names when
    ``args_names`` is not given; may be ``None``) and ``args_names`` (the ordered parameter names).
    Returns, with ``kwargs=None``: the tensor itself when ``args`` is a tensor, else the flat tuple;
    with ``kwargs={}``: ``(flat_tuple, {})``; otherwise ``(flat_tuple, {})`` where, after the
    positional arguments, every named parameter is filled in order (``None`` when not passed) and the
    remaining keyword arguments (``**kwargs``) follow in their order. Each argument is flattened by
    :func:`serialize_one`.
    Raises ``TypeError`` for arguments of the wrong type or passed twice, ``ValueError`` when
    keyword arguments are given without any way to know the parameter order.
    """
    if _Tensor is None:
        _setup()
    if isinstance(args, _Tensor):
        positional: Sequence[Any] = (args,)
    elif type(args) is tuple or type(args) is list:  # type: ignore[comparison-overlap]  # a list too, as the docstring says
        positional = args
    else:  # a dict, a namedtuple, a cache...: one positional argument
        positional = (args,)
    flat: list[Any] = []
    for i, a in enumerate(positional):  # _serialize_into, inlined: this loop is the hot path
        if isinstance(a, _Tensor):
            flat.append(a)
        elif type(a) not in _caches.SUPPORTED or not _caches.flatten_into(a, flat):
            _extend(flat, serialize_one(a, i, schema))

    if not kwargs:
        if kwargs is None:
            return args if isinstance(args, _Tensor) else tuple(flat)
        if not isinstance(kwargs, dict):
            raise TypeError(f"serialize_args: kwargs must be a dict or None, got {type(kwargs).__name__}")
        return tuple(flat), {}
    if not isinstance(kwargs, dict):
        raise TypeError(f"serialize_args: kwargs must be a dict or None, got {type(kwargs).__name__}")

    if args_names is None:
        if not schema:
            raise ValueError(
                f"serialize_args: keyword arguments {sorted(map(str, kwargs))} need the parameter order; "
                "give args_names or schema"
            )
        from ..schema import extract_names_from_schema

        args_names = extract_names_from_schema(schema)
    elif not isinstance(args_names, (list, tuple)) or not all(isinstance(n, str) for n in args_names):
        raise TypeError("serialize_args: args_names must be a list of str")
    n_pos = len(positional)
    for name in args_names[:n_pos]:
        if name in kwargs:
            raise TypeError(
                f"serialize_args: argument {name!r} is given both positionally and by keyword"
            )
    named = args_names[n_pos:]
    for name in named:
        if name in kwargs:
            _serialize_into(flat, kwargs[name], name, schema)
        else:
            flat.append(None)  # the parameter keeps its default; deserialize_args_kwargs skips it
    known = set(args_names)
    for key, value in kwargs.items():
        if not isinstance(key, str):
            raise TypeError(f"serialize_args: keyword argument names must be str, got {key!r}")
        if key in known:
            continue
        _serialize_into(flat, value, key, schema)
    return tuple(flat), {}


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
        # The general route. The where-strings of error messages are only formatted on error.
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


def deserialize_args(
    res: list[Tensor],
    expected_types: list[str],
    clone: bool = False,
    return_n_args: bool = False,
) -> tuple[Any, ...]:
    """Rebuild the Python objects a custom operator received or returned as a flat list.

    Accepts ``res`` (the flat list or tuple of tensors, scalars and ``None``; a group of items may
    also come packed as one list, as an operator returning ``Tensor[]`` gives it; or a single tensor),
    ``expected_types`` (one type-info string per object, as :func:`type_as_str_with_info` wrote them;
    ``None`` stands for ``"None"``), ``clone`` (clone every tensor) and ``return_n_args``.
    Returns the tuple of rebuilt objects; the tensor itself when ``res`` is a tensor and
    ``expected_types == ["Tensor"]``; with ``return_n_args=True``, ``(objects, n_items_consumed)``
    and ``res`` may hold more items. Otherwise every item must be consumed (one trailing empty list,
    an empty ``**kwargs``, is allowed).
    Raises ``TypeError``/``ValueError`` naming the position on any mismatch between ``res`` and
    ``expected_types``, :class:`~piece_by_piece_serialize.errors.TreeSpecNameError` on a malformed
    type-info string.
    """
    if _Tensor is None:
        _setup()
    if not isinstance(expected_types, (list, tuple)):
        raise TypeError(f"deserialize_args: expected_types must be a list of str, got {type(expected_types).__name__}")
    if isinstance(res, _Tensor):
        if len(expected_types) != 1 or not isinstance(_type_info(expected_types[0], "expected_types[0]"), TensorInfo):
            raise ValueError(
                f"deserialize_args: res is a single tensor but expected_types={list(expected_types)!r}"
            )
        out = res.clone() if clone else res
        return (out, 1) if return_n_args else out
    if not isinstance(res, (list, tuple)):
        raise TypeError(f"deserialize_args: res must be a list or tuple, got {type(res).__name__}")
    des: list[Any] = []
    pos = _deserialize_into(des, res, expected_types, clone, 0, "expected_types")
    if return_n_args:
        return tuple(des), pos
    if pos != len(res) and not (pos == len(res) - 1 and _is_empty_marker(res[-1])):
        raise ValueError(
            f"deserialize_args: expected_types={list(map(str, expected_types))!r} describe {pos} items "
            f"but res has {len(res)}"
        )
    return tuple(des)


def deserialize_args_kwargs(
    args: list[Tensor],
    kwargs: dict[str, Any],
    expected_types: tuple[list[str], list[str]],
    clone: bool = False,
    ordered_names: list[str] | None = None,
    fill_kwargs: bool = False,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Rebuild ``(args, kwargs)`` from the flat list :func:`serialize_args` produced.

    Accepts ``args`` (the flat list), ``kwargs`` (must be empty: operator inputs are positional),
    ``expected_types`` (a pair: the type-info strings of the positional arguments, and a dict mapping
    each keyword argument's name to its type-info string, in the order they were passed), ``clone``,
    ``ordered_names`` (the parameter names in order, required when keyword arguments are expected) and
    ``fill_kwargs`` (the flat list ends with one empty list standing for an empty ``**kwargs``).
    After the positional arguments, each name of ``ordered_names[len(positional):]`` is read in order:
    its value when it is in the keyword dict, else the ``None`` placeholder ``serialize_args`` wrote
    (the name is left out so that its default applies); the keyword arguments that are not in
    ``ordered_names`` (``**kwargs``) follow in their order.
    Returns ``(args_tuple, kwargs_dict)``.
    Raises ``TypeError``/``ValueError`` naming the argument on any mismatch.
    """
    if _Tensor is None:
        _setup()
    if kwargs:
        raise ValueError(
            f"deserialize_args_kwargs: operator inputs are positional, kwargs must be empty, got "
            f"{sorted(map(str, kwargs))}"
        )
    if not isinstance(expected_types, tuple) or len(expected_types) != 2:
        raise TypeError(
            "deserialize_args_kwargs: expected_types must be a pair (positional types, keyword types), "
            f"got {type(expected_types).__name__}"
        )
    # wider than the annotation says: a mapping, or None or an empty list for no keyword types (checked below)
    kw_types: Mapping[str, Any] | list[Any] | tuple[Any, ...] | None
    pos_types, kw_types = expected_types
    if not isinstance(pos_types, (list, tuple)):
        raise TypeError(f"deserialize_args_kwargs: expected_types[0] must be a list, got {type(pos_types).__name__}")
    if kw_types is None:
        kw_types = {}
    if not isinstance(kw_types, Mapping):
        if isinstance(kw_types, (list, tuple)) and not kw_types:
            kw_types = {}
        else:
            raise TypeError(
                "deserialize_args_kwargs: expected_types[1] must map keyword names to type-info strings, "
                f"got {type(kw_types).__name__}"
            )
    if isinstance(args, _Tensor):
        args = [args]
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"deserialize_args_kwargs: args must be a list or tuple, got {type(args).__name__}")
    if fill_kwargs and not (args and _is_empty_marker(args[-1])):
        raise ValueError("deserialize_args_kwargs: fill_kwargs=True but args does not end with an empty list")
    n_flat = len(args) - (1 if fill_kwargs else 0)

    des: list[Any] = []
    pos = _deserialize_into(des, args, pos_types, clone, 0, "expected_types[0]")
    new_kwargs: dict[str, Any] = {}
    if kw_types:
        if ordered_names is None:
            raise ValueError(
                f"deserialize_args_kwargs: keyword arguments {list(kw_types)} need ordered_names"
            )
        names = list(ordered_names)
        known = set(names)
        for name in names[: len(pos_types)]:
            if name in kw_types:
                raise TypeError(
                    f"deserialize_args_kwargs: argument {name!r} is given both positionally and by keyword"
                )
        for name in names[len(pos_types) :]:
            if name in kw_types:
                one: list[Any] = []
                # kw_types is a Mapping here (the checks above raised otherwise); mypy keeps the annotation's list
                pos = _deserialize_into(one, args, [kw_types[name]], clone, pos, f"expected_types[1][{name!r}]")  # type: ignore[call-overload]
                new_kwargs[name] = one[0]
            else:
                if pos >= n_flat:
                    raise ValueError(
                        f"deserialize_args_kwargs: parameter {name!r} needs its None placeholder at "
                        f"args[{pos}] but args has only {n_flat} items"
                    )
                if args[pos] is not None:
                    raise ValueError(
                        f"deserialize_args_kwargs: parameter {name!r} was not passed, args[{pos}] should be "
                        f"its None placeholder, got a {type(args[pos]).__name__}"
                    )
                pos += 1
        for name, tt in kw_types.items():
            if name in known:
                continue
            one = []
            pos = _deserialize_into(one, args, [tt], clone, pos, f"expected_types[1][{name!r}]")
            new_kwargs[name] = one[0]
        # The flat list holds named parameters first; give the kwargs back in the order they were passed.
        new_kwargs = {name: new_kwargs[name] for name in kw_types}
    if pos != n_flat and not (not fill_kwargs and pos == len(args) - 1 and _is_empty_marker(args[-1])):
        raise ValueError(
            f"deserialize_args_kwargs: expected_types describe {pos} items but args has {n_flat}"
            + (" (plus the empty **kwargs list)" if fill_kwargs else "")
        )
    return tuple(des), new_kwargs


def make_copy(obj: Any) -> Any:
    """A deep copy in which every tensor is cloned and every container keeps its exact type.

    Accepts any value. Returns tensors cloned; ``tuple``, ``list``, ``dict``, ``OrderedDict``,
    ``defaultdict`` (same factory), ``deque`` (same ``maxlen``), namedtuples, ``torch.return_types``
    and ``torch.Size`` rebuilt with copied items; numpy arrays copied; transformers ``DynamicCache`` /
    ``EncoderDecoderCache`` copied layer by layer (same layer kinds and windows); anything else
    through :func:`copy.deepcopy`.
    Raises ``TypeError`` naming the type when ``copy.deepcopy`` fails on a value.
    """
    if _Tensor is None:
        _setup()
    return _copy(obj)


def _copy(obj: Any) -> Any:
    if isinstance(obj, _Tensor):
        return obj.clone()
    cls = type(obj)
    if obj is None or cls in (bool, int, float, str, bytes, complex):
        return obj
    if cls is list:
        return [_copy(x) for x in obj]
    if cls is tuple:
        return tuple(_copy(x) for x in obj)
    if cls is dict:
        return {k: _copy(v) for k, v in obj.items()}
    if cls is collections.OrderedDict:
        return collections.OrderedDict((k, _copy(v)) for k, v in obj.items())
    if cls is collections.defaultdict:
        new: Any = collections.defaultdict(obj.default_factory)
        for k, v in obj.items():
            new[k] = _copy(v)
        return new
    if cls is collections.deque:
        return collections.deque((_copy(x) for x in obj), maxlen=obj.maxlen)
    if isinstance(obj, tuple):
        if hasattr(cls, "_fields"):  # namedtuple and typing.NamedTuple
            return cls(*(_copy(x) for x in obj))
        if hasattr(cls, "n_sequence_fields") or cls is _Size:
            return cls([_copy(x) for x in obj])  # torch.return_types.* (structseq) and torch.Size
    if _caches.is_cache(obj) and type(obj) in _caches.SUPPORTED:
        return _caches.copy_cache(obj, _copy)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return obj.copy()
    try:
        return copy.deepcopy(obj)
    except Exception as err:  # deepcopy raises whatever the object's hooks raise
        raise TypeError(
            f"make_copy: cannot copy a {cls.__module__}.{cls.__qualname__}: copy.deepcopy failed with "
            f"{type(err).__name__}: {err}"
        ) from err


def choose_kwargs_for_dynamic_shapes(
    ds_args: tuple[dict[int, Any], ...],
    ds_kwargs: dict[str, dict[int, Any]],
    forward_names: list[str],
) -> dict[str, dict[int, Any]]:
    """Express dynamic shapes as one keyword dict when a module is called with both kinds of arguments.

    Accepts ``ds_args`` (the dynamic shapes of the positional arguments, in order), ``ds_kwargs``
    (those of the keyword arguments) and ``forward_names`` (the ``forward`` parameter names in order).
    Returns a new dict: ``forward_names[i] -> ds_args[i]`` for each positional argument, then the
    entries of ``ds_kwargs``; the inputs are not modified.
    Raises ``TypeError`` for inputs of the wrong type or an argument given both ways, ``ValueError``
    when there are more positional shapes than names (``*args``).
    """
    if not isinstance(ds_args, (tuple, list)):
        raise TypeError(f"choose_kwargs_for_dynamic_shapes: ds_args must be a tuple, got {type(ds_args).__name__}")
    if not isinstance(ds_kwargs, dict):
        raise TypeError(
            f"choose_kwargs_for_dynamic_shapes: ds_kwargs must be a dict, got {type(ds_kwargs).__name__}"
        )
    if not isinstance(forward_names, (list, tuple)) or not all(isinstance(n, str) for n in forward_names):
        raise TypeError("choose_kwargs_for_dynamic_shapes: forward_names must be a list of str")
    if len(ds_args) > len(forward_names):
        raise ValueError(
            f"choose_kwargs_for_dynamic_shapes: {len(ds_args)} positional dynamic shapes but only "
            f"{len(forward_names)} forward parameter names {list(forward_names)} (*args is not supported)"
        )
    merged: dict[str, dict[int, Any]] = {}
    for name, ds in zip(forward_names, ds_args, strict=False):  # there may be more names than positional shapes
        if name in ds_kwargs:
            raise TypeError(
                f"choose_kwargs_for_dynamic_shapes: argument {name!r} has dynamic shapes both "
                "positionally and by keyword"
            )
        merged[name] = ds
    merged.update(ds_kwargs)
    return merged
