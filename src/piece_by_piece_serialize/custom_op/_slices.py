"""Calls that carry only the cache layers they touch: the watch of a first call, and the cut call made from it.

Note [cut calls]
~~~~~~~~~~~~~~~~
The first eager call of a structure whose arguments hold a cache that may be cut (Note [cache slices] in
:mod:`..serialize._cache_slice`) carries the cache whole, as before, with its list of layers watched
(:func:`watch`). If the module touched only some layers, and its output does not hold the cache, the call
gets a *cut* twin (:func:`make_cut`): the same arguments, each watched cache described by its touched layers
only, with ``slices`` saying where they go, and its own key. The twin learns its output structure and first
shapes from the watched call itself (the carried tensors are a subset of the call's, the same objects), so a
structure called once eagerly can be traced. From then on the wrapper calls the operator with the twin's key
and tensors: a decoder layer's operator takes and returns its own layer of the cache, whatever the depth.

What the watch cannot see it refuses: a later call that touches another layer meets a spare layer, which
raises by name. Everything else is carried whole: a cache iterated, its list changed or replaced, an output
holding the cache, a constant among the carried layers' items.

Imports: :mod:`..serialize` (the cache slices) and :mod:`..type_info`; :mod:`._calls`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..serialize import _cache_slice
from ..type_info import CacheInfo, EncoderDecoderCacheInfo, TreeWithCachesInfo, _parse_cached
from ._calls import Call, aliases, flat_outputs, key_of


def watch(call: Call, given: Sequence[Any]) -> dict[int, Any] | None:
    """Watch the layers of every cache argument of ``call`` that may be cut, once per call structure; the
    watchers by argument, or ``None`` when there is nothing to watch."""
    if call.probed or call.slices:
        return None
    call.probed = True
    targets = [i for i in call.caches if _cache_slice.sliceable(_parse_cached(call.kinds[i]))]
    return {i: _cache_slice.watch(given[i]) for i in targets} or None


def touched(watchers: dict[int, Any], given: Sequence[Any]) -> dict[int, tuple[int, ...] | None]:
    """The layers each watched cache had touched (``None``: all of them), its plain list of layers given back."""
    return {i: _cache_slice.touched(given[i], w) for i, w in watchers.items()}


def make_cut(call: Call, found: dict[int, tuple[int, ...] | None], owner: str, tensors: Sequence[Any], output: Any,
             caches: Sequence[Any]) -> None:  # fmt: skip
    """Give ``call`` its cut twin (Note [cut calls]) when the watch allows it, learned from this very call:
    ``tensors`` it took, ``output`` and ``caches`` (its cache arguments after it) it gave."""
    infos: dict[int, CacheInfo] = {}
    for i, positions in found.items():
        info = _parse_cached(call.kinds[i])
        if positions is not None and isinstance(info, CacheInfo) and len(positions) < info.n_layers:
            infos[i] = info
    if not infos or aliases(output, caches) or _holds_cache(output, owner):
        return
    kinds = list(call.kinds)
    starts = _starts(call)
    drop: set[int] = set()  # flat items of the arguments not carried
    for i, info in infos.items():
        positions = found[i]
        assert positions is not None  # infos holds only those
        ranges = _cache_slice.layer_ranges(info)
        kept = {f for p in positions for f in ranges[p]}
        if any(starts[i] + f in call.constants for f in kept):
            return  # a constant among the carried items: its matcher would not say so
        drop.update(starts[i] + f for f in range(info.n_items) if f not in kept)
        kinds[i] = str(_cache_slice.cut_info(info, positions))
    flat = [f for f in range(call.n_flat) if f not in drop]
    new_index = {f: k for k, f in enumerate(flat)}
    constants = {new_index[f]: v for f, v in call.constants.items() if f in new_index}
    tensor_index = {f: t for t, f in enumerate(f for f in range(call.n_flat) if f not in call.constants)}
    kept_tensors = tuple(tensor_index[f] for f in flat if f not in call.constants)
    cache_tensors = frozenset(k for k, t in enumerate(kept_tensors) if t in call.cache_tensors)
    slices = tuple((i, info.n_layers, found[i]) for i, info in infos.items())
    cut = Call(tuple(kinds), call.n_positional, call.keywords, constants, len(flat), call.caches, cache_tensors,
               slices=slices, owner=owner)  # type: ignore[arg-type]  # found[i] is not None for the keys of infos
    cut_caches = [_cache_slice.cut_copy(c, found[i]) if i in infos else c for i, c in zip(call.caches, caches, strict=True)]  # type: ignore[arg-type]
    out_kinds, out, out_constants, n_flat = flat_outputs(owner, output, cut_caches)
    cut.learn_outputs(out_kinds, out_constants, n_flat, output, cut_caches)
    cut.out_dtypes, cut.out_devices = tuple(t.dtype for t in out), tuple(t.device for t in out)
    carried = [tensors[t] for t in kept_tensors]
    cut.shapes.append((tuple(t.size() for t in carried), tuple(t.size() for t in out)))
    call.sliced = (cut, key_of(cut.kinds, cut.keywords, constants, slices), kept_tensors)


def _starts(call: Call) -> list[int]:
    """The flat index at which each argument of ``call`` starts."""
    starts, at = [], 0
    for kind in call.kinds:
        starts.append(at)
        at += _parse_cached(kind).n_items
    return starts


def _holds_cache(output: Any, owner: str) -> bool:
    """Whether the module's output holds a cache (it would be flattened whole, spare layers and all)."""
    kind = flat_outputs(owner, output, ())[0][0]
    return isinstance(_parse_cached(kind), (CacheInfo, EncoderDecoderCacheInfo, TreeWithCachesInfo))
