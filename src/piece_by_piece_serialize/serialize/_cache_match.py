"""A cache matched against the description of an earlier one and flattened in one pass (Note [cache matchers]).

Note [cache matchers]
~~~~~~~~~~~~~~~~~~~~~
A module behind a custom operator is given a cache of the same structure on every call (the same classes, layer
kinds and windows; only the tensors change), and the wrapper needs two things of it each time: whether its
description is still the one the call structure was made of, and its flat items. :func:`._caches.describe`
answers the first from scratch (a type-info node per layer, every check of every adapter), so a call site
describing its cache again costs that work per layer and per call. :func:`matcher` compiles, once per
description, a function ``match(cache, out)`` that either appends to ``out`` exactly the items
:func:`._caches.flatten` gives and returns ``True`` -- which it does only when :func:`._caches.describe` would
give an equal description without raising -- or returns ``False`` having appended nothing, and the caller then
describes the cache in full, which raises the errors that name what is wrong.

What it reads to know that: the cache's exact class and its attribute names, its ``offloading`` and
``layer_class_to_replicate`` (the cache options), the number of layers, and per layer either

* for a populated ``DynamicLayer`` (the common case, ``D`` with no registered extra), what the adapter's describe
  reads: the exact layer class, its four attribute names, ``is_initialized is True``, keys and values tensors,
  and its ``device`` against its keys' (an offloaded layer is refused by describe, so it is not matched here); or
* for every other layer, its adapter's own describe, compared with the recorded layer description;

and a cache with its own items, registered lists, offloading or two halves (``EncoderDecoderCache``) is matched
by its adapter's describe compared whole. So a match costs the reads describe makes for the common layers and no
type-info node, string or error text; nothing describe would refuse or describe otherwise is matched.

Imports: :mod:`._caches` (the registry, the bound transformers classes) and :mod:`..type_info`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..type_info import AnyCacheInfo, CacheInfo, LayerInfo
from . import _cache_attention as A
from . import _caches

#: ``match(cache, out) -> bool``: appends the cache's items to ``out`` and says yes, or appends nothing
Matcher = Callable[[Any, list[Any]], bool]
_LayerMatcher = Callable[[Any, list[Any]], bool]


def matcher(info: AnyCacheInfo, cls: type, what: str) -> tuple[Matcher, bool]:
    """A matcher for caches of class ``cls`` described as ``info`` (Note [cache matchers]), and whether every item
    it appends is a tensor (otherwise some may be ``None``, an empty entry, which the caller compares as a
    constant); ``what`` names the argument in the errors an adapter's describe raises, as
    :func:`._caches.describe` is given it."""
    _caches._loaded()
    adapter = _caches.SUPPORTED[cls]
    if (
        isinstance(info, CacheInfo)
        and type(adapter) is _caches.CacheAdapter
        and not adapter.leading
        and not adapter.lists
        and not info.option("o")
    ):
        checks = [_layer(i, layer, what) for i, layer in enumerate(info.layers)]
        if checks and all(getattr(c, "tensors_only", False) for c in checks):
            return _all_dynamic(cls, info), True
        return _plain(cls, info, checks), False
    return _described(adapter, cls, info, what), False


def _described(adapter: Any, cls: type, info: AnyCacheInfo | LayerInfo, what: str) -> Matcher:
    """A supported cache, or one layer of one, of exactly class ``cls``: its adapter's describe, compared whole."""

    def match(cache: Any, out: list[Any]) -> bool:
        if type(cache) is not cls or adapter.describe(cache, what) != info:
            return False
        adapter.flatten(cache, info, out)
        return True

    return match


def _plain(cls: type, info: CacheInfo, checks: list[_LayerMatcher]) -> Matcher:
    """A cache whose state is its layers and the two options (``DynamicCache`` and the like)."""
    replicate = None if info.option("n") else _caches._DynamicLayer
    n = len(checks)

    def match(cache: Any, out: list[Any]) -> bool:
        layers = _layers(cache, cls, replicate, n)
        if layers is None:
            return False
        start = len(out)
        for layer, check in zip(layers, checks):  # noqa: B905 - lengths compared above; strict= doubles zip's cost
            if not check(layer, out):
                del out[start:]
                return False
        return True

    return match


def _layers(cache: Any, cls: type, replicate: Any, n: int) -> list[Any] | None:
    """The list of ``n`` layers of a cache of exactly class ``cls`` whose only other state is the two options,
    not offloaded and replicating ``replicate``; ``None`` for anything else."""
    if type(cache) is not cls:
        return None
    state = cache.__dict__
    # three attributes, two of them named: the third is "layers" or describe refuses it (and we decline)
    if len(state) != 3 or state.get("offloading") is not False or "layer_class_to_replicate" not in state:
        return None
    layers = state.get("layers")
    if state["layer_class_to_replicate"] is not replicate or type(layers) is not list or len(layers) != n:
        return None
    return layers


def _all_dynamic(cls: type, info: CacheInfo) -> Matcher:
    """:func:`_plain` of a cache whose every layer is a populated ``DynamicLayer``."""
    replicate = None if info.option("n") else _caches._DynamicLayer
    n = len(info.layers)

    def match(cache: Any, out: list[Any]) -> bool:
        layers = _layers(cache, cls, replicate, n)
        return layers is not None and _dynamic_layers(layers, out)

    return match


def _dynamic_layers(layers: Iterable[Any], out: list[Any]) -> bool:
    """Whether each of ``layers`` is a populated ``DynamicLayer``, read as :func:`_dynamic`'s match reads one, inlined
    (a Python call per layer is most of what a layer costs here); if so their keys and values are appended to
    ``out``, else nothing is."""
    layer_cls, tensor = _caches._DynamicLayer, _caches._Tensor
    start = len(out)
    append = out.append
    for layer in layers:
        if type(layer) is not layer_cls:
            break
        d = layer.__dict__
        if len(d) != 4 or d.get("is_initialized") is not True or "device" not in d:
            break
        keys, values = d.get("keys"), d.get("values")
        if not isinstance(keys, tensor) or not isinstance(values, tensor) or d["device"] != keys.device:
            break
        append(keys)
        append(values)
    else:
        return True
    del out[start:]
    return False


def _layer(index: int, info: LayerInfo, what: str) -> _LayerMatcher:
    adapter = _caches.BUILDERS.get(info.kind)
    layer_cls = adapter.cls if adapter is not None else None
    if adapter is None or _caches.LAYERS.get(layer_cls) is not adapter:  # type: ignore[arg-type]  # None is never a key
        return _never
    if type(adapter) is A.DynamicAdapter and not adapter.extra and info == LayerInfo(adapter.code, True):
        return _dynamic(layer_cls, _caches._Tensor)  # type: ignore[arg-type]  # a class, adapter.cls
    return _described(adapter, layer_cls, info, f"{what}: {adapter.where(index)}")  # type: ignore[arg-type]  # a class, adapter.cls


def _never(layer: Any, out: list[Any]) -> bool:
    return False  # a kind no adapter builds here: the full description says why


def _dynamic(layer_cls: type, tensor: Any) -> _LayerMatcher:
    """A populated ``DynamicLayer``: the reads of ``DynamicAdapter.describe`` (Note [cache matchers])."""

    def match(layer: Any, out: list[Any]) -> bool:
        if type(layer) is not layer_cls:
            return False
        d = layer.__dict__
        # four attributes, two named here and keys/values read below: exactly the adapter's four
        if len(d) != 4 or d.get("is_initialized") is not True or "device" not in d:
            return False
        keys, values = d.get("keys"), d.get("values")
        if not isinstance(keys, tensor) or not isinstance(values, tensor) or d["device"] != keys.device:
            return False
        out.append(keys)
        out.append(values)
        return True

    match.tensors_only = True  # type: ignore[attr-defined]  # read by matcher(): its items are the tensors checked above
    return match


def cut_matcher(info: CacheInfo, n_layers: int, positions: tuple[int, ...], what: str) -> Matcher:
    """A matcher for caches of ``n_layers`` layers carried cut to the layers at ``positions``, which ``info``
    describes (Note [cache slices] in :mod:`._cache_slice`): the cache's class, options and number of layers as
    :func:`_plain` reads them, and the carried layers only; their items are appended, the other layers' are not
    read (the call never uses them: their spares refuse it). A cache it refuses appends nothing."""
    _caches._loaded()
    cls = _caches.BY_NAME[info.name].cls
    replicate = None if info.option("n") else _caches._DynamicLayer
    checks = [(i, _layer(i, layer, what)) for i, layer in zip(positions, info.layers, strict=True)]
    if all(getattr(check, "tensors_only", False) for _, check in checks):  # the common case, without a call per layer

        def dynamic(cache: Any, out: list[Any]) -> bool:
            layers = _layers(cache, cls, replicate, n_layers)
            return layers is not None and _dynamic_layers(map(layers.__getitem__, positions), out)

        return dynamic

    def match(cache: Any, out: list[Any]) -> bool:
        layers = _layers(cache, cls, replicate, n_layers)
        if layers is None:
            return False
        start = len(out)
        for i, check in checks:
            if not check(layers[i], out):
                del out[start:]
                return False
        return True

    return match
