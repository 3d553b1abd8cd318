"""transformers 5.x caches <-> flat lists of tensors, without any pytree registration.

A ``DynamicCache`` is a list of layers; each populated layer holds a key and a value tensor. It is
flattened to ``[k0, v0, k1, v1, ...]`` (populated layers only) and described by a
:class:`~.type_info.DynamicCacheInfo` that records, per layer, its kind (``DynamicLayer`` or
``DynamicSlidingWindowLayer`` with its ``sliding_window``) and whether it is populated, so that
:func:`rebuild` restores the same layer kinds, windows, devices and tensor objects. An
``EncoderDecoderCache`` is its self-attention cache followed by its cross-attention cache.

Invariants: transformers is never imported by this module to *inspect* a value (a value can only be
a transformers cache if ``transformers.cache_utils`` is already in ``sys.modules``); it is imported
only to rebuild, i.e. when a type-info string names a transformers class. Any other cache or layer
class is refused with a ``TypeError`` naming it, never flattened silently into something else.
Both directions run on every forward call of a replaced submodule: :func:`flatten_into` and the
builders of :func:`builder` do one pass over the layers and call no Python function per layer
(see Note [direct construction]).

Note [direct construction]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``DynamicLayer()`` and ``DynamicCache()`` run Python ``__init__`` chains that only set a few attributes
which the rebuild overwrites at once; per layer that call costs more than everything else the rebuild
does. When transformers is first seen, :func:`_bind` builds one of each and looks at what the
constructors set. If it is exactly ``{keys: None, values: None, is_initialized: False}`` for the layer
and ``{layers: [], layer_class_to_replicate: DynamicLayer, offloading: False}`` for the cache (the
transformers 5.x constructors), a rebuilt object is made with ``object.__new__`` and given the same
attributes, in the same order, with the values the constructor and ``update()`` would leave: the result
cannot be told apart (``tests/serialize/test_serialize.py`` compares ``vars()`` with caches transformers
filled itself). Any other transformers version, and sliding-window or empty layers (rare, and their
constructors make tensors), go through the constructors.
"""

from __future__ import annotations

import sys
from itertools import islice
from typing import Any, Callable, Iterator, Optional, Sequence

from .type_info import CacheLayer, DynamicCacheInfo, EncoderDecoderCacheInfo

_MODULE = "transformers.cache_utils"

# Bound by _bind() the first time a cache is flattened, described or rebuilt (transformers is loaded then).
_bound: Any = None  # the transformers.cache_utils module the names below come from
_Tensor: Any = None
_DynamicCache: Any = None
_EncoderDecoderCache: Any = None
_DynamicLayer: Any = None
_SlidingLayer: Any = None
#: The cache classes flatten_into() handles; empty until transformers is seen (then no value can be one).
SUPPORTED: frozenset[type] = frozenset()
_direct = False  # Note [direct construction] holds for the bound module
_new = object.__new__


def _bind(cu: Any) -> None:
    global _bound, _Tensor, _DynamicCache, _EncoderDecoderCache, _DynamicLayer, _SlidingLayer
    global SUPPORTED, _direct
    dynamic_layer, dynamic_cache = cu.DynamicLayer, cu.DynamicCache
    layer_probe, cache_probe = dynamic_layer(), dynamic_cache()
    _direct = (
        dynamic_layer.__new__ is object.__new__
        and dynamic_cache.__new__ is object.__new__
        and list(vars(layer_probe).items()) == [("keys", None), ("values", None), ("is_initialized", False)]
        and list(vars(cache_probe)) == ["layers", "layer_class_to_replicate", "offloading"]
        and cache_probe.layers == []
        and cache_probe.layer_class_to_replicate is dynamic_layer
        and cache_probe.offloading is False
    )
    _Tensor = sys.modules["torch"].Tensor  # transformers imported torch
    _DynamicLayer, _SlidingLayer = dynamic_layer, cu.DynamicSlidingWindowLayer
    _DynamicCache, _EncoderDecoderCache = dynamic_cache, cu.EncoderDecoderCache
    SUPPORTED = frozenset((dynamic_cache, cu.EncoderDecoderCache))
    _bound = cu  # set last: the names above are complete once this is


def _loaded() -> Any:
    """``transformers.cache_utils``, imported if needed (rebuilding), with the names above bound."""
    cu = sys.modules.get(_MODULE)
    if cu is None:  # a type-info string names a transformers class: import it (once)
        import transformers.cache_utils as cu
    if cu is not _bound:
        _bind(cu)
    return cu


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


def flatten(cache: Any) -> list[Any]:
    """``[k0, v0, k1, v1, ...]`` of a supported cache (self-attention first for encoder-decoder)."""
    out: list[Any] = []
    parts = (cache.self_attention_cache, cache.cross_attention_cache) if hasattr(cache, "self_attention_cache") else (cache,)
    for part in parts:
        for layer in part.layers:
            if layer.is_initialized:
                out.append(layer.keys)
                out.append(layer.values)
    return out


def flatten_into(cache: Any, out: list[Any]) -> bool:
    """Append :func:`flatten` of ``cache`` to ``out`` if it is a supported cache, and say whether it was.

    For anything else (another cache or layer class, an offloading cache, not a cache at all) ``out`` is
    left as it was and the answer is ``False``; :func:`describe` then says why. This is the check of
    :func:`describe` and the flattening in one pass, without type-info nodes: ``serialize_args`` runs
    it on every forward call.
    """
    cls = type(cache)
    if cls is _DynamicCache:
        parts: tuple[Any, ...] = (cache,)
    elif cls is _EncoderDecoderCache:
        parts = (cache.self_attention_cache, cache.cross_attention_cache)
    else:
        return False
    start = len(out)
    append = out.append
    dynamic_layer, sliding_layer = _DynamicLayer, _SlidingLayer
    for part in parts:
        if type(part) is not _DynamicCache or getattr(part, "offloading", False):
            del out[start:]
            return False
        for layer in part.layers:
            kind = type(layer)
            if kind is not dynamic_layer and kind is not sliding_layer:  # faster than a frozenset look-up
                del out[start:]
                return False
            if layer.is_initialized:
                append(layer.keys)
                append(layer.values)
    return True


def flatten_supported(cache: Any) -> list[Any] | None:
    """:func:`flatten` of a supported cache, or ``None`` for any other cache (then :func:`describe` says why)."""
    if sys.modules.get(_MODULE) is not _bound:
        _loaded()
    out: list[Any] = []
    return out if flatten_into(cache, out) else None


# A DynamicCacheInfo as the builders walk it: (count, sliding_window, populated) per run.
_Runs = tuple[tuple[int, Optional[int], bool], ...]


def _runs(info: DynamicCacheInfo) -> _Runs:
    return tuple((run.count, run.layer.sliding_window, run.layer.populated) for run in info.runs)


def _fill(runs: _Runs, pairs: Iterator[tuple[Any, Any]], check: bool, layers: list[Any]) -> bool:
    """Append to ``layers`` the layers ``runs`` describe, taking (key, value) from ``pairs``.

    Each layer is left the way its own ``update()`` would leave it after one call with these states, but
    without torch.cat, so that the very same tensor objects end up in the cache. With ``check``, answer
    ``False`` as soon as a key or value is not exactly a ``torch.Tensor`` of rank >= 2 (the caller then
    takes the general route, which accepts tensor subclasses and names the offending item).
    """
    tensor, dynamic_layer, direct, new = _Tensor, _DynamicLayer, _direct, _new
    append = layers.append
    for count, window, populated in runs:
        if not populated:
            for _ in range(count):
                append(dynamic_layer() if window is None else _SlidingLayer(sliding_window=window))
        elif window is None:
            for keys, values in islice(pairs, count):
                if check and (type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2):
                    return False
                layer = new(dynamic_layer) if direct else dynamic_layer()
                layer.keys = keys
                layer.values = values
                layer.is_initialized = True
                layer.device = keys.device
                append(layer)
        else:
            for keys, values in islice(pairs, count):
                if check and (type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2):
                    return False
                layer = _SlidingLayer(sliding_window=window)
                device = keys.device
                layer.device = device
                layer.keys = keys
                layer.values = values
                layer.is_initialized = True
                layer._sliding_window_tensor = layer._sliding_window_tensor.to(device)
                layer.cumulative_length = keys.shape[-2]
                append(layer)
    return True


def _dynamic_cache(layers: list[Any]) -> Any:
    if _direct:
        cache = _new(_DynamicCache)
        cache.layers = layers
        cache.layer_class_to_replicate = _DynamicLayer
        cache.offloading = False
        return cache
    cache = _DynamicCache()
    cache.layers = layers
    return cache


def _plain_builder() -> Callable[[Sequence[Any], bool], Any]:
    # The usual decoder cache: populated DynamicLayers only, built as _fill and _dynamic_cache would, inlined
    # (this is the whole per-layer cost of deserialize_args on a decode step).
    tensor, dynamic_layer, dynamic_cache, new = _Tensor, _DynamicLayer, _DynamicCache, _new

    def build_plain(tensors: Sequence[Any], check: bool) -> Any:
        it = iter(tensors)
        layers: list[Any] = []
        append = layers.append
        for keys, values in zip(it, it):
            if check and (type(keys) is not tensor or type(values) is not tensor or keys.dim() < 2 or values.dim() < 2):
                return None
            layer = new(dynamic_layer)
            layer.keys = keys
            layer.values = values
            layer.is_initialized = True
            layer.device = keys.device
            append(layer)
        cache = new(dynamic_cache)
        cache.layers = layers
        cache.layer_class_to_replicate = dynamic_layer
        cache.offloading = False
        return cache

    return build_plain


def builder(info: DynamicCacheInfo | EncoderDecoderCacheInfo) -> Callable[[Sequence[Any], bool], Any]:
    """A function ``build(tensors, check)`` making new caches of the kind ``info`` describes.

    ``tensors`` must hold exactly ``info.n_items`` items. With ``check=True`` the function answers
    ``None`` unless every item is exactly a ``torch.Tensor`` of rank >= 2 (checked before anything is
    returned); with ``check=False`` the caller has checked them. Compile once per ``info``: the function
    holds the layer layout, so a call does no work on the type-info node.
    """
    _loaded()
    if isinstance(info, EncoderDecoderCacheInfo):
        self_runs, cross_runs = _runs(info.self_attention), _runs(info.cross_attention)
        encoder_decoder = _EncoderDecoderCache

        def build_encoder_decoder(tensors: Sequence[Any], check: bool) -> Any:
            it = iter(tensors)
            pairs = zip(it, it)
            self_layers: list[Any] = []
            cross_layers: list[Any] = []
            if not (_fill(self_runs, pairs, check, self_layers) and _fill(cross_runs, pairs, check, cross_layers)):
                return None
            return encoder_decoder(_dynamic_cache(self_layers), _dynamic_cache(cross_layers))

        return build_encoder_decoder
    runs = _runs(info)
    if _direct and len(runs) == 1 and runs[0][1] is None and runs[0][2]:
        return _plain_builder()

    def build_dynamic(tensors: Sequence[Any], check: bool) -> Any:
        it = iter(tensors)
        layers: list[Any] = []
        if not _fill(runs, zip(it, it), check, layers):
            return None
        return _dynamic_cache(layers)

    return build_dynamic


def rebuild(info: DynamicCacheInfo | EncoderDecoderCacheInfo, tensors: Sequence[Any]) -> Any:
    """A new cache of the kind ``info`` describes holding ``tensors`` (exactly ``info.n_items``, checked by the caller)."""
    return builder(info)(tensors, False)


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
