"""One adapter per transformers cache layer class: what it holds, how it is described, flattened and rebuilt.

An adapter binds a layer kind letter of :mod:`._cache_kinds` to a class and knows three things about its
objects: :meth:`~LayerAdapter.describe` reads a layer into a :class:`~.type_info.LayerInfo` (what the
type-info string says), :meth:`~LayerAdapter.flatten` appends its items to the flat list (in the order of
``LayerInfo.item_names()``), and :meth:`~LayerAdapter.build` makes a new layer of the same class from a
``LayerInfo`` and those items, attribute by attribute.

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

from ..type_info import LayerInfo, LinearState
from ..type_info._cache_kinds import LayerKind, layer_kind

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
                if type(value) is not int or value < 0:
                    raise _refuse(where, f"registered count {name!r} is {value!r}, not a non-negative int")
            elif not isinstance(value, _Tensor):
                raise _refuse(where, f"registered tensor {name!r} is a {type(value).__name__}")
        return state


class DynamicAdapter(LayerAdapter):
    """``DynamicLayer``: keys and values grow by concatenation; ``D`` / ``d``."""

    attributes: frozenset[str] = frozenset({"keys", "values", "is_initialized", "device"})
    order: tuple[str, ...] = ("keys", "values", "is_initialized", "device")

    def attention_describe(self, state: dict[str, Any], where: str) -> bool:
        populated = state.get("is_initialized")
        if populated is True:
            keys, values = state.get("keys"), state.get("values")
            if not isinstance(keys, _Tensor) or not isinstance(values, _Tensor):
                raise _refuse(where, "is_initialized is True but keys/values are not tensors")
            if "device" in state and not _same_device(state["device"], keys.device):
                raise _refuse(where, f"device is {state['device']} while its keys are on {keys.device} (offloaded)")
            return True
        if populated is False:
            if state.get("keys") is not None or state.get("values") is not None:
                raise _refuse(where, "is_initialized is False but it holds keys/values")
            return False
        raise _refuse(where, f"is_initialized is {populated!r}")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        return LayerInfo(self.code, self.attention_describe(state, where))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        self.flatten_extra(layer, out)

    def attention_fill(self, obj: Any, populated: bool, take: _Take, what: str) -> None:
        if populated:
            keys = check_kv(take(), "keys")
            obj["keys"] = keys
            obj["values"] = check_kv(take(), "values")
            obj["is_initialized"] = True
            obj["device"] = keys.device
        else:
            obj["keys"] = None
            obj["values"] = None
            obj["is_initialized"] = False

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.attention_fill(obj, info.populated, take, what)


class SlidingAdapter(DynamicAdapter):
    """``DynamicSlidingWindowLayer``: ``S<window>[r]``, items keys, values and ``cumulative_length``.

    The legacy spelling ``W<window>`` (written before cumulative_length was carried) is read with
    cumulative_length equal to the stored length, as it was then.
    """

    attributes = DynamicAdapter.attributes | {"sliding_window", "cumulative_length", "_sliding_window_tensor", "record_past"}
    order = ("keys", "values", "is_initialized", "sliding_window", "cumulative_length", "_sliding_window_tensor", "record_past", "device")

    def attention_describe_sliding(self, state: dict[str, Any], where: str) -> tuple[bool, int, bool]:
        populated = self.attention_describe(state, where)
        window = state.get("sliding_window")
        if type(window) is not int or window < 1:
            raise _refuse(where, f"sliding_window is {window!r}, not a positive int")
        count = state.get("cumulative_length")
        if type(count) is not int or count < 0:
            raise _refuse(where, f"cumulative_length is {count!r}, not a non-negative int")
        if not populated and count != 0:
            raise _refuse(where, f"it holds no tensors but cumulative_length is {count}")
        record = state.get("record_past")
        if type(record) is not bool:
            raise _refuse(where, f"record_past is {record!r}")
        tensor = state.get("_sliding_window_tensor")
        if not isinstance(tensor, _Tensor) or tensor.dim() != 0 or tensor.dtype != _torch.long or int(tensor) != window:
            raise _refuse(where, "_sliding_window_tensor is not sliding_window as a long scalar tensor")
        if populated and not _same_device(tensor.device, state["keys"].device):
            raise _refuse(where, f"_sliding_window_tensor is on {tensor.device}, its keys on {state['keys'].device}")
        return populated, window, record

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, window, record = self.attention_describe_sliding(state, where)
        return LayerInfo(self.code, populated, window, (("r", None),) if record else ())

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            out.append(count_item(layer.cumulative_length))
        self.flatten_extra(layer, out)

    def sliding_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        populated = info.populated
        self.attention_fill(obj, populated, take, what)
        window = info.number
        obj["sliding_window"] = window
        if not populated:
            obj["cumulative_length"] = 0
            device = None
        elif info.kind == "W":  # legacy: the count was not carried
            obj["cumulative_length"] = obj["keys"].shape[-2]
            device = obj["device"]
        else:
            obj["cumulative_length"] = check_count(take(), "cumulative_length")
            device = obj["device"]
        obj["_sliding_window_tensor"] = window_tensor(window, device)  # type: ignore[arg-type]  # a sliding kind always has its window
        obj["record_past"] = info.flag("r")

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.sliding_fill(obj, info, take, what)


_WINDOWS: dict[tuple[int, Any], Any] = {}


def window_tensor(window: int, device: Any) -> Any:
    """``torch.tensor(window, dtype=torch.long)`` on ``device`` (CPU when ``None``), shared.

    transformers only reads this tensor (and moves it with ``.to``, which makes a new one), so rebuilt
    layers share one per window and device instead of allocating one each per forward call.
    """
    key = (window, device)
    t = _WINDOWS.get(key)
    if t is None:
        if len(_WINDOWS) >= 256:
            _WINDOWS.clear()
        t = _WINDOWS[key] = _torch.tensor(window, dtype=_torch.long, device=device)
    return t


class IndexedAdapter(DynamicAdapter):
    """``DynamicIndexedLayer``: ``I[x][p]``; indexer keys and positions as extra items."""

    attributes = DynamicAdapter.attributes | {
        "indexer_keys",
        "indexer_position_ids",
        "is_indexer_initialized",
        "indexer_dtype",
        "indexer_device",
    }
    order: tuple[str, ...] = (
        "keys",
        "values",
        "is_initialized",
        "indexer_keys",
        "indexer_position_ids",
        "is_indexer_initialized",
        "device",
        "indexer_dtype",
        "indexer_device",
    )
    _static = False

    def indexer_describe(self, state: dict[str, Any], where: str) -> list[tuple[str, None]]:
        params: list[tuple[str, None]] = []
        init = state.get("is_indexer_initialized")
        keys = state.get("indexer_keys")
        if init is True:
            if not isinstance(keys, _Tensor):
                raise _refuse(where, "is_indexer_initialized is True but indexer_keys is not a tensor")
            if state.get("indexer_dtype") != keys.dtype or not _same_device(state.get("indexer_device"), keys.device):
                raise _refuse(where, "indexer_dtype/indexer_device differ from its indexer keys'")
            if self._static and not isinstance(state.get("indexer_cumulative_length"), _Tensor):
                raise _refuse(where, "indexer_cumulative_length is not a tensor")
            params.append(("x", None))
        elif init is False:
            if keys is not None or (self._static and state.get("indexer_cumulative_length") is not None):
                raise _refuse(where, "is_indexer_initialized is False but it holds indexer keys")
        else:
            raise _refuse(where, f"is_indexer_initialized is {init!r}")
        positions = state.get("indexer_position_ids")
        if positions is not None:
            if not isinstance(positions, _Tensor):
                raise _refuse(where, f"indexer_position_ids is a {type(positions).__name__}")
            params.append(("p", None))
        return params

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated = self.attention_describe(state, where)
        return LayerInfo(self.code, populated, None, tuple(self.indexer_describe(state, where)))

    def flatten_indexer(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.flag("x"):
            out.append(layer.indexer_keys)
            if self._static:
                out.append(layer.indexer_cumulative_length)
        if info.flag("p"):
            out.append(layer.indexer_position_ids)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        self.flatten_indexer(layer, info, out)
        self.flatten_extra(layer, out)

    def indexer_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        if info.flag("x"):
            keys = check_tensor(take(), "indexer_keys")
            obj["indexer_keys"] = keys
            if self._static:
                obj["indexer_cumulative_length"] = check_position(take(), "indexer_cumulative_length")
            obj["is_indexer_initialized"] = True
            obj["indexer_dtype"], obj["indexer_device"] = keys.dtype, keys.device
        else:
            obj["indexer_keys"] = None
            if self._static:
                obj["indexer_cumulative_length"] = None
            obj["is_indexer_initialized"] = False
        obj["indexer_position_ids"] = check_tensor(take(), "indexer_position_ids") if info.flag("p") else None

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.attention_fill(obj, info.populated, take, what)
        self.indexer_fill(obj, info, take, what)


class StaticAdapter(LayerAdapter):
    """``StaticLayer``: ``T<max_cache_len>`` / ``t<max_cache_len>``; keys, values, ``cumulative_length`` tensor."""

    attributes = frozenset(
        {"keys", "values", "is_initialized", "max_cache_len", "cumulative_length", "device", "batch_size", "num_heads", "k_head_dim", "v_head_dim"}
    )
    _shape_attrs = ("device", "batch_size", "num_heads", "k_head_dim", "v_head_dim")
    order: tuple[str, ...] = ("keys", "values", "is_initialized", "max_cache_len", "cumulative_length", "device", "batch_size", "num_heads", "v_head_dim", "k_head_dim")

    def static_describe(self, state: dict[str, Any], where: str) -> tuple[bool, int]:
        length = state.get("max_cache_len")
        if type(length) is not int or length < 1:
            raise _refuse(where, f"max_cache_len is {length!r}, not a positive int")
        if not isinstance(state.get("cumulative_length"), _Tensor):
            raise _refuse(where, "cumulative_length is not a tensor")
        populated = state.get("is_initialized")
        if populated is True:
            keys, values = state.get("keys"), state.get("values")
            if not isinstance(keys, _Tensor) or not isinstance(values, _Tensor) or keys.dim() != 4 or values.dim() != 4:
                raise _refuse(where, "is_initialized is True but keys/values are not rank-4 tensors")
            derived = (keys.device, keys.shape[0], keys.shape[1], keys.shape[-1], values.shape[-1])
            for name, value in zip(self._shape_attrs, derived):  # noqa: B905 - both five long; strict= doubles zip's cost
                if name in state and state[name] != value:
                    raise _refuse(where, f"{name} is {state[name]!r} while its tensors say {value!r}")
            if keys.shape[2] != length:
                raise _refuse(where, f"its keys hold {keys.shape[2]} positions, max_cache_len is {length}")
            return True, length
        if populated is False:
            if state.get("keys") is not None or state.get("values") is not None:
                raise _refuse(where, "is_initialized is False but it holds keys/values")
            return False, length
        raise _refuse(where, f"is_initialized is {populated!r}")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        populated, length = self.static_describe(self.check(layer, where), where)
        return LayerInfo(self.code, populated, length)

    def flatten_static(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        out.append(layer.cumulative_length)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        self.flatten_extra(layer, out)

    def static_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        length = info.number
        obj["max_cache_len"] = length
        if info.populated:
            keys, values = take(), take()
            _check_static_kv(keys, values, length, what)  # type: ignore[arg-type]
            obj["keys"], obj["values"] = keys, values
            obj["is_initialized"] = True
            obj["device"] = keys.device
            obj["batch_size"], obj["num_heads"] = keys.shape[:2]
            obj["v_head_dim"] = values.shape[-1]
            obj["k_head_dim"] = keys.shape[-1]
        else:
            obj["keys"] = obj["values"] = None
            obj["is_initialized"] = False
        obj["cumulative_length"] = check_position(take(), "cumulative_length")

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)


class StaticSlidingAdapter(StaticAdapter):
    """``StaticSlidingWindowLayer``: ``V<max_cache_len>[c]``; the static items plus ``cumulative_length_int``.

    Its ``max_cache_len`` is already ``min(max_cache_len, sliding_window)`` (the window itself is not kept);
    ``c`` records whether it was made with ``max_cache_len <= sliding_window`` (``_is_croppable``).
    """

    attributes = StaticAdapter.attributes | {"cumulative_length_int", "_is_croppable"}
    order = (*StaticAdapter.order[:5], "cumulative_length_int", "_is_croppable", *StaticAdapter.order[5:])

    def sliding_params(self, state: dict[str, Any], where: str) -> list[tuple[str, None]]:
        count, crop = state.get("cumulative_length_int"), state.get("_is_croppable")
        if type(count) is not int or count < 0:
            raise _refuse(where, f"cumulative_length_int is {count!r}")
        if type(crop) is not bool:
            raise _refuse(where, f"_is_croppable is {crop!r}")
        return [("c", None)] if crop else []

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, length = self.static_describe(state, where)
        return LayerInfo(self.code, populated, length, tuple(self.sliding_params(state, where)))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        out.append(count_item(layer.cumulative_length_int))
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)
        obj["cumulative_length_int"] = check_count(take(), "cumulative_length_int")
        obj["_is_croppable"] = info.flag("c")


class StaticIndexedAdapter(StaticAdapter, IndexedAdapter):
    """``StaticIndexedLayer``: ``J<max_cache_len>[x][p]``."""

    attributes = StaticAdapter.attributes | IndexedAdapter.attributes | {"indexer_cumulative_length"}
    order = (
        *StaticAdapter.order[:5],
        "indexer_keys",
        "indexer_position_ids",
        "indexer_cumulative_length",
        "is_indexer_initialized",
        *StaticAdapter.order[5:],
        "indexer_dtype",
        "indexer_device",
    )
    _static = True

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, length = self.static_describe(state, where)
        return LayerInfo(self.code, populated, length, tuple(self.indexer_describe(state, where)))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        self.flatten_indexer(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)
        self.indexer_fill(obj, info, take, what)


class Fp8Adapter(DynamicAdapter):
    """``Fp8QuantizedLayer``: ``F`` / ``f``; the (empty) residual keys/values, both quantized pairs, the count."""

    attributes = DynamicAdapter.attributes | {"cumulative_length", "_quantized_keys", "_quantized_values"}
    order = ("keys", "values", "is_initialized", "cumulative_length", "_quantized_keys", "_quantized_values", "device")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated = self.attention_describe(state, where)
        count = state.get("cumulative_length")
        if type(count) is not int or count < 0:
            raise _refuse(where, f"cumulative_length is {count!r}")
        for name in ("_quantized_keys", "_quantized_values"):
            pair = state.get(name)
            if populated:
                if type(pair) is not tuple or len(pair) != 2 or not all(isinstance(x, _Tensor) for x in pair):
                    raise _refuse(where, f"{name} is not a (tensor, scale) pair")
            elif pair is not None:
                raise _refuse(where, f"it holds no tensors but {name} is set")
        if not populated and count:
            raise _refuse(where, f"it holds no tensors but cumulative_length is {count}")
        return LayerInfo(self.code, populated)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            out.extend(layer._quantized_keys)
            out.extend(layer._quantized_values)
            out.append(count_item(layer.cumulative_length))
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        if info.populated:
            obj["keys"] = check_tensor(take(), "keys")
            obj["values"] = check_tensor(take(), "values")
            obj["is_initialized"] = True
            obj["device"] = obj["keys"].device
            q = (check_tensor(take(), "_quantized_keys[0]"), check_tensor(take(), "_quantized_keys[1]"))
            obj["_quantized_keys"] = q
            obj["_quantized_values"] = (
                check_tensor(take(), "_quantized_values[0]"),
                check_tensor(take(), "_quantized_values[1]"),
            )
            obj["cumulative_length"] = check_count(take(), "cumulative_length")
        else:
            obj["keys"] = obj["values"] = None
            obj["is_initialized"] = False
            obj["cumulative_length"] = 0
            obj["_quantized_keys"] = obj["_quantized_values"] = None


_LINEAR_ATTRS = frozenset(
    {
        "number_of_states",
        "conv_states",
        "recurrent_states",
        "is_conv_states_initialized",
        "is_recurrent_states_initialized",
        "has_previous_state",
        "conv_kernel_size",
        "cumulative_length_linear",  # transformers >= 5.25 (the "l" parameter); absent before
        "device",
        "dtype",
        "record_past",
    }
)
_LINEAR_ORDER = (
    "number_of_states",
    "conv_states",
    "recurrent_states",
    "is_conv_states_initialized",
    "is_recurrent_states_initialized",
    "has_previous_state",
    "conv_kernel_size",
    "cumulative_length_linear",
)
_STATE_DICTS = (
    "conv_states",
    "recurrent_states",
    "is_conv_states_initialized",
    "is_recurrent_states_initialized",
    "has_previous_state",
    "conv_kernel_size",
)


class _LinearPart:
    """The linear-attention half shared by ``A``, ``B``, ``C``, ``G`` and ``K`` (Note [derived attributes])."""

    @staticmethod
    def describe_states(state: dict[str, Any], where: str) -> tuple[tuple[LinearState, ...], Any, Any]:
        n = state.get("number_of_states")
        if type(n) is not int or n < 1:
            raise _refuse(where, f"number_of_states is {n!r}")
        dicts = {}
        for name in _STATE_DICTS:
            d = state.get(name)
            if type(d) is not dict or list(d) != list(range(n)):
                raise _refuse(where, f"{name} is not a dict over the states 0..{n - 1}")
            dicts[name] = d
        states = []
        first_conv = None
        for i in range(n):
            conv, rec = dicts["conv_states"][i], dicts["recurrent_states"][i]
            conv_init, rec_init = dicts["is_conv_states_initialized"][i], dicts["is_recurrent_states_initialized"][i]
            kernel, previous = dicts["conv_kernel_size"][i], dicts["has_previous_state"][i]
            if type(conv_init) is not bool or type(rec_init) is not bool or type(previous) is not bool:
                raise _refuse(where, f"the flags of state {i} are not bools")
            if conv_init != isinstance(conv, _Tensor) or (not conv_init and conv is not None):
                raise _refuse(where, f"conv_states[{i}] and is_conv_states_initialized[{i}] disagree")
            if rec_init != isinstance(rec, _Tensor) or (not rec_init and rec is not None):
                raise _refuse(where, f"recurrent_states[{i}] and is_recurrent_states_initialized[{i}] disagree")
            if conv_init != (type(kernel) is int and kernel >= 1) or (not conv_init and kernel is not None):
                raise _refuse(where, f"conv_kernel_size[{i}] is {kernel!r} while conv state {i} is {'set' if conv_init else 'unset'}")
            if conv_init and first_conv is None:
                first_conv = conv
            states.append(LinearState(kernel if conv_init else None, rec_init, previous))
        if type(state.get("record_past")) is not bool:
            raise _refuse(where, f"record_past is {state.get('record_past')!r}")
        return tuple(states), first_conv, n

    @staticmethod
    def check_dtype_device(state: dict[str, Any], first_conv: Any, attention_device: Any, where: str) -> bool:
        dtype, device = state.get("dtype"), state.get("device")
        expected_device = attention_device if attention_device is not None else (first_conv.device if first_conv is not None else None)
        if (device is None and expected_device is not None) or (device is not None and not _same_device(device, expected_device)):
            raise _refuse(where, f"device is {device!r}; its tensors say {expected_device!r}")
        if dtype is None:
            return False
        if first_conv is None or dtype != first_conv.dtype:
            raise _refuse(where, f"dtype is {dtype!r}, not its first conv state's")
        return True

    @staticmethod
    def has_length(state: dict[str, Any], where: str) -> bool:
        """Whether the layer counts its tokens in ``cumulative_length_linear`` (transformers >= 5.25)."""
        if "cumulative_length_linear" not in state:
            return False
        length = state["cumulative_length_linear"]
        if not isinstance(length, _Tensor) or length.dim() != 0 or length.dtype != _torch.int64:
            raise _refuse(where, f"cumulative_length_linear is {length!r}, not a 0-d int64 tensor")
        return True

    @staticmethod
    def flatten_states(layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.flag("l"):  # a flag item: after the attention items, before the states
            out.append(layer.cumulative_length_linear)
        conv, rec = layer.conv_states, layer.recurrent_states
        for i, st in enumerate(info.states):
            if st.conv_kernel is not None:
                out.append(conv[i])
            if st.recurrent:
                out.append(rec[i])

    @staticmethod
    def fill_states(obj: Any, info: LayerInfo, take: _Take, what: str, attention_device: Any) -> None:
        if info.flag("l"):
            obj["cumulative_length_linear"] = check_position(take(), "cumulative_length_linear")
        n = len(info.states)
        obj["number_of_states"] = n
        conv: dict[int, Any] = {}
        rec: dict[int, Any] = {}
        first_conv = None
        for i, st in enumerate(info.states):
            conv[i] = check_tensor(take(), f"conv_states[{i}]") if st.conv_kernel is not None else None
            if first_conv is None and conv[i] is not None:
                first_conv = conv[i]
            rec[i] = check_tensor(take(), f"recurrent_states[{i}]") if st.recurrent else None
        obj["conv_states"] = conv
        obj["recurrent_states"] = rec
        obj["is_conv_states_initialized"] = {i: st.conv_kernel is not None for i, st in enumerate(info.states)}
        obj["is_recurrent_states_initialized"] = {i: st.recurrent for i, st in enumerate(info.states)}
        obj["has_previous_state"] = {i: st.previous for i, st in enumerate(info.states)}
        obj["conv_kernel_size"] = {i: st.conv_kernel for i, st in enumerate(info.states)}
        if attention_device is not None:
            obj["device"] = attention_device
        else:
            obj["device"] = first_conv.device if first_conv is not None else None
        obj["dtype"] = first_conv.dtype if info.flag("y") else None  # type: ignore[union-attr]  # y: there is a first conv state
        obj["record_past"] = info.flag("r")


class LinearAdapter(LayerAdapter):
    """``LinearAttentionLayer``: ``A[r][y]`` and one ``s[c<k>][h][p]`` group per recurrent state."""

    attributes = _LINEAR_ATTRS
    order = (*_LINEAR_ORDER, "device", "dtype", "record_past")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        states, first_conv, _ = _LinearPart.describe_states(state, where)
        params = [("r", None)] if state["record_past"] else []
        if _LinearPart.check_dtype_device(state, first_conv, None, where):
            params.append(("y", None))
        if _LinearPart.has_length(state, where):
            params.append(("l", None))
        return LayerInfo(self.code, True, None, tuple(params), states)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        _LinearPart.flatten_states(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        _LinearPart.fill_states(obj, info, take, what, None)


class HybridAdapter(LayerAdapter):
    """A linear-attention layer that also holds attention (``B``, ``C``, ``G``, ``K``): both halves, attention first."""

    def __init__(self, kind: LayerKind, cls: type, attention: LayerAdapter) -> None:
        self.attention = attention
        super().__init__(kind, cls)
        self.attributes = attention.attributes | _LINEAR_ATTRS | frozenset(self.extra)
        # the attention half's constructor runs first, then the linear half's; lazy_initialization adds the
        # static shape attributes last
        head = attention.order[: attention.order.index("device")] if "device" in attention.order else attention.order
        tail = tuple(a for a in attention.order[len(head) :] if a != "device")
        linear_tail = tuple(a for a in ("device", "dtype", "record_past") if a not in head)
        self.order = (*head, *_LINEAR_ORDER, *linear_tail, *tail)

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = _check_attributes(layer, self.attributes, where)
        states, first_conv, _ = _LinearPart.describe_states(state, where)
        att = self.attention
        if isinstance(att, SlidingAdapter):
            populated, number, _ = att.attention_describe_sliding(state, where)
            params: list[tuple[str, None]] = []
        elif isinstance(att, StaticSlidingAdapter):
            populated, number = att.static_describe(state, where)
            params = att.sliding_params(state, where)
        elif isinstance(att, StaticAdapter):
            populated, number = att.static_describe(state, where)
            params = []
        else:
            # the remaining attention half in HYBRIDS is "D", a DynamicAdapter, which has attention_describe
            populated, number, params = att.attention_describe(state, where), None, []  # type: ignore[attr-defined]
        if state["record_past"]:
            params.append(("r", None))
        device = state["keys"].device if populated else None
        if _LinearPart.check_dtype_device(state, first_conv, device, where):
            params.append(("y", None))
        if _LinearPart.has_length(state, where):
            params.append(("l", None))
        return LayerInfo(self.code, populated, number, tuple(params), states)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        att = self.attention
        if isinstance(att, StaticAdapter):
            att.flatten_static(layer, info, out)
            if isinstance(att, StaticSlidingAdapter):
                out.append(count_item(layer.cumulative_length_int))
        elif info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            if isinstance(att, SlidingAdapter):
                out.append(count_item(layer.cumulative_length))
        _LinearPart.flatten_states(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        att = self.attention
        if isinstance(att, SlidingAdapter):
            att.sliding_fill(obj, info, take, what)
        else:
            att.fill(obj, info, take, what)
        device = obj["device"] if info.populated else None
        _LinearPart.fill_states(obj, info, take, what, device)


class DummyAdapter(LayerAdapter):
    """``DummyLayer``: ``X``; holds nothing, always "initialized"."""

    attributes = frozenset({"is_initialized", "keys", "values"})
    order = ("is_initialized", "keys", "values")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        if state.get("is_initialized") is not True or state.get("keys") is not None or state.get("values") is not None:
            raise _refuse(where, "a DummyLayer holding state")
        return LayerInfo(self.code)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        obj["is_initialized"] = True
        obj["keys"] = None
        obj["values"] = None


#: kind letter -> adapter class; hybrids take the adapter of their attention half
ADAPTERS: dict[str, type[LayerAdapter]] = {
    "D": DynamicAdapter,
    "S": SlidingAdapter,
    "W": SlidingAdapter,
    "I": IndexedAdapter,
    "T": StaticAdapter,
    "V": StaticSlidingAdapter,
    "J": StaticIndexedAdapter,
    "F": Fp8Adapter,
    "A": LinearAdapter,
    "X": DummyAdapter,
}
#: hybrid kind letter -> the kind letter of its attention half
HYBRIDS: dict[str, str] = {"B": "D", "C": "S", "G": "T", "K": "V"}

# the quantized layers whose states are a backend's objects (Q, H): their module adds them to ADAPTERS
from . import _cache_quantized  # noqa: E402,F401


def make_adapter(
    code: str, cls: type, extra: tuple[str, ...] = (), like: str | None = None, counts: frozenset[str] = frozenset()
) -> LayerAdapter:
    """The adapter of ``cls`` for the kind ``code``; ``like`` is the built-in kind a registered one behaves as."""
    kind = layer_kind(code)
    assert kind is not None
    base = like or code
    if base in HYBRIDS:
        attention = ADAPTERS[HYBRIDS[base]](layer_kind(HYBRIDS[base]), cls)  # type: ignore[arg-type]
        adapter: LayerAdapter = HybridAdapter(kind, cls, attention)
    else:
        adapter = ADAPTERS[base](kind, cls)
    if extra:
        adapter.extra = extra
        adapter.extra_counts = counts
        adapter.attributes = adapter.attributes | frozenset(extra)
        adapter.order = (*adapter.order, *extra)
    return adapter
