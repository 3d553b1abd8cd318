"""The layer adapters' common ground: the base class, the item checks, count tensors, the bound torch names.

An adapter binds a layer kind letter of :mod:`._cache_kinds` to a class and knows three things about its
objects: :meth:`~LayerAdapter.describe` reads a layer into a :class:`~.type_info.LayerInfo` (what the
type-info string says), :meth:`~LayerAdapter.flatten` appends its items to the flat list (in the order of
``LayerInfo.item_names()``), and :meth:`~LayerAdapter.build` makes a new layer of the same class from a
``LayerInfo`` and those items, attribute by attribute. The adapters themselves are grouped by family:
attention layers in :mod:`._cache_attention`, linear-attention, hybrid and dummy layers in
:mod:`._cache_linear`, the quantized ones in :mod:`._cache_quantized`; :mod:`._layer_adapters` maps each
kind letter to its adapter class.

This module imports only :mod:`..type_info`; the family modules import it, never the other way round.

Invariants:

* ``build(describe(layer), flatten(layer))`` has exactly the instance attributes of ``layer``, with equal
  values and the very same tensor objects (items are never copied here; the caller clones when asked);
* every instance attribute an adapter meets is in its :attr:`~LayerAdapter.attributes`: carried in the
  string, carried as an item, or derived (Note [derived attributes]); a layer with any other attribute, or
  whose derived attributes disagree with what it holds, is refused with a ``TypeError`` that names the
  attribute, never flattened without it (``tests/serialize/test_cache_state.py`` checks the attribute sets
  against every class of ``transformers.cache_utils``);
* ``build`` checks every item (kind, rank, shape against the number in the string) and raises
  ``TypeError``/``ValueError`` naming the layer and the item; it never returns a half-built layer.

Note [derived attributes]
~~~~~~~~~~~~~~~~~~~~~~~~~
Some attributes are functions of others, and are recomputed instead of carried: ``device`` of an attention
layer is its keys' device, ``batch_size``, ``num_heads``, ``k_head_dim`` and ``v_head_dim`` of a static
layer are its keys' and values' dimensions, ``_sliding_window_tensor`` is ``sliding_window`` as a long
tensor on the layer's device, ``indexer_dtype``/``indexer_device`` are the indexer keys' ones, and the
``device``/``dtype`` of a linear-attention layer are those of its first conv state (or its keys' device for
the layers that also hold attention). transformers sets them that way in ``lazy_initialization``;
:meth:`~LayerAdapter.describe` checks that they still agree and refuses the layer by name when they do not
(a layer offloaded to another device than its tensors' is one). Attributes that transformers leaves behind
on a layer that holds no tensors (the ``device`` of a reset layer) are overwritten by the next
``lazy_initialization`` before anything reads them; a rebuilt empty layer does not carry them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..type_info import LayerInfo
from ..type_info._cache_kinds import LayerKind

# torch, bound by bind() when transformers is first seen (it imported torch)
_torch: Any = None
_Tensor: Any = None
_SymInt: Any = None
_new = object.__new__


def bind_torch(torch: Any) -> None:
    global _torch, _Tensor, _SymInt
    _torch, _SymInt, _Tensor = torch, torch.SymInt, torch.Tensor


_MISSING = object()


class Refused(TypeError):
    """A layer or cache holds state this library cannot carry; the message names it."""


# --------------------------------------------------------------------------------------------------
# item checks (build side): every message names the layer and the item


def _is_int(x: Any) -> bool:
    return (type(x) is int) or isinstance(x, _SymInt) or (isinstance(x, int) and not isinstance(x, bool))


def check_tensor(x: Any, what: str) -> Any:
    if not isinstance(x, _Tensor):
        raise TypeError(f"item {what} must be a tensor, got a {type(x).__name__}")
    return x


def check_position(x: Any, what: str) -> Any:
    """A position counter kept as a tensor (a static layer's cumulative_length): a 0-d integer tensor."""
    check_tensor(x, what)
    if x.dim() != 0 or x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == _torch.bool:
        raise ValueError(f"item {what} must be a 0-d integer tensor, got {x.dtype} of shape {tuple(x.shape)}")
    return x


def check_kv(x: Any, what: str) -> Any:
    # transformers reads the sequence length of a layer as keys.shape[-2]: a key or value tensor of rank
    # below 2 would fail later, inside transformers, with an IndexError that names nothing. The one rank-1
    # tensor a layer holds is the empty placeholder lazy_initialization makes before the first update.
    check_tensor(x, what)
    if x.dim() < 2 and not (x.dim() == 1 and x.numel() == 0):
        raise ValueError(
            f"item {what} has shape {tuple(x.shape)}; the key and value tensors of a cache layer need rank >= 2 "
            "(..., seq_len, head_dim)"
        )
    return x


def check_int(x: Any, what: str) -> Any:
    if isinstance(x, bool) or not _is_int(x):
        raise TypeError(f"item {what} must be a Python int, got a {type(x).__name__}")
    return x


# Note [count tensors]
# ~~~~~~~~~~~~~~~~~~~~
# A count that grows with every token (see Note [varying scalars] in _cache_kinds.py) travels in the flat list
# as the length of an empty tensor: n is carried by torch.empty((n, 0)), which holds no data. The flat list of a
# cache is then made of tensors only, so any operator taking Tensor[] carries it, and under torch.export the
# count is read back as a size (a SymInt tied to the others) instead of a value, which tracing cannot read.
# Count tensors of a plain int are shared per value (they hold nothing anyone could write); one of a SymInt
# (a rebuilt cache under tracing) is made anew.

_COUNTS: dict[int, Any] = {}


def count_item(n: Any) -> Any:
    """The count tensor of ``n`` (Note [count tensors])."""
    if type(n) is int:
        t = _COUNTS.get(n)
        if t is None:
            if len(_COUNTS) >= 4096:
                _COUNTS.clear()
            t = _COUNTS[n] = _torch.empty((n, 0), dtype=_torch.int8)
        return t
    return _torch.empty((n, 0), dtype=_torch.int8)


def check_optional_tensor(x: Any, what: str) -> Any:
    """A registered tensor attribute that may be ``None`` (carried as a ``None`` item)."""
    return None if x is None else check_tensor(x, what)


def list_length(state: dict[str, Any], names: tuple[str, ...], what: str) -> int:
    """The common length of a cache's registered list attributes (``register_cache_class(lists=...)``), each
    entry a tensor or an empty entry (``None`` or ``[]``, as MiniMaxCache keeps for its attention layers)."""
    lengths = set()
    for name in names:
        value = state.get(name)
        if type(value) is not list:
            raise Refused(f"{what}: {name} is a {type(value).__name__}, not a list")
        for i, entry in enumerate(value):
            if not (isinstance(entry, _Tensor) or entry is None or (type(entry) is list and not entry)):
                raise Refused(f"{what}: {name}[{i}] is a {type(entry).__name__}, neither a tensor nor an empty entry (None or [])")
        lengths.add(len(value))
    if len(lengths) > 1:
        raise Refused(f"{what}: the registered lists {', '.join(names)} have different lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def flatten_lists(cache: Any, names: tuple[str, ...], out: list[Any]) -> None:
    """The items of the registered lists, list by list: each entry's tensor, or ``None`` for an empty entry."""
    tensor = _Tensor
    for name in names:
        out.extend(entry if isinstance(entry, tensor) else None for entry in getattr(cache, name))


def build_lists(cache: Any, names: tuple[str, ...], placeholders: dict[str, Any], n: int, items: Iterator[Any], what: str) -> None:
    """Set the registered lists of a rebuilt cache from ``n`` items each; an empty entry becomes the registered
    placeholder (``placeholders[name]()``, or ``None``)."""
    for name in names:
        make = placeholders.get(name)
        entries = []
        for i in range(n):
            try:
                item = check_optional_tensor(next(items), f"{name}[{i}]")
            except TypeError as err:
                raise TypeError(f"{what} {err}") from None
            entries.append(item if item is not None else make() if make is not None else None)
        setattr(cache, name, entries)


def is_count(n: Any) -> bool:
    """A count a layer may hold: a non-negative int, or under tracing the SymInt a count tensor's length gave
    (Note [count tensors])."""
    return (type(n) is int and n >= 0) or isinstance(n, _SymInt)


def check_count(x: Any, what: str) -> Any:
    """The count a count tensor carries; a clear error for anything else."""
    if not isinstance(x, _Tensor) or x.dim() != 2 or x.shape[1] != 0:
        got = f"shape {tuple(x.shape)}" if isinstance(x, _Tensor) else f"a {type(x).__name__}"
        raise TypeError(f"item {what} must be a count tensor torch.empty((n, 0)) carrying the count n, got {got}")
    return x.shape[0]


def _check_static_kv(keys: Any, values: Any, max_cache_len: int, what: str = "") -> None:
    for name, x in (("keys", keys), ("values", values)):
        check_tensor(x, name)
        if x.dim() != 4:
            raise ValueError(f"item {name} has shape {tuple(x.shape)}; a static layer holds rank-4 tensors")
    if keys.shape[2] != max_cache_len or values.shape[2] != max_cache_len:
        raise ValueError(
            f"keys {tuple(keys.shape)} and values {tuple(values.shape)} must hold max_cache_len="
            f"{max_cache_len} positions (dimension 2)"
        )
    if keys.shape[:2] != values.shape[:2]:
        raise ValueError(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} differ in batch or heads")


# --------------------------------------------------------------------------------------------------
# describe-side helpers


def _refuse(where: str, msg: str) -> Refused:
    return Refused(f"{where}: {msg}; this state cannot be carried, the layer is refused rather than rebuilt without it")


def _check_attributes(layer: Any, allowed: frozenset[str], where: str) -> dict[str, Any]:
    state: dict[str, Any] = vars(layer)
    if not state.keys() <= allowed:
        extra = sorted(set(state) - allowed)
        raise Refused(
            f"{where} has attribute{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} that this "
            f"library does not know how to carry (a transformers version newer than this library, or a patched "
            "class); register the class with piece_by_piece_serialize.register_cache_layer_class, naming its extra "
            "state, or report it"
        )
    return state


def _same_device(a: object, b: object) -> bool:
    return a == b


# --------------------------------------------------------------------------------------------------
# the adapters


_Take = Callable[[], Any]  # the next item of the layer, in item_names() order


class LayerAdapter:
    """Base class: one layer class and its kind letter; subclasses fill in the three operations."""

    #: every instance attribute the adapter accounts for (carried, derived, or left behind when empty)
    attributes: frozenset[str] = frozenset()
    #: attributes of a registered subclass carried as extra items, after the built-in ones; those in
    #: ``extra_counts`` are ints carried as count tensors, the others tensors
    extra: tuple[str, ...] = ()
    extra_counts: frozenset[str] = frozenset()
    #: the order in which transformers' constructor and lazy_initialization create the attributes; a rebuilt
    #: layer's ``vars()`` lists them in the same order
    order: tuple[str, ...] = ()

    def __init__(self, kind: LayerKind, cls: type) -> None:
        self.kind = kind
        self.code = kind.code
        self.cls = cls
        self.attributes = type(self).attributes | frozenset(self.extra)
        self.order = type(self).order

    def where(self, index: int | None) -> str:
        return f"layer {index} ({self.cls.__qualname__})" if index is not None else self.cls.__qualname__

    # -- to be provided
    def describe(self, layer: Any, where: str) -> LayerInfo:
        raise NotImplementedError

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        raise NotImplementedError

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        raise NotImplementedError

    # -- shared
    def build(self, info: LayerInfo, items: Iterator[Any], what: str) -> Any:
        state: dict[str, Any] = {}
        take = items.__next__
        self.fill(state, info, take, what)
        for name in self.extra:  # after everything else, as LayerInfo.item_names() lists them
            item = take()
            state[name] = check_count(item, name) if name in self.extra_counts else check_tensor(item, name)
        obj: object = _new(self.cls)
        target = obj.__dict__
        for name in self.order:
            if name in state:
                target[name] = state[name]
        return obj

    def flatten_extra(self, layer: Any, out: list[Any]) -> None:
        for name in self.extra:
            value = getattr(layer, name)
            out.append(count_item(value) if name in self.extra_counts else value)

    def check(self, layer: Any, where: str) -> dict[str, Any]:
        state = _check_attributes(layer, self.attributes, where)
        for name in self.extra:
            value = state.get(name, _MISSING)
            if value is _MISSING:
                raise _refuse(where, f"registered extra attribute {name!r} is missing")
            if name in self.extra_counts:
                if not is_count(value):
                    raise _refuse(where, f"registered count {name!r} is {value!r}, not a non-negative int")
            elif not isinstance(value, _Tensor):
                raise _refuse(where, f"registered tensor {name!r} is a {type(value).__name__}")
        return state
