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

Imports: :mod:`._caches` only (and torch, bound by :func:`_setup` on first use).
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

from . import _caches

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
        return _caches.copy_cache(obj, _copy if clone is _clone else functools.partial(_copy, clone=clone))
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
