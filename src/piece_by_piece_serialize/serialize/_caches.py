"""transformers caches <-> flat lists of items, through a registry of adapters; no pytree registration.

A cache is described by a :class:`~.type_info.CacheInfo` (its class, options and layer kinds, the
type-info string) and flattened into items: each layer's items in order (its adapter, :mod:`._layer_adapters`), after the
cache's own (``DFlashCache``'s accepted-token count). An ``EncoderDecoderCache`` is its self-attention
cache followed by its cross-attention cache. :func:`rebuild` makes a new cache of the same classes from a
description and the items, with every attribute the original had (the very same tensor objects).

The registry maps each supported class, by identity, to its adapter: the classes of
``transformers.cache_utils`` listed in :mod:`._cache_kinds`, bound the first time transformers is seen,
and the classes users register (:mod:`.caches`). A subclass is not its base class: it may hold more
state, so it is refused until registered.

Invariants: transformers is never imported to *inspect* a value (a value can only be a transformers cache
if ``transformers.cache_utils`` is already in ``sys.modules``); it is imported only to rebuild, when a
type-info string names a cache. Any cache or layer that is not registered, or that holds state its adapter
does not know, is refused with a ``TypeError`` naming it, never flattened into something else. Decoding
builds only registered classes: a name in a string is looked up in the registry, never imported.
Both directions run on every forward call of a replaced submodule: :func:`flatten_into` and the builders of
:func:`builder` take the common layers (populated ``DynamicLayer``, ``DynamicSlidingWindowLayer``,
``StaticLayer``) without a Python call per layer (Note [fast layers]).

Note [fast layers]
~~~~~~~~~~~~~~~~~~
:func:`flatten_into` (``serialize_args``, every forward call) appends the items of the three common layer
kinds inline, after checking what decides those items: the exact class, the number of instance attributes
(a layer with an attribute its adapter does not know has one more, and goes through
:meth:`~._cache_layers.LayerAdapter.describe`, which names it), ``is_initialized`` and an int count. It does
not compare the attributes a rebuild derives with the tensors (a layer's ``device`` with its keys'): that is
:func:`describe`'s job, which every type-info string and ``serialize_one`` go through. Caches with
offloading, whose layers may sit on another device than their tensors, always take the general route. The
builders rebuild a run of populated ``DynamicLayer`` inline and return ``None`` on anything unusual
(a tensor subclass, a wrong rank): the caller then takes the general route, which accepts subclasses and
raises the errors that name the argument and the item.

Imports: :mod:`..type_info` and the cache layer modules of this package (:mod:`._layer_adapters` for the
adapters, :mod:`._cache_fast` for the compiled builders); the rest of the serializer imports this module,
never the other way round.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from ..type_info import AnyCacheInfo, CacheInfo, EncoderDecoderCacheInfo, LayerInfo
from ..type_info._cache_kinds import CacheKind, cache_kinds, layer_kind, layer_kinds
from . import _cache_fast as _fast
from . import _cache_layers as L
from . import _kv_sharing
from ._cache_fast import _is_updated, _stream
from ._layer_adapters import bind_torch, make_adapter

_MODULE = "transformers.cache_utils"

# Bound by _bind() the first time a cache is flattened, described or rebuilt (transformers is loaded then).
_bound: Any = None  # the transformers.cache_utils module the names below come from
_Tensor: Any = None
_DynamicLayer: Any = None
_SlidingLayer: Any = None
_StaticLayer: Any = None
_LinearLayer: Any = None
_EncoderDecoderCache: Any = None
#: class -> adapter, for every supported layer class
LAYERS: dict[type, L.LayerAdapter] = {}
#: kind letter -> adapter that builds it
BUILDERS: dict[str, L.LayerAdapter] = {}
#: class -> adapter, for every supported cache class; empty until transformers is seen (then no value can be one)
SUPPORTED: dict[type, CacheAdapter | PairAdapter] = {}
#: cache name as spelled -> adapter
BY_NAME: dict[str, CacheAdapter | PairAdapter] = {}
_new = object.__new__
# user registrations made before transformers was bound: (kind, cls, extra, like) replayed by _bind
_PENDING_LAYERS: list[tuple[str, type, tuple[str, ...], str, frozenset[str]]] = []
_PENDING_CACHES: list[tuple[CacheKind, type, frozenset[str], dict[str, Any] | None]] = []


class CacheAdapter:
    """One cache class: its options, its own items, its layers (through the layer registry)."""

    base_attributes = frozenset({"layers", "layer_class_to_replicate", "offloading"})
    offload_attributes = frozenset({"only_non_sliding", "prefetch_stream"})

    def __init__(self, kind: CacheKind, cls: type, counts: frozenset[str] | None = None, placeholders: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.name = kind.name
        self.cls = cls
        # the cache's own items (a built-in cache's are counts; a registered one says which of its are)
        self.leading = tuple(kind.leading_items)
        self.counts = frozenset(kind.leading_items) if counts is None else counts
        self.leading_counts_only = all(name in self.counts for name in self.leading) and not kind.lists
        # registered list attributes, and what an empty entry is rebuilt as (a factory such as list, or None)
        self.lists = kind.lists
        self.placeholders = dict(placeholders or {})
        self.attributes = self.base_attributes | frozenset(self.leading) | frozenset(self.lists)

    def describe(self, cache: Any, what: str) -> CacheInfo:
        state = vars(cache)
        offloading = state.get("offloading")
        allowed = self.attributes | (self.offload_attributes if offloading else frozenset())
        if not state.keys() <= allowed:
            extra = sorted(set(state) - allowed)
            raise L.Refused(
                f"{what}: {self.cls.__qualname__} has attribute{'s' if len(extra) > 1 else ''} "
                f"{', '.join(map(repr, extra))} that this library does not know how to carry; register the class "
                "with piece_by_piece_serialize.register_cache_class naming its extra state, or report it"
            )
        options: list[tuple[str, None]] = []
        replicate = state.get("layer_class_to_replicate")
        if replicate is None:
            options.append(("n", None))
        elif replicate is not _DynamicLayer:
            raise L.Refused(
                f"{what}: layer_class_to_replicate is {getattr(replicate, '__qualname__', replicate)!r}; only None "
                "and DynamicLayer can be carried"
            )
        if type(offloading) is not bool:
            raise L.Refused(f"{what}: offloading is {offloading!r}")
        if offloading:
            options.append(("o", None))
            if state.get("only_non_sliding") is True:
                options.append(("p", None))
            elif state.get("only_non_sliding") is not False or "prefetch_stream" not in state:
                raise L.Refused(f"{what}: an offloading cache without only_non_sliding/prefetch_stream")
        for name in self.leading:
            if name not in state:
                raise L.Refused(f"{what}: {self.cls.__qualname__} has no attribute {name!r}")
            value = state[name]
            if name in self.counts and (type(value) is not int or value < 0):
                raise L.Refused(f"{what}: {name} is {value!r}, not a non-negative int")
            if name not in self.counts and not (value is None or isinstance(value, _Tensor)):
                hint = f"; register it with lists=({name!r},)" if type(value) is list else ""
                raise L.Refused(f"{what}: {name} is a {type(value).__name__}, not a tensor (or None){hint}")
        if self.lists:
            n = L.list_length(state, self.lists, what)
            if n:
                options.append(("l", n))  # type: ignore[arg-type]  # a number parameter
        layers = state.get("layers")
        if type(layers) is not list:
            raise L.Refused(f"{what}: layers is a {type(layers).__name__}, not a list")
        infos = []
        for i, layer in enumerate(layers):
            adapter = LAYERS.get(type(layer))
            if adapter is None:
                raise TypeError(
                    f"{what}: layer {i} is a {_qualname(type(layer))}, which is not supported; supported layers are "
                    f"{_supported_layers()} (a subclass or another class can be added with "
                    "piece_by_piece_serialize.register_cache_layer_class)"
                )
            infos.append(adapter.describe(layer, f"{what}: {adapter.where(i)}"))
        return CacheInfo.of_layers(infos, self.name, tuple(options))

    def flatten(self, cache: Any, info: CacheInfo, out: list[Any]) -> None:
        for name in self.leading:
            value = getattr(cache, name)
            out.append(L.count_item(value) if name in self.counts else value)
        if self.lists:
            L.flatten_lists(cache, self.lists, out)
        for layer, layer_info in zip(cache.layers, info.layers):  # noqa: B905 - info describes these layers; strict= doubles zip's cost
            LAYERS[type(layer)].flatten(layer, layer_info, out)

    def build(self, info: CacheInfo, items: Iterator[Any], what: str) -> Any:
        cache: Any = _new(self.cls)
        leading = [next(items) for _ in self.leading]
        if self.lists:
            L.build_lists(cache, self.lists, self.placeholders, info.list_length, items, what)
        layers: list[Any] = []
        index = 0
        for run in info.runs:
            layer = run.layer
            adapter = _builder_of(layer.kind)
            for _ in range(run.count):
                try:
                    layers.append(adapter.build(layer, items, ""))
                except (TypeError, ValueError) as err:  # the message names the item; say which layer
                    raise type(err)(f"{what} layer {index} ({adapter.cls.__qualname__}): {err}") from None
                index += 1
        cache.layers = layers
        cache.layer_class_to_replicate = None if info.option("n") else _DynamicLayer
        cache.offloading = info.option("o")
        if cache.offloading:
            cache.only_non_sliding = info.option("p")
            cache.prefetch_stream = _stream()
        for name, value in zip(self.leading, leading):  # noqa: B905 - one value taken per name above; strict= doubles zip's cost
            check = L.check_count if name in self.counts else L.check_optional_tensor
            try:
                setattr(cache, name, check(value, name))
            except (TypeError, ValueError) as err:
                raise type(err)(f"{what} {err}") from None
        return cache


class PairAdapter:
    """``EncoderDecoderCache``: two caches and ``is_updated``, which is derived (Note [derived attributes])."""

    attributes = frozenset({"self_attention_cache", "cross_attention_cache", "is_updated"})

    def __init__(self, kind: CacheKind, cls: type) -> None:
        self.kind, self.name, self.cls = kind, kind.name, cls

    def describe(self, cache: Any, what: str) -> EncoderDecoderCacheInfo:
        state = vars(cache)
        if not state.keys() <= self.attributes:
            extra = sorted(set(state) - self.attributes)
            raise L.Refused(f"{what}: {self.cls.__qualname__} has attributes {extra} that this library does not know how to carry")
        parts = []
        for part in ("self_attention_cache", "cross_attention_cache"):
            inner = state.get(part)
            adapter = SUPPORTED.get(type(inner))
            if adapter is None or isinstance(adapter, PairAdapter):
                _unsupported(inner, f"{what}.{part}")
            parts.append(adapter.describe(inner, f"{what}.{part}"))
        try:
            derived = _is_updated(state["cross_attention_cache"])
        except (TypeError, ValueError) as err:  # transformers refuses to measure some layers (DummyLayer)
            raise L.Refused(f"{what}: its cross-attention cache has no sequence length ({err})") from None
        if state.get("is_updated") != derived:
            raise L.Refused(
                f"{what}: is_updated is {state.get('is_updated')!r} but its cross-attention layers say {derived!r} "
                "(rebuilt as EncoderDecoderCache(...) computes it); this state cannot be carried"
            )
        return EncoderDecoderCacheInfo(parts[0], parts[1])

    def flatten(self, cache: Any, info: EncoderDecoderCacheInfo, out: list[Any]) -> None:
        # the ignores: both halves are plain caches (describe refuses a pair inside a pair), so BY_NAME gives
        # their CacheAdapters, which mypy cannot tell from the name
        BY_NAME[info.self_attention.name].flatten(cache.self_attention_cache, info.self_attention, out)  # type: ignore[arg-type]
        BY_NAME[info.cross_attention.name].flatten(cache.cross_attention_cache, info.cross_attention, out)  # type: ignore[arg-type]

    def build(self, info: EncoderDecoderCacheInfo, items: Iterator[Any], what: str) -> Any:
        first = _cache_adapter(info.self_attention.name).build(info.self_attention, items, f"{what} self_attention_cache")
        second = _cache_adapter(info.cross_attention.name).build(info.cross_attention, items, f"{what} cross_attention_cache")
        cache: Any = _new(self.cls)
        cache.self_attention_cache = first
        cache.cross_attention_cache = second
        cache.is_updated = _is_updated(second)
        return cache


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _supported_layers() -> str:
    return ", ".join(sorted({a.cls.__qualname__ for a in LAYERS.values()}))


def _supported_caches() -> str:
    return ", ".join(sorted({a.cls.__qualname__ for a in SUPPORTED.values()}))


def _unsupported(obj: Any, what: str) -> NoReturn:
    raise TypeError(
        f"{what}: {_qualname(type(obj))} is not supported; supported caches are {_supported_caches()} "
        "(a subclass or another class can be added with piece_by_piece_serialize.register_cache_class)"
    )


# --------------------------------------------------------------------------------------------------
# binding


def _bind(cu: Any) -> None:
    global _bound, _Tensor, _DynamicLayer, _SlidingLayer, _StaticLayer, _LinearLayer, _EncoderDecoderCache
    torch = sys.modules["torch"]  # transformers imported torch
    bind_torch(torch)
    LAYERS.clear()
    BUILDERS.clear()
    SUPPORTED.clear()
    BY_NAME.clear()
    for kind in layer_kinds():
        if kind.like is not None:
            continue  # a registered kind: replayed below with its class
        cls = getattr(cu, kind.class_name, None)  # a fixed name of our table, never one read from input
        if cls is None:  # an older transformers without this class: the kind cannot be built here
            continue
        adapter = make_adapter(kind.code, cls)
        BUILDERS[kind.code] = adapter
        if not kind.legacy:
            LAYERS[cls] = adapter
    for ckind in _builtin_cache_kinds():
        cls = getattr(cu, ckind.name, None)
        if cls is None:
            continue
        cadapter: CacheAdapter | PairAdapter = PairAdapter(ckind, cls) if ckind.pair else CacheAdapter(ckind, cls)
        SUPPORTED[cls] = cadapter
        BY_NAME[ckind.name] = cadapter
    for code, cls, extra, like, counts in _PENDING_LAYERS:
        adapter = make_adapter(code, cls, extra, like, counts)
        BUILDERS[code] = adapter
        LAYERS[cls] = adapter
    for ckind, cls, counts, placeholders in _PENDING_CACHES:
        cadapter = CacheAdapter(ckind, cls, counts, placeholders)
        SUPPORTED[cls] = cadapter
        BY_NAME[ckind.name] = cadapter
    _Tensor = torch.Tensor
    _DynamicLayer, _SlidingLayer, _StaticLayer = cu.DynamicLayer, cu.DynamicSlidingWindowLayer, cu.StaticLayer
    _LinearLayer = getattr(cu, "LinearAttentionLayer", None)
    _EncoderDecoderCache = cu.EncoderDecoderCache
    _bound = cu  # set last: the names above are complete once this is


def _builtin_cache_kinds() -> list[CacheKind]:
    return [k for k in cache_kinds() if k.like is None]


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


def is_written_back(obj: Any) -> bool:
    """Whether a custom operator writes ``obj`` back after the call: a cache, or a KVSharingDict."""
    return is_cache(obj) or _kv_sharing.is_kv_sharing(obj)


def is_cache(obj: Any) -> bool:
    """Whether ``obj`` is any transformers ``Cache`` (supported or not) or a registered cache class."""
    cu = sys.modules.get(_MODULE)
    if cu is None:
        return False
    if cu is not _bound:
        _bind(cu)
    return type(obj) in SUPPORTED or isinstance(obj, cu.Cache)


_registered_state: tuple[int, bool] = (-1, False)


def pytree_registered_caches() -> bool:
    """Whether some supported cache class is registered as a pytree node (then pytree must be told to stop
    at caches). Recomputed only when pytree's registry changes size."""
    global _registered_state
    from torch.utils._pytree import SUPPORTED_NODES

    n = len(SUPPORTED_NODES)
    if _registered_state[0] != n:
        cu = sys.modules.get(_MODULE)
        found = cu is not None and any(
            isinstance(cls, type) and (cls in SUPPORTED or issubclass(cls, cu.Cache)) for cls in SUPPORTED_NODES
        )
        _registered_state = (n, found)
    return _registered_state[1]


def _builder_of(code: str) -> L.LayerAdapter:
    adapter = BUILDERS.get(code)
    if adapter is None:
        kind = layer_kind(code)
        name = kind.class_name if kind else code
        raise TypeError(f"this transformers ({_bound.__name__}) has no {name}: layer kind {code!r} cannot be rebuilt")
    return adapter


def _cache_adapter(name: str) -> Any:
    adapter = BY_NAME.get(name)
    if adapter is None:
        raise TypeError(f"cache {name!r} cannot be rebuilt: this transformers has no such class, or it is not registered")
    return adapter


# --------------------------------------------------------------------------------------------------
# describe / flatten


def describe(cache: Any, what: str = "cache") -> AnyCacheInfo:
    """The type-info node of a supported cache; ``TypeError`` naming ``what`` for any other cache."""
    _loaded()
    adapter = SUPPORTED.get(type(cache))
    if adapter is None:
        _unsupported(cache, what)
    return adapter.describe(cache, what)


def flatten(cache: Any, info: AnyCacheInfo | None = None) -> list[Any]:
    """The items of a supported cache, in the order of its type-info string."""
    if info is None:
        info = describe(cache)
    out: list[Any] = []
    SUPPORTED[type(cache)].flatten(cache, info, out)  # type: ignore[arg-type]  # info describes this cache, so fits its adapter
    return out


def flatten_into(cache: Any, out: list[Any]) -> bool:
    """Append :func:`flatten` of ``cache`` to ``out`` if it is a supported cache, and say whether it was.

    For anything else (another cache or layer class, a layer holding unknown state) ``out`` is left as
    it was and the answer is ``False``; :func:`describe` then says why. This is :func:`describe` and the
    flattening in one pass, without type-info nodes, and inline for the common layers (Note [fast layers]):
    ``serialize_args`` runs it on every forward call.
    """
    adapter = SUPPORTED.get(type(cache))
    if adapter is None:
        return False
    start = len(out)
    state = cache.__dict__
    if (
        type(adapter) is CacheAdapter
        and len(state) == 3 + len(adapter.leading)  # an offloading cache has 5 attributes: the general route
        and state["offloading"] is False
        and (state["layer_class_to_replicate"] is None or state["layer_class_to_replicate"] is _DynamicLayer)
        and adapter.leading_counts_only
    ):
        count_item = L.count_item
        for name in adapter.leading:
            out.append(count_item(state[name]))
        append = out.append
        dynamic, sliding, static, linear = _DynamicLayer, _SlidingLayer, _StaticLayer, _LinearLayer
        for layer in state["layers"]:
            kind = type(layer)
            d = layer.__dict__
            if kind is dynamic and len(d) == 4 and d["is_initialized"] is True:
                append(d["keys"])
                append(d["values"])
            elif kind is sliding and len(d) == 8 and d["is_initialized"] is True and type(d["cumulative_length"]) is int:
                append(d["keys"])
                append(d["values"])
                append(count_item(d["cumulative_length"]))
            elif kind is static and len(d) == 10 and d["is_initialized"] is True:
                append(d["keys"])
                append(d["values"])
                append(d["cumulative_length"])
            elif kind is linear and len(d) == 10:
                conv, rec = d["conv_states"], d["recurrent_states"]
                for i in range(d["number_of_states"]):
                    c, r = conv[i], rec[i]
                    if c is not None:
                        append(c)
                    if r is not None:
                        append(r)
            else:
                layer_adapter = LAYERS.get(kind)
                try:
                    if layer_adapter is None:
                        raise TypeError
                    layer_adapter.flatten(layer, layer_adapter.describe(layer, "layer"), out)
                except (TypeError, ValueError):
                    del out[start:]
                    return False
        return True
    try:
        adapter.flatten(cache, adapter.describe(cache, "cache"), out)  # type: ignore[arg-type]  # the info its own describe gives
    except (TypeError, ValueError):
        del out[start:]
        return False
    return True


def flatten_supported(cache: Any) -> list[Any] | None:
    """:func:`flatten` of a supported cache, or ``None`` for any other cache (then :func:`describe` says why)."""
    if sys.modules.get(_MODULE) is not _bound:
        _loaded()
    out: list[Any] = []
    return out if flatten_into(cache, out) else None


# --------------------------------------------------------------------------------------------------
# rebuild


def rebuild(info: AnyCacheInfo, items: Sequence[Any], what: str = "cache") -> Any:
    """A new cache of the kind ``info`` describes holding ``items`` (exactly ``info.n_items``, counted by the
    caller). Every item is checked; ``TypeError``/``ValueError`` name ``what``, the layer and the item."""
    _loaded()
    name = "EncoderDecoderCache" if isinstance(info, EncoderDecoderCacheInfo) else info.name
    it = iter(items)
    cache = _cache_adapter(name).build(info, it, what)
    if next(it, _END) is not _END:  # the adapters consume exactly LayerInfo.item_names(): a bug if not
        raise AssertionError(f"{what}: {info} left items unread")
    return cache


_END = object()


def builder(info: AnyCacheInfo) -> Callable[[Sequence[Any]], Any]:
    """A function ``build(items)`` making new caches of the kind ``info`` describes, or ``None``.

    ``items`` must hold exactly ``info.n_items`` items. ``None`` is the answer whenever an item is not
    exactly what the common case holds (Note [fast layers]); the caller then calls :func:`rebuild`, which
    accepts tensor subclasses and names what is wrong. Compile once per ``info``.
    """
    _loaded()
    if isinstance(info, CacheInfo) and info.name == "DynamicCache" and all(
        run.layer.kind == "D" and run.layer.populated for run in info.runs
    ):
        replicate = None if info.option("n") else _DynamicLayer
        return _fast.plain_builder(_Tensor, _DynamicLayer, BY_NAME["DynamicCache"].cls, replicate)
    if isinstance(info, EncoderDecoderCacheInfo):
        first, second = _compiled(info.self_attention), _compiled(info.cross_attention)
        return _fast.pair_builder(first, second, BY_NAME["EncoderDecoderCache"].cls)
    compiled = _compiled(info)
    return lambda items: compiled(iter(items))


def _compiled(info: CacheInfo) -> Callable[[Iterator[Any]], Any]:
    """A function taking the items of one cache from an iterator and making it, or giving up (``None``)."""
    adapter = _cache_adapter(info.name)
    if adapter.lists:  # registered lists take the general route (rebuild), which knows them
        return lambda it: None
    runs = [(run.count, _fast.maker(_builder_of(run.layer.kind), run.layer)) for run in info.runs]
    replicate = None if info.option("n") else _DynamicLayer
    return _fast.cache_maker(
        adapter.cls, adapter.leading, adapter.counts, _Tensor, runs, replicate, info.option("o"), info.option("p")
    )


# --------------------------------------------------------------------------------------------------
# copies and write-back


def copy_cache(cache: Any, clone: Callable[[Any], Any], info: AnyCacheInfo | None = None) -> Any:
    """A copy of a supported cache: same classes, kinds and state, every item passed through ``clone``; ``info``,
    if given, is its description (:func:`describe`)."""
    info = describe(cache) if info is None else info
    return rebuild(info, [clone(x) for x in flatten(cache, info)])


def write_back(dst: Any, src: Any) -> None:
    """Make ``dst`` hold the state of ``src`` (a cache of the same class), in place.

    ``dst`` keeps its identity, and so does each of its layers whose class matches ``src``'s at the same
    index (their attributes are replaced by ``src``'s, tensors rebound, not copied); other layers are
    replaced, missing ones appended, extra ones removed. This is how the updates a submodule makes to a
    cache it received reach the caller's cache after a custom operator returned the new state.
    """
    if type(dst) is not type(src):
        raise TypeError(f"write_back: cannot write a {type(src).__qualname__} into a {type(dst).__qualname__}")
    if _kv_sharing.is_kv_sharing(dst):  # the other argument layers share and mutate (Note [shared arguments])
        return _kv_sharing.write_back(dst, src)
    if hasattr(src, "self_attention_cache"):
        write_back(dst.self_attention_cache, src.self_attention_cache)
        write_back(dst.cross_attention_cache, src.cross_attention_cache)
        dst.is_updated = dict(src.is_updated)
        return
    layers = dst.layers
    for i, layer in enumerate(src.layers):
        if i < len(layers) and type(layers[i]) is type(layer):
            target = layers[i].__dict__
            target.clear()
            target.update(layer.__dict__)
        elif i < len(layers):
            layers[i] = layer
        else:
            layers.append(layer)
    del layers[len(src.layers) :]
    for name, value in src.__dict__.items():
        if name != "layers":
            setattr(dst, name, value)
    for name in list(dst.__dict__):
        if name not in src.__dict__:
            delattr(dst, name)


# --------------------------------------------------------------------------------------------------
# registration (the public functions are in caches.py)


def register_layer(code: str, cls: type, extra: tuple[str, ...], like: str, counts: frozenset[str]) -> None:
    _PENDING_LAYERS.append((code, cls, extra, like, counts))
    if _bound is not None:
        adapter = make_adapter(code, cls, extra, like, counts)
        BUILDERS[code] = adapter
        LAYERS[cls] = adapter


def register_cache(kind: CacheKind, cls: type, counts: frozenset[str], placeholders: dict[str, Any] | None = None) -> None:
    _PENDING_CACHES.append((kind, cls, counts, placeholders))
    if _bound is not None:
        adapter = CacheAdapter(kind, cls, counts, placeholders)
        SUPPORTED[cls] = adapter
        BY_NAME[kind.name] = adapter


__all__ = [
    "LayerInfo",
    "builder",
    "cache_module",
    "copy_cache",
    "describe",
    "flatten",
    "flatten_into",
    "flatten_supported",
    "is_cache",
    "is_written_back",
    "rebuild",
    "write_back",
]
