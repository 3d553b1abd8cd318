"""Copying: the deep copy behind ``make_copy``, which clones tensors and keeps every container's exact type.

Containers are rebuilt by their exact class (a ``defaultdict`` keeps its factory, a ``deque`` its
``maxlen``, a namedtuple or ``torch.return_types`` its class), supported transformers caches are copied layer
by layer through :mod:`._caches`, numpy arrays are copied, and anything else goes through
:func:`copy.deepcopy`, whose failure is reported as a ``TypeError`` naming the type.

Note [shared copies]
~~~~~~~~~~~~~~~~~~~~
Recording a model's eager run copies every watched module's arguments before its call and its output and caches
after it. With a cache, each decoder layer receives the whole cache: copied independently, 32 layers keep 64
copies of it, memory quadratic in the layers (for a 7B model and a 1,024-token cache, about 32 GB). Yet between
two such copies only a layer or two of the cache changed: transformers' dynamic layers replace their tensors
(``torch.cat`` makes new ones) and leave the old ones as they were. :class:`SharedCopies` gives the clone made by
an earlier copy again for a tensor that is the same object at the same version (torch's counter of in-place
changes, bumped by ``index_copy_`` in a static cache's layer, or by any ``add_``), so the copies of one recording
hold each state of each tensor once. What it never does: share a clone with the original (every copy is still
independent of what the model goes on changing), make one clone of a tensor met twice in one value (two clones,
as :func:`_copy` makes), or share when the version cannot be read (inference tensors) or a freed tensor's id was
given to a new one (a weak reference to the original tells them apart). The copies' users must then not change
them in place, which none does: whatever runs on a recorded call runs on a copy of it or on a traced program.

Note [copies of a known structure]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A cache is copied by describing it, flattening it and rebuilding it from the clones of its items. The recording
copies every decoder layer's whole cache before and after its call, so an L-layer model's recording describes
2L caches of L layers each: a type-info node per layer, each adapter's checks, the names of errors never raised
(at 160 layers, a third of the recording). So each cache class keeps the last few descriptions it was copied
with, each with its matcher (Note [cache matchers] in :mod:`._cache_match`): a cache that matches is exactly one
:func:`._caches.describe` would describe so, its items exactly :func:`._caches.flatten`'s, and it is rebuilt from
them with that description; any other cache is described in full, which raises what describe raises.

Imports: :mod:`._caches` and :mod:`._cache_match` (and torch, bound by :func:`_setup` on first use).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import sys
import weakref
from collections.abc import Callable
from typing import Any

from . import _cache_match, _caches

# torch objects, bound on first use by _setup (called by the package's own _setup)
_Tensor: Any = None
_Size: Any = None


def _setup() -> None:
    global _Tensor, _Size
    import torch

    _Size = torch.Size
    _Tensor = torch.Tensor


def _clone(tensor: Any) -> Any:
    return tensor.clone()


def _copy(obj: Any, clone: Callable[[Any], Any] = _clone) -> Any:
    if isinstance(obj, _Tensor):
        return clone(obj)
    cls = type(obj)
    if obj is None or cls in (bool, int, float, str, bytes, complex):
        return obj
    if cls is list:
        return [_copy(x, clone) for x in obj]
    if cls is tuple:
        return tuple(_copy(x, clone) for x in obj)
    if cls is dict:
        return {k: _copy(v, clone) for k, v in obj.items()}
    if cls is collections.OrderedDict:
        return collections.OrderedDict((k, _copy(v, clone)) for k, v in obj.items())
    if cls is collections.defaultdict:
        new: Any = collections.defaultdict(obj.default_factory)
        for k, v in obj.items():
            new[k] = _copy(v, clone)
        return new
    if cls is collections.deque:
        return collections.deque((_copy(x, clone) for x in obj), maxlen=obj.maxlen)
    if isinstance(obj, tuple):
        if hasattr(cls, "_fields"):  # namedtuple and typing.NamedTuple
            return cls(*(_copy(x, clone) for x in obj))
        if hasattr(cls, "n_sequence_fields") or cls is _Size:
            return cls([_copy(x, clone) for x in obj])  # torch.return_types.* (structseq) and torch.Size
    if _caches.is_cache(obj) and type(obj) in _caches.SUPPORTED:
        return _copy_cache(obj, _copy if clone is _clone else functools.partial(_copy, clone=clone))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return obj.copy()
    try:
        return copy.deepcopy(obj)
    except Exception as err:  # deepcopy raises whatever the object's hooks raise
        raise TypeError(
            f"make_copy: cannot copy a {cls.__module__}.{cls.__qualname__}: copy.deepcopy failed with "
            f"{type(err).__name__}: {err}"
        ) from err


# Descriptions kept per cache class (Note [copies of a known structure]): a model's caches have one or two
# structures (a prefill's, a step's); past this many, copies describe in full.
_KNOWN_PER_CLASS = 8
_known: dict[type, list[tuple[Callable[[Any, list[Any]], bool], Any, Callable[[list[Any]], Any]]]] = {}


def _copy_cache(cache: Any, clone: Callable[[Any], Any]) -> Any:
    """A copy of a supported cache (:func:`._caches.copy_cache`), matched against the descriptions it was copied
    with before (Note [copies of a known structure]) and rebuilt by their compiled builders."""
    known = _known.setdefault(type(cache), [])
    for match, info, build in known:
        items: list[Any] = []
        if match(cache, items):
            clones = [clone(x) for x in items]
            made = build(clones)  # None where an item is not what the common case holds: the checked route
            return made if made is not None else _caches.rebuild(info, clones)
    info = _caches.describe(cache)
    if len(known) < _KNOWN_PER_CLASS:
        known.append((_cache_match.matcher(info, type(cache), "cache")[0], info, _caches.builder(info)))
    return _caches.copy_cache(cache, clone, info)


class SharedCopies:
    """Deep copies, as :func:`_copy` makes them, that share the clone of a tensor unchanged since an earlier copy
    made through the same object (Note [shared copies])."""

    def __init__(self) -> None:
        # id of the original -> (a weak reference to it, its version when cloned, the clone)
        self._clones: dict[int, tuple[Any, int, Any]] = {}

    def copy(self, obj: Any) -> Any:
        """A copy of ``obj``; a tensor seen by an earlier call and not changed in place since is given the
        same clone, a tensor met twice in ``obj`` gets two clones, as :func:`_copy` gives it."""
        given: set[int] = set()  # the originals cloned or shared by this call
        clones = self._clones

        def clone(tensor: Any) -> Any:
            key = id(tensor)
            if key in given:  # the same tensor twice in one value: two clones, never one object
                return tensor.clone()
            given.add(key)
            try:
                version = tensor._version
            except RuntimeError:  # an inference tensor has no version counter: never shared
                return tensor.clone()
            known = clones.get(key)
            # the weak reference tells this tensor from a later one given the same id after it was freed
            if known is not None and known[1] == version and known[0]() is tensor:
                return known[2]
            new = tensor.clone()
            with contextlib.suppress(TypeError):  # a tensor subclass without weak references is not shared
                clones[key] = (weakref.ref(tensor), version, new)
            return new

        return _copy(obj, clone)
