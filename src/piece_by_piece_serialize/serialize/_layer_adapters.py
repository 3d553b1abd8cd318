"""Which adapter class builds each layer kind letter, across the adapter families; :func:`make_adapter`.

The families (:mod:`._cache_attention`, :mod:`._cache_linear`, :mod:`._cache_quantized`) each define
adapters on the common base of :mod:`._cache_layers` and know nothing of one another; this table is the one
place that lists them all, so that adding a family never makes two layer modules import each other.
:mod:`._caches` asks it for the adapter of every layer class it binds or that users register.

Imports: :mod:`..type_info` and the layer modules named above (never :mod:`._caches`).
"""

from __future__ import annotations

from typing import Any

from ..type_info._cache_kinds import layer_kind
from . import _cache_attention as A
from . import _cache_layers as L
from . import _cache_linear as LIN
from . import _cache_quantized as Q

#: kind letter -> adapter class; hybrids take the adapter of their attention half
ADAPTERS: dict[str, type[L.LayerAdapter]] = {
    "D": A.DynamicAdapter,
    "S": A.SlidingAdapter,
    "W": A.SlidingAdapter,
    "I": A.IndexedAdapter,
    "T": A.StaticAdapter,
    "V": A.StaticSlidingAdapter,
    "J": A.StaticIndexedAdapter,
    "F": A.Fp8Adapter,
    "A": LIN.LinearAdapter,
    "X": LIN.DummyAdapter,
    # the quantized layers, whose states are a backend's objects
    "Q": Q.QuantoAdapter,
    "H": Q.HQQAdapter,
}
#: hybrid kind letter -> the kind letter of its attention half
HYBRIDS: dict[str, str] = {"B": "D", "C": "S", "G": "T", "K": "V"}


def bind_torch(torch: Any) -> None:
    """Give every layer module the torch names it reads (called once transformers, hence torch, is loaded)."""
    L.bind_torch(torch)
    A.bind_torch(torch)
    LIN.bind_torch(torch)


def make_adapter(
    code: str, cls: type, extra: tuple[str, ...] = (), like: str | None = None, counts: frozenset[str] = frozenset()
) -> L.LayerAdapter:
    """The adapter of ``cls`` for the kind ``code``; ``like`` is the built-in kind a registered one behaves as."""
    kind = layer_kind(code)
    assert kind is not None
    base = like or code
    if base in HYBRIDS:
        attention = ADAPTERS[HYBRIDS[base]](layer_kind(HYBRIDS[base]), cls)  # type: ignore[arg-type]
        adapter: L.LayerAdapter = LIN.HybridAdapter(kind, cls, attention)
    else:
        adapter = ADAPTERS[base](kind, cls)
    if extra:
        adapter.extra = extra
        adapter.extra_counts = counts
        adapter.attributes = adapter.attributes | frozenset(extra)
        adapter.order = (*adapter.order, *extra)
    return adapter
