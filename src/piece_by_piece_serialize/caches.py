"""Which cache classes the serializer carries, and how to add your own.

Every cache and layer class of ``transformers.cache_utils`` is supported out of the box (the table is
:func:`supported_caches`; docs/serialization.md, section "Caches", explains each spelling). A class of your
own, typically a subclass of a transformers cache or layer that adds some state, is refused until you
register it, the way ``torch.utils._pytree.register_pytree_node`` makes a container known to pytree:

>>> from transformers.cache_utils import DynamicCache
>>> from piece_by_piece_serialize import register_cache_class
>>> class StepCache(DynamicCache):           # a DynamicCache that also counts the steps it has seen
...     def __init__(self, *args, **kwargs):
...         super().__init__(*args, **kwargs)
...         self.steps = 0
>>> register_cache_class(StepCache, like=DynamicCache, counts=("steps",))
'StepCache'

From then on ``type_as_str_with_info`` spells such a cache ``StepCache_<layers>``, ``serialize_one`` adds
``steps`` to its items and ``deserialize_args`` rebuilds a ``StepCache`` with it. Decoding builds only
registered classes: the name in a string is looked up in the registry, never imported.

Invariants: a registration never changes the meaning of a string that parsed before (names and kind
letters are only ever added); the extra state named at registration is checked on every object (a
missing attribute or one of the wrong kind is refused, naming it), and an attribute that is neither the
base class's nor registered is refused too.

Imports: the cache vocabulary of :mod:`.type_info` at import time, the registry of :mod:`.serialize` on use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .type_info import _cache_kinds as K

__all__ = ["register_cache_class", "register_cache_layer_class", "supported_caches"]


def _names(value: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(n, str) and n.isidentifier() for n in value):
        raise TypeError(f"{what} must be a sequence of attribute names, got {value!r}")
    return tuple(value)


def _extra(tensors: Sequence[str], counts: Sequence[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    t, c = _names(tensors, "tensors"), _names(counts, "counts")
    both = set(t) & set(c)
    if both or len(set(t)) != len(t) or len(set(c)) != len(c):
        raise ValueError(f"each extra attribute is named once, in tensors or in counts: {sorted(both) or (t, c)}")
    return (*c, *t), frozenset(c)


def _transformers_class(like: Any, what: str) -> Any:
    from .serialize import _caches

    cu = _caches._loaded()
    if not isinstance(like, type):
        raise TypeError(f"{what} must be a transformers class, got {like!r}")
    return cu


def register_cache_class(
    cls: type,
    *,
    like: type,
    name: str | None = None,
    tensors: Sequence[str] = (),
    counts: Sequence[str] = (),
    lists: Sequence[str] | Mapping[str, Callable[[], Any] | None] = (),
) -> str:
    """Let the serializer carry objects of ``cls``, a cache class that holds what ``like`` holds and more.

    ``like`` is the supported cache class whose state ``cls`` has (``DynamicCache``, ``StaticCache``, ...;
    usually its base class); ``tensors`` names attributes of ``cls`` holding a tensor (or ``None``: an optional
    tensor, carried as a ``None`` item), ``counts`` attributes holding a non-negative int that changes as the
    model runs (carried as a count tensor, see docs/serialization.md), and ``lists`` attributes holding a list
    whose entries are tensors or empty (``None`` or ``[]``, one item each; all such lists of an object have the
    same length, which type-info strings spell as the option ``l<length>``). With a mapping, ``lists`` also says
    what an empty entry is rebuilt as: ``{"linear_cache": list}`` makes ``[]`` (MiniMaxCache's), ``None`` or a
    plain sequence makes ``None``. ``name`` is how type-info strings spell the class (default: its
    ``__name__``); it must end with ``Cache`` and be made of letters and digits.
    Returns the name. Raises ``TypeError``/``ValueError`` on a bad argument, a name or class already
    registered, or a ``like`` that is not a supported cache class.
    """
    from .serialize import _caches
    from .type_info._transform import is_cache_name

    _transformers_class(like, "like")
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a class, got {cls!r}")
    base = _caches.SUPPORTED.get(like)
    if base is None or not isinstance(base, _caches.CacheAdapter):
        raise ValueError(f"like must be one of the supported caches {_caches._supported_caches()} (not EncoderDecoderCache), got {like!r}")
    if cls in _caches.SUPPORTED:
        raise ValueError(f"{cls.__qualname__} is already supported, as {_caches.SUPPORTED[cls].name}")
    name = cls.__name__ if name is None else name
    if not isinstance(name, str) or not is_cache_name(name):
        raise ValueError(
            f"name {name!r} is not a cache name of the type-info language: letters and digits, starting with an "
            "upper-case letter, ending with 'Cache', and not beginning with 'EncoderDecoderCache' or 'WithCaches'"
        )
    if K.cache_kind(name) is not None:
        raise ValueError(f"the cache name {name!r} is already registered")
    extra, count_names = _extra(tensors, counts)
    list_names = _names(lists if isinstance(lists, str) else tuple(lists), "lists")
    placeholders = dict(lists) if isinstance(lists, Mapping) else {}
    if set(list_names) & set(extra) or len(set(list_names)) != len(list_names) or base.kind.lists:
        raise ValueError(f"each extra attribute is named once, in tensors, counts or lists: {list_names}")
    if not all(make is None or callable(make) for make in placeholders.values()):
        raise TypeError(f"lists maps each name to a factory of its empty entry (list) or None, got {placeholders!r}")
    leading = (*base.kind.leading_items, *extra)
    description = f"registered: like {base.name}" + (f"; lists {', '.join(list_names)}" if list_names else "")
    kind = K.CacheKind(name, leading_items=leading, description=description, like=base.name, lists=list_names)
    K.add_cache_kind(kind)
    _caches.register_cache(kind, cls, count_names | base.counts, placeholders)
    return name


def register_cache_layer_class(
    cls: type,
    *,
    like: type,
    code: str | None = None,
    tensors: Sequence[str] = (),
    counts: Sequence[str] = (),
) -> str:
    """Let the serializer carry cache layers of class ``cls``, which hold what ``like`` holds and more.

    ``like`` is the supported layer class whose state ``cls`` has (``DynamicLayer``, ``StaticLayer``, ...);
    ``tensors`` and ``counts`` name its extra attributes as for :func:`register_cache_class`. ``code`` is the
    layer kind letter that type-info strings use for it, one of ``E L M N P R U Y Z`` (default: the first
    free one).
    Returns the letter. Raises ``TypeError``/``ValueError`` on a bad argument, a letter or class already
    taken, or a ``like`` that is not a supported layer class.
    """
    from .serialize import _caches

    _transformers_class(like, "like")
    if not isinstance(cls, type):
        raise TypeError(f"cls must be a class, got {cls!r}")
    base = _caches.LAYERS.get(like)
    if base is None:
        raise ValueError(f"like must be one of the supported layers {_caches._supported_layers()}, got {like!r}")
    if cls in _caches.LAYERS:
        raise ValueError(f"{cls.__qualname__} is already supported, as layer kind {_caches.LAYERS[cls].code!r}")
    free = [c for c in K.FREE_LAYER_CODES if K.layer_kind(c) is None]
    if code is None:
        if not free:
            raise ValueError("every layer kind letter for registered classes is taken")
        code = free[0]
    if code not in free:
        raise ValueError(f"code must be a free layer kind letter, one of {', '.join(free) or 'none left'}; got {code!r}")
    extra, count_names = _extra(tensors, counts)
    spec = base.kind
    like_code = spec.like or spec.code
    kind = K.LayerKind(
        code,
        cls.__qualname__,
        number=spec.number,
        params=spec.params,
        items=spec.items,
        empty_items=spec.empty_items,
        flag_items=spec.flag_items,
        states=spec.states,
        description=f"registered: like {spec.class_name}",
        like=like_code,
        extra=extra,
    )
    K.add_layer_kind(kind)
    _caches.register_layer(code, cls, extra, like_code, count_names)
    return code


def supported_caches() -> list[tuple[str, str, str]]:
    """``(spelling, class, what it holds)`` for every cache class and layer kind, built-in ones first.

    The table of docs/serialization.md is this list.
    """
    rows = [(k.name, k.name, k.description) for k in K.cache_kinds()]
    rows += [(k.code, k.class_name, k.description) for k in K.layer_kinds()]
    return rows
