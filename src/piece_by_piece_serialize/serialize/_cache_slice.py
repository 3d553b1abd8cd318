"""A cache cut down to the layers one call touches, and grown back to its length (Note [cache slices]).

Note [cache slices]
~~~~~~~~~~~~~~~~~~~
A decoder layer behind a custom operator reads and writes one layer of the cache it is given (``cache.update(k,
v, self.layer_idx)``), yet the cache it is given holds every layer: carried whole, an L-layer step moves O(L)
tensors through each of L operators. So the custom-op layer watches which layers a call touches
(:func:`watch`, :func:`touched`) and from then on carries only those: the operator takes the items of the
touched layers, the kernel rebuilds a cache of just those layers (an ordinary cache of the same class, so its
type-info string is the usual one) and :func:`grow` puts them back at their positions among *spare* layers,
placeholders (:class:`Untouched`) that refuse every use by name. After the call :func:`cut` takes the touched
layers out again, checking that the module left every spare where it was, and :func:`write_back_layers` writes
them into the caller's cache at their positions.

Exactness rests on three points: a spare cannot be read or written without an :class:`UntouchedLayerError`
naming the layer (attribute reads, truth value, comparison, iteration, a call); the list of layers keeps its
length, so code that reads ``len(cache.layers)`` sees what it would have seen; and only caches whose whole
state is the list of layers and two options are cut (:func:`sliceable`): ``DynamicCache``, ``StaticCache``, the
hybrid caches of linear-attention models (their layers are the layer list's entries), sliding-window layers,
registered caches without leading items or lists. A cache with items of its own (``DFlashCache``), registered
lists (``MiniMaxCache``), offloading, or two halves (``EncoderDecoderCache``, whose ``is_updated`` is keyed by
layer index) is carried whole, as is a ``KVSharingDict``.

Touches are watched on the cache's ``layers`` list itself (:class:`Touched`, a list that records what is read):
an index read records that layer; iterating, slicing, searching or changing the list records every layer (the
cache is then carried whole).

Imports: :mod:`._caches` (the registry) and :mod:`..type_info`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..type_info import CacheInfo, TypeInfo
from . import _caches

_new = object.__new__


class UntouchedLayerError(TypeError):
    """A module used a cache layer it was not seen touching when its call structure was recorded."""


def sliceable(info: TypeInfo) -> bool:
    """Whether a cache described as ``info`` may be cut to some of its layers (Note [cache slices])."""
    if not isinstance(info, CacheInfo) or info.option("o"):
        return False
    _caches._loaded()
    adapter = _caches.BY_NAME.get(info.name)
    return type(adapter) is _caches.CacheAdapter and not adapter.leading and not adapter.lists


def layer_ranges(info: CacheInfo) -> list[range]:
    """Where each layer's items are in the flat items of a sliceable cache described as ``info``."""
    out: list[range] = []
    start = 0
    for layer in info.layers:
        out.append(range(start, start + layer.n_items))
        start += layer.n_items
    return out


def cut_info(info: CacheInfo, positions: Sequence[int]) -> CacheInfo:
    """The description of the cache of the layers at ``positions`` only."""
    layers = info.layers
    return CacheInfo.of_layers([layers[i] for i in positions], info.name, info.options)


class Touched(list):  # type: ignore[type-arg]  # holds the layers, whatever their classes
    """A cache's list of layers that records which entries are read (Note [cache slices])."""

    def __init__(self, layers: Sequence[Any]) -> None:
        super().__init__(layers)
        self.read: set[int] = set()
        self.whole = False  # iterated, sliced or changed: every layer counts as touched

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int and -len(self) <= index < len(self):
            self.read.add(index % len(self))
        else:
            self.whole = True
        return list.__getitem__(self, index)



def _every(name: str) -> Any:
    """The list method ``name``, recording that every layer is touched before it runs."""
    method = getattr(list, name)

    def every(self: Touched, *args: Any, **kwargs: Any) -> Any:
        self.whole = True
        return method(self, *args, **kwargs)

    every.__name__ = every.__qualname__ = name
    return every


for _name in ("__iter__", "__reversed__", "__contains__", "__setitem__", "__delitem__", "__iadd__", "__imul__",
              "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "index", "count", "copy"):  # fmt: skip
    setattr(Touched, _name, _every(_name))


def watch(cache: Any) -> Touched:
    """Make ``cache``'s list of layers a :class:`Touched` and return it."""
    touched_list = Touched(cache.__dict__["layers"])
    cache.__dict__["layers"] = touched_list
    return touched_list


def touched(cache: Any, watcher: Touched) -> tuple[int, ...] | None:
    """Give ``cache`` back a plain list of layers; the positions the call touched, or ``None`` for every layer
    (iterated, changed, or the list replaced)."""
    current = cache.__dict__.get("layers")
    if current is watcher:
        cache.__dict__["layers"] = list.copy(watcher)
    if current is not watcher or watcher.whole:
        return None
    return tuple(sorted(watcher.read))


class Untouched:
    """A spare layer: any use of it raises :class:`UntouchedLayerError` (Note [cache slices])."""

    __slots__ = ("_message",)

    def __init__(self, message: str) -> None:
        object.__setattr__(self, "_message", message)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise UntouchedLayerError(object.__getattribute__(self, "_message"))

    def __getattribute__(self, name: str) -> Any:
        raise UntouchedLayerError(object.__getattribute__(self, "_message"))

    __setattr__ = __delattr__ = __bool__ = __len__ = __iter__ = __call__ = __eq__ = __ne__ = _refuse
    __hash__ = None  # type: ignore[assignment]  # unhashable, as a spare must not be a key

    def __repr__(self) -> str:
        return "<a cache layer this call does not carry>"


def spares(n_layers: int, positions: Sequence[int], what: str) -> list[Any]:
    """A list of ``n_layers`` spare layers, ``None`` at ``positions`` (where the carried layers go)."""
    out: list[Any] = [
        Untouched(
            f"{what}: the module used layer {i} of its cache, which it did not touch when this call structure was "
            f"first recorded (it touched layers {list(positions)}); behind a custom operator a call carries only the "
            "cache layers it was seen touching (Note [cache slices] in piece_by_piece_serialize.serialize._cache_slice). "
            "A module whose cache layers depend on its inputs cannot be carried this way: report it"
        )
        for i in range(n_layers)
    ]
    for i in positions:
        out[i] = None
    return out


def grow(cache: Any, positions: Sequence[int], spare: list[Any]) -> None:
    """Put the layers of ``cache`` (one per position) at ``positions`` among the spare layers, in place."""
    layers = list(spare)
    carried = cache.__dict__["layers"]
    for k, i in enumerate(positions):
        layers[i] = carried[k]
    cache.__dict__["layers"] = layers


def cut(cache: Any, positions: Sequence[int], spare: list[Any], what: str) -> Any:
    """Take the layers at ``positions`` out of ``cache`` again, in place, after the call; raise
    :class:`UntouchedLayerError` if the module changed the list elsewhere than at ``positions``."""
    layers = cache.__dict__.get("layers")
    if type(layers) is not list or len(layers) != len(spare):
        raise UntouchedLayerError(f"{what}: the module replaced or resized its cache's list of layers, of which the call carries only {list(positions)}")
    kept = [layers[i] for i in positions]
    for i in positions:
        layers[i] = None
    if not all(map(operator.is_, layers, spare)):
        changed = [i for i, (a, b) in enumerate(zip(layers, spare, strict=True)) if a is not b]
        raise UntouchedLayerError(f"{what}: the module replaced cache layer(s) {changed}, which the call does not carry (it carries {list(positions)})")
    cache.__dict__["layers"] = kept
    return cache


def cut_copy(cache: Any, positions: Sequence[int]) -> Any:
    """A new cache object holding the layers of ``cache`` at ``positions`` (the same layer objects)."""
    new = _new(type(cache))
    new.__dict__.update(cache.__dict__)
    layers = cache.__dict__["layers"]
    new.__dict__["layers"] = [layers[i] for i in positions]
    return new


def write_back_layers(dst: Any, src: Any, positions: Sequence[int]) -> None:
    """Write the layers of ``src`` (a cut cache) into ``dst`` at ``positions``, and ``src``'s options, in place:
    :func:`._caches.write_back` for the carried layers only."""
    if type(dst) is not type(src):
        raise TypeError(f"write_back: cannot write a {type(src).__qualname__} into a {type(dst).__qualname__}")
    layers = dst.layers
    for layer, i in zip(src.layers, positions, strict=True):
        if type(layers[i]) is type(layer):
            target = layers[i].__dict__
            target.clear()
            target.update(layer.__dict__)
        else:
            layers[i] = layer
    for name, value in src.__dict__.items():
        if name != "layers":
            setattr(dst, name, value)
