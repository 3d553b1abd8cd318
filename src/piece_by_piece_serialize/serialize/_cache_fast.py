"""Rebuilding the common cache layers on the hot path: one compiled maker per layer spelling.

``deserialize_args`` rebuilds every cache it receives on every forward call of a replaced submodule. The
adapters of :mod:`._cache_layers` check every item and name what is wrong; the makers here build the same
objects for the common case (items exactly ``torch.Tensor``, with the ranks, sizes and dtypes the spelling
implies) with the checks reduced to identity tests and one read of each shape, and give up (return
``None``) on anything else, so that the caller takes the general route, which accepts what they refuse
(tensor subclasses such as FakeTensor) and raises the errors.

Invariants (tests/serialize/test_hot_path.py): a maker builds exactly what the adapter's ``build`` builds
(same attributes in the same order, same values, same objects), and never accepts items that the adapter
would refuse. Kinds without a maker here (indexed, quantized, hybrid, registered layers) are built by their
adapter inside the compiled cache builder, so one such layer does not send a whole cache to the general
route.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..type_info import LayerInfo
from . import _cache_layers as L

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
        if kind is L.DynamicAdapter:
            return _dynamic(adapter.cls, torch.Tensor)
        if kind is L.SlidingAdapter and info.kind == "S":
            return _sliding(adapter.cls, torch.Tensor, info.number, info.flag("r"))  # type: ignore[arg-type]
        if kind is L.StaticAdapter:
            return _static(adapter.cls, torch.Tensor, torch.int64, info.number, None)  # type: ignore[arg-type]
        if kind is L.StaticSlidingAdapter:
            return _static(adapter.cls, torch.Tensor, torch.int64, info.number, info.flag("c"))  # type: ignore[arg-type]
    if kind is L.LinearAdapter and not adapter.extra and not info.flag("l"):
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
    window_tensor = L.window_tensor

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
