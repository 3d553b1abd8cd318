"""Rebuilding the common cache layers on the hot path: one compiled maker per layer spelling.

``deserialize_args`` rebuilds every cache it receives on every forward call of a replaced submodule. The
layer adapters (:mod:`._layer_adapters`) check every item and name what is wrong; the makers here build the same
objects for the common case (items exactly ``torch.Tensor``, with the ranks, sizes and dtypes the spelling
implies) with the checks reduced to identity tests and one read of each shape, and give up (return
``None``) on anything else, so that the caller takes the general route, which accepts what they refuse
(tensor subclasses such as FakeTensor) and raises the errors.

Invariants (tests/serialize/test_hot_path.py): a maker builds exactly what the adapter's ``build`` builds
(same attributes in the same order, same values, same objects), and never accepts items that the adapter
would refuse. Kinds without a maker here (indexed, quantized, hybrid, registered layers) are built by their
adapter inside the compiled cache builder, so one such layer does not send a whole cache to the general
route. The whole-cache builders (:func:`cache_maker`, :func:`plain_builder`, :func:`pair_builder`) are
given everything they need by :func:`._caches.builder`, which compiles them.

Imports: :mod:`..type_info` and the layer modules (:mod:`._cache_layers`, :mod:`._cache_attention`,
:mod:`._cache_linear`); never :mod:`._caches`, which imports this module.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..type_info import LayerInfo
from . import _cache_attention as A
from . import _cache_layers as L
from . import _cache_linear as LIN

if TYPE_CHECKING:  # annotations only: the makers are given torch.Tensor, so ``type(x) is tensor`` narrows x to it
    from torch import Tensor

# A maker takes the iterator over the cache's items and returns the next layer, or None to give up.
Maker = Callable[[Iterator[Any]], Any | None]
_new = object.__new__


def maker(adapter: L.LayerAdapter, info: LayerInfo) -> Maker:
    """The fastest maker for layers spelled ``info`` of ``adapter``'s class."""
    torch = L._torch
    kind = type(adapter)
    if not adapter.extra and info.populated:
        # the ignores: info.number is int | None, and the S, T and V kinds always carry it
        if kind is A.DynamicAdapter:
            return _dynamic(adapter.cls, torch.Tensor)
        if kind is A.SlidingAdapter and info.kind == "S":
            return _sliding(adapter.cls, torch.Tensor, info.number, info.flag("r"))  # type: ignore[arg-type]
        if kind is A.StaticAdapter:
            return _static(adapter.cls, torch.Tensor, torch.int64, info.number, None)  # type: ignore[arg-type]
        if kind is A.StaticSlidingAdapter:
            return _static(adapter.cls, torch.Tensor, torch.int64, info.number, info.flag("c"))  # type: ignore[arg-type]
    if kind is LIN.LinearAdapter and not adapter.extra and not info.flag("l"):
        return _linear(adapter.cls, torch.Tensor, info)

    def general(it: Iterator[Any]) -> Any:
        try:
            return adapter.build(info, it, "")
        except (TypeError, ValueError):
            return None

    return general


def _dynamic(cls: type, tensor: type[Tensor]) -> Maker:
    def make(it: Iterator[Any]) -> Any:
        keys, values = next(it), next(it)
        if type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2:
            return None
        layer: Any = _new(cls)  # a transformers layer, its attributes set one by one
        layer.keys = keys
        layer.values = values
        layer.is_initialized = True
        layer.device = keys.device
        return layer

    return make


def _count(item: Any, tensor: type[Tensor]) -> int | None:
    """The count a count tensor carries, or None (Note [count tensors])."""
    if type(item) is not tensor or item.dim() != 2:
        return None
    n, zero = item.shape
    return n if zero == 0 else None


def _sliding(cls: type, tensor: type[Tensor], window: int, record: bool) -> Maker:
    window_tensor = A.window_tensor

    def make(it: Iterator[Any]) -> Any:
        keys, values = next(it), next(it)
        count = _count(next(it), tensor)
        if count is None or type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2:
            return None
        device = keys.device
        layer: Any = _new(cls)  # a transformers layer, its attributes set one by one
        layer.keys = keys
        layer.values = values
        layer.is_initialized = True
        layer.sliding_window = window
        layer.cumulative_length = count
        layer._sliding_window_tensor = window_tensor(window, device)
        layer.record_past = record
        layer.device = device
        return layer

    return make


def _static(cls: type, tensor: type[Tensor], int64: Any, length: int, croppable: bool | None) -> Maker:
    def make(it: Iterator[Any]) -> Any:
        keys, values, position = next(it), next(it), next(it)
        count = None if croppable is None else _count(next(it), tensor)
        if type(keys) is not tensor or type(values) is not tensor or type(position) is not tensor:
            return None
        ks, vs = keys.shape, values.shape
        if len(ks) != 4 or len(vs) != 4 or ks[2] != length or vs[2] != length or ks[:2] != vs[:2]:
            return None
        if position.dtype is not int64 or position.dim() != 0 or (croppable is not None and count is None):
            return None
        layer: Any = _new(cls)  # a transformers layer, its attributes set one by one
        layer.keys = keys
        layer.values = values
        layer.is_initialized = True
        layer.max_cache_len = length
        layer.cumulative_length = position
        if croppable is not None:
            layer.cumulative_length_int = count
            layer._is_croppable = croppable
        layer.device = keys.device
        layer.batch_size, layer.num_heads = ks[0], ks[1]
        layer.v_head_dim = vs[3]
        layer.k_head_dim = ks[3]
        return layer

    return make


def _linear(cls: type, tensor: type[Tensor], info: LayerInfo) -> Maker:
    plan = tuple((st.conv_kernel is not None, st.recurrent) for st in info.states)
    n = len(plan)
    conv_init = {i: c for i, (c, _) in enumerate(plan)}
    rec_init = {i: r for i, (_, r) in enumerate(plan)}
    previous = {i: st.previous for i, st in enumerate(info.states)}
    kernels = {i: st.conv_kernel for i, st in enumerate(info.states)}
    with_dtype, record = info.flag("y"), info.flag("r")

    def make(it: Iterator[Any]) -> Any:
        conv: dict[int, Any] = {}
        rec: dict[int, Any] = {}
        first = None
        for i, (has_conv, has_rec) in enumerate(plan):
            c = next(it) if has_conv else None
            r = next(it) if has_rec else None
            if (has_conv and type(c) is not tensor) or (has_rec and type(r) is not tensor):
                return None
            if first is None:
                first = c
            conv[i] = c
            rec[i] = r
        layer: Any = _new(cls)  # a transformers layer, its attributes set one by one
        layer.number_of_states = n
        layer.conv_states = conv
        layer.recurrent_states = rec
        # transformers updates these dicts in place: each layer gets its own
        layer.is_conv_states_initialized = dict(conv_init)
        layer.is_recurrent_states_initialized = dict(rec_init)
        layer.has_previous_state = dict(previous)
        layer.conv_kernel_size = dict(kernels)
        layer.device = None if first is None else first.device
        layer.dtype = first.dtype if with_dtype and first is not None else None
        layer.record_past = record
        return layer

    return make


# --------------------------------------------------------------------------------------------------
# whole caches (compiled by _caches.builder, once per type-info string)


def _stream() -> Any:
    # what Cache.__init__ makes for an offloading cache: a new stream on the default device
    torch = sys.modules["torch"]
    return torch.Stream() if hasattr(torch, "Stream") else torch.cuda.Stream()


def _is_updated(cross: Any) -> dict[int, bool]:
    # exactly what EncoderDecoderCache.__init__ computes
    return {i: bool(cross.get_seq_length(i) > 0) for i in range(len(cross))}


def cache_maker(
    cls: type,
    leading: tuple[str, ...],
    counts: frozenset[str],
    tensor: type[Tensor],
    runs: list[tuple[int, Maker]],
    replicate: Any,
    offloading: bool,
    only_non_sliding: bool,
) -> Callable[[Iterator[Any]], Any]:
    """A function taking the items of one cache of ``cls`` from an iterator and making it, or giving up (``None``).

    ``runs`` are (count, maker) pairs, one per run of equal layers; the rest is what the spelling fixes.
    """
    count_of = _count  # a closure cell, as when this was a local import of the builder

    def build(it: Iterator[Any]) -> Any:
        own = []
        for name in leading:
            item = next(it)
            value = count_of(item, tensor) if name in counts else (item if type(item) is tensor else None)
            if value is None:
                return None
            own.append(value)
        layers: list[Any] = []
        append = layers.append
        for count, make in runs:
            for _ in range(count):
                layer = make(it)
                if layer is None:
                    return None
                append(layer)
        cache: Any = _new(cls)
        cache.layers = layers
        cache.layer_class_to_replicate = replicate
        cache.offloading = offloading
        if offloading:
            cache.only_non_sliding = only_non_sliding
            cache.prefetch_stream = _stream()
        for name, value in zip(leading, own):  # noqa: B905 - one value per name above; strict= doubles zip's cost
            setattr(cache, name, value)
        return cache

    return build


def plain_builder(tensor: type[Tensor], dynamic_layer: type, dynamic_cache: type, replicate: Any) -> Callable[[Sequence[Any]], Any]:
    """The usual decoder cache: populated ``DynamicLayer`` only, built as ``DynamicAdapter.build`` would, inlined
    (this is the whole per-layer cost of ``deserialize_args`` on a decode step)."""
    new = _new

    def build_plain(items: Sequence[Any]) -> Any:
        it = iter(items)
        layers: list[Any] = []
        append = layers.append
        for keys, values in zip(it, it):  # noqa: B905 - consecutive pairs of one iterator; strict= doubles zip's cost
            if type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2:
                return None
            layer: Any = new(dynamic_layer)
            layer.keys = keys
            layer.values = values
            layer.is_initialized = True
            layer.device = keys.device
            append(layer)
        cache: Any = new(dynamic_cache)
        cache.layers = layers
        cache.layer_class_to_replicate = replicate
        cache.offloading = False
        return cache

    return build_plain


def pair_builder(
    first: Callable[[Iterator[Any]], Any], second: Callable[[Iterator[Any]], Any], pair: type
) -> Callable[[Sequence[Any]], Any]:
    """An ``EncoderDecoderCache`` of two compiled halves (:func:`cache_maker`), or ``None`` if either gives up."""

    def build_pair(items: Sequence[Any]) -> Any:
        it = iter(items)
        a = first(it)
        b = second(it) if a is not None else None
        if b is None:
            return None
        cache: Any = _new(pair)
        cache.self_attention_cache = a
        cache.cross_attention_cache = b
        cache.is_updated = _is_updated(b)
        return cache

    return build_pair
