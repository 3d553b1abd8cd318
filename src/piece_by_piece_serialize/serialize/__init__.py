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

Layout and imports: the public functions are defined here; :mod:`._flatten` holds the flattening helpers
(:func:`_kind`, the compact-key rule), :mod:`._rebuild` the rebuild (steps and general route), :mod:`._copy`
the copy, and :mod:`._caches` with its layer modules the transformers caches. The package may import
:mod:`..errors`, :mod:`..schema`, :mod:`..treespec_name` and :mod:`..type_info`, never the custom-op layer
or the CLI above it; torch and transformers are imported on first use only, torch through
:mod:`.._optional`, which says how to install it when it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._optional import import_torch
from ..type_info import CacheLeaf, TensorDictInfo, TensorInfo, TreeSpecInfo, TreeWithCachesInfo
from . import _caches, _copy, _flatten, _kv_sharing, _rebuild
from ._copy import _copy as _copy_value
from ._flatten import (
    _K_CACHE,
    _K_DICT,
    _K_LIST,
    _K_NONE,
    _K_SCALAR,
    _K_SHARED,
    _K_TENSOR,
    OpaqueLeafError,
    _argument,
    _compact_key,
    _expand_caches,
    _extend,
    _flatten_tree,
    _kind,
    _scalar_name,
)
from ._rebuild import _deserialize_into, _is_empty_marker, _type_info

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
    "OpaqueLeafError",
    "serialize_args",
    "serialize_one",
    "tree_spec_as_name",
    "tree_spec_from_name",
    "type_as_str_with_info",
]


# torch, bound on first use (see _setup) so that importing this package stays cheap; each submodule binds
# its own names in its own _setup, so that its functions read them as one global lookup.
_Tensor: Any = None


def _setup() -> None:
    global _Tensor
    # the one place a missing torch is reported for the whole serializer (the submodules import it after this)
    torch = import_torch("piece_by_piece_serialize.serialize (serialize_args, deserialize_args, ...)")
    _flatten._setup()
    _rebuild._setup()
    _copy._setup()
    _Tensor = torch.Tensor  # set last: the public functions test it to know whether setup ran



def __getattr__(name: str) -> Any:
    # Re-exported from their own modules, loaded on first access like the package's top level.
    if name == "extract_names_from_schema":
        from ..schema import extract_names_from_schema

        return extract_names_from_schema
    if name in ("tree_spec_as_name", "tree_spec_from_name"):
        from .. import treespec_name

        return getattr(treespec_name, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    if kind == _K_SHARED:
        _kv_sharing.describe(obj, _argument(name, schema))
        return _kv_sharing.flatten(obj)
    leaves, _, caches = _flatten_tree(obj, _argument(name, schema))
    return _expand_caches(leaves, caches, _argument(name, schema)) if caches else leaves



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
    if kind == _K_SHARED:
        return str(_kv_sharing.describe(obj, "value"))
    from ..treespec_name import tree_spec_as_name

    leaves, spec, caches = _flatten_tree(obj)
    name = tree_spec_as_name(spec, len(leaves))
    if not caches:
        return name
    tree = TreeSpecInfo(name, len(leaves), spec)
    described = tuple(CacheLeaf(i, _caches.describe(leaves[i], f"value, pytree leaf {i}")) for i in caches)
    return str(TreeWithCachesInfo(described, tree))



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

    Accepts ``args`` (a tuple or list of positional arguments), ``kwargs`` (``None``, or a dict of keyword
    arguments), ``schema`` (the operator's schema, used for parameter names when ``args_names`` is not given;
    may be ``None``) and ``args_names`` (the ordered parameter names).
    Returns, with ``kwargs=None``: the flat tuple; with ``kwargs={}``: ``(flat_tuple, {})``; otherwise
    ``(flat_tuple, {})`` where, after the positional arguments, every named parameter is filled in order
    (``None`` when not passed) and the remaining keyword arguments (``**kwargs``) follow in their order. Each
    argument is flattened by :func:`serialize_one`.
    A bare tensor as ``args`` is kept as the original module kept it: ``serialize_args(x, None, schema)`` returns
    ``x`` itself, ``serialize_args(x, {}, schema)`` returns ``(x, {})``, and with keyword arguments ``x`` is the
    one positional argument. (Beware ``op(*serialize_args(x, None, schema))``: star-unpacking a tensor gives its
    rows; write ``(x,)`` for a tuple.)
    Raises ``TypeError`` for arguments of the wrong type or passed twice, and :class:`OpaqueLeafError` (a ``TypeError``) for an object pytree does not
    open (a dataclass not registered with ``torch.utils._pytree.register_dataclass``, a set, an object of your
    own class); ``ValueError`` when keyword arguments are given without any way to know the parameter order.
    """
    if _Tensor is None:
        _setup()
    if isinstance(args, _Tensor) and (kwargs is None or kwargs == {}):  # the original's answer, its tests assert it
        return args if kwargs is None else (args, {})  # the tensor itself, as documented
    if type(args) is tuple or type(args) is list:  # type: ignore[comparison-overlap]  # a list too, as the docstring says
        positional: Sequence[Any] = args
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
            return tuple(flat)
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
    pos_types, kw_types = _expected_pair(kwargs, expected_types)
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
                pos = _deserialize_into(one, args, [kw_types[name]], clone, pos, f"expected_types[1][{name!r}]")
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


def _expected_pair(kwargs: Any, expected_types: Any) -> tuple[Sequence[Any], Mapping[str, Any]]:
    """``deserialize_args_kwargs``'s argument checks: the positional types and the keyword mapping, or raise."""
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
    return pos_types, kw_types




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
    return _copy_value(obj)


def shared_copies() -> _copy.SharedCopies:
    """For the packages above: a maker of copies like :func:`make_copy`'s that share the clone of a tensor
    unchanged since an earlier copy made through it (Note [shared copies] in :mod:`._copy`). Not public."""
    if _Tensor is None:
        _setup()
    return _copy.SharedCopies()




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
