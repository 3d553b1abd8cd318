"""transformers 5.x caches <-> flat lists of tensors, without any pytree registration.

A ``DynamicCache`` is a list of layers; each populated layer holds a key and a value tensor. It is
flattened to ``[k0, v0, k1, v1, ...]`` (populated layers only) and described by a
:class:`~.type_info.DynamicCacheInfo` that records, per layer, its kind (``DynamicLayer`` or
``DynamicSlidingWindowLayer`` with its ``sliding_window``) and whether it is populated, so that
:func:`rebuild` restores the same layer kinds, windows and tensor objects. An
``EncoderDecoderCache`` is its self-attention cache followed by its cross-attention cache.

Invariants: transformers is never imported by this module to *inspect* a value (a value can only be
a transformers cache if ``transformers.cache_utils`` is already in ``sys.modules``); it is imported
only by :func:`rebuild`, i.e. when a type-info string names a transformers class. Any other cache or
layer class is refused with a ``TypeError`` naming it, never flattened silently into something else.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from .type_info import CacheLayer, DynamicCacheInfo, EncoderDecoderCacheInfo

_MODULE = "transformers.cache_utils"


def cache_module() -> Any:
    """``transformers.cache_utils`` if already imported, else ``None`` (never imports it)."""
    return sys.modules.get(_MODULE)


def is_cache(obj: Any) -> bool:
    """Whether ``obj`` is any transformers ``Cache`` (supported or not)."""
    cu = sys.modules.get(_MODULE)
    return cu is not None and isinstance(obj, cu.Cache)


def _describe_dynamic(cache: Any, cu: Any, what: str) -> DynamicCacheInfo:
    if type(cache) is not cu.DynamicCache:
        raise TypeError(
            f"{what}: {type(cache).__module__}.{type(cache).__qualname__} is not supported; "
            "supported caches are transformers DynamicCache and EncoderDecoderCache"
        )
    if getattr(cache, "offloading", False):
        raise TypeError(f"{what}: an offloading DynamicCache is not supported")
    layers = []
    for i, layer in enumerate(cache.layers):
        kind = type(layer)
        if kind is cu.DynamicLayer:
            window = None
        elif kind is cu.DynamicSlidingWindowLayer:
            window = int(layer.sliding_window)
        else:
            raise TypeError(
                f"{what}: layer {i} is a {kind.__qualname__}; supported layers are DynamicLayer and "
                "DynamicSlidingWindowLayer"
            )
        layers.append(CacheLayer(window, bool(layer.is_initialized)))
    return DynamicCacheInfo.of_layers(layers)


def describe(cache: Any, what: str = "cache") -> DynamicCacheInfo | EncoderDecoderCacheInfo:
    """The type-info node of a supported cache; ``TypeError`` naming ``what`` for any other cache."""
    cu = sys.modules[_MODULE]
    if type(cache) is cu.EncoderDecoderCache:
        return EncoderDecoderCacheInfo(
            _describe_dynamic(cache.self_attention_cache, cu, f"{what}.self_attention_cache"),
            _describe_dynamic(cache.cross_attention_cache, cu, f"{what}.cross_attention_cache"),
        )
    return _describe_dynamic(cache, cu, what)


def _flatten_dynamic(cache: Any, out: list[Any]) -> None:
    for layer in cache.layers:
        if layer.is_initialized:
            out.append(layer.keys)
            out.append(layer.values)


def flatten(cache: Any) -> list[Any]:
    """``[k0, v0, k1, v1, ...]`` of a supported cache (self-attention first for encoder-decoder)."""
    out: list[Any] = []
    if hasattr(cache, "self_attention_cache"):
        _flatten_dynamic(cache.self_attention_cache, out)
        _flatten_dynamic(cache.cross_attention_cache, out)
    else:
        _flatten_dynamic(cache, out)
    return out


def flatten_supported(cache: Any) -> list[Any] | None:
    """:func:`flatten` of a supported cache, or ``None`` for any other cache (then :func:`describe` says why).

    This is the check of :func:`describe` and the flattening in one pass over the layers, without building
    type-info nodes: ``serialize_args`` runs it on every forward call.
    """
    cu = sys.modules[_MODULE]
    cls = type(cache)
    if cls is cu.DynamicCache:
        parts: tuple[Any, ...] = (cache,)
    elif cls is cu.EncoderDecoderCache:
        parts = (cache.self_attention_cache, cache.cross_attention_cache)
    else:
        return None
    dynamic_layer, sliding_layer = cu.DynamicLayer, cu.DynamicSlidingWindowLayer
    out: list[Any] = []
    for part in parts:
        if type(part) is not cu.DynamicCache or getattr(part, "offloading", False):
            return None
        for layer in part.layers:
            kind = type(layer)
            if kind is not dynamic_layer and kind is not sliding_layer:
                return None
            if layer.is_initialized:
                out.append(layer.keys)
                out.append(layer.values)
    return out


def _rebuild_dynamic(cu: Any, info: DynamicCacheInfo, tensors: Sequence[Any], pos: int) -> tuple[Any, int]:
    # Each layer is filled the way its own update() would leave it after one call with these states, but
    # without torch.cat, so that the very same tensor objects end up in the cache. The loop walks the
    # run-length encoded layers (at most MAX_CACHE_LAYERS in all): this runs on every forward call.
    dynamic_layer, sliding_layer = cu.DynamicLayer, cu.DynamicSlidingWindowLayer
    layers = []
    for run in info.runs:
        window = run.layer.sliding_window
        populated = run.layer.populated
        for _ in range(run.count):
            layer = dynamic_layer() if window is None else sliding_layer(sliding_window=window)
            if populated:
                keys = tensors[pos]
                layer.device = keys.device
                layer.keys = keys
                layer.values = tensors[pos + 1]
                layer.is_initialized = True
                if window is not None:
                    layer._sliding_window_tensor = layer._sliding_window_tensor.to(keys.device)
                    layer.cumulative_length = keys.shape[-2]
                pos += 2
            layers.append(layer)
    cache = cu.DynamicCache()
    cache.layers = layers
    return cache, pos


def rebuild(info: DynamicCacheInfo | EncoderDecoderCacheInfo, tensors: Sequence[Any]) -> Any:
    """A new cache of the kind ``info`` describes holding ``tensors`` (exactly ``info.n_items``)."""
    cu = sys.modules.get(_MODULE)
    if cu is None:  # the type-info string names a transformers class: import it (once)
        import transformers.cache_utils as cu

    if isinstance(info, EncoderDecoderCacheInfo):
        self_cache, pos = _rebuild_dynamic(cu, info.self_attention, tensors, 0)
        cross_cache, _ = _rebuild_dynamic(cu, info.cross_attention, tensors, pos)
        return cu.EncoderDecoderCache(self_cache, cross_cache)
    cache, _ = _rebuild_dynamic(cu, info, tensors, 0)
    return cache


def copy_cache(cache: Any, clone: Any) -> Any:
    """A copy of a supported cache: same layer kinds and windows, every tensor passed through ``clone``."""
    info = describe(cache)
    copied = rebuild(info, [clone(t) for t in flatten(cache)])
    # cumulative_length of a sliding layer may exceed its stored states; keep the original's count.
    pairs = []
    if isinstance(info, EncoderDecoderCacheInfo):
        pairs = list(zip(cache.self_attention_cache.layers, copied.self_attention_cache.layers)) + list(
            zip(cache.cross_attention_cache.layers, copied.cross_attention_cache.layers)
        )
        copied.is_updated = dict(cache.is_updated)
    else:
        pairs = list(zip(cache.layers, copied.layers))
    for old, new in pairs:
        if hasattr(old, "cumulative_length"):
            new.cumulative_length = old.cumulative_length
    return copied
