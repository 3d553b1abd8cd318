"""Copying: the deep copy behind ``make_copy``, which clones tensors and keeps every container's exact type.

Containers are rebuilt by their exact class (a ``defaultdict`` keeps its factory, a ``deque`` its
``maxlen``, a namedtuple or ``torch.return_types`` its class), supported transformers caches are copied layer
by layer through :mod:`._caches`, numpy arrays are copied, and anything else goes through
:func:`copy.deepcopy`, whose failure is reported as a ``TypeError`` naming the type.

Imports: :mod:`._caches` only (and torch, bound by :func:`_setup` on first use).
"""

from __future__ import annotations

import collections
import copy
import sys
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


def _copy(obj: Any) -> Any:
    if isinstance(obj, _Tensor):
        return obj.clone()
    cls = type(obj)
    if obj is None or cls in (bool, int, float, str, bytes, complex):
        return obj
    if cls is list:
        return [_copy(x) for x in obj]
    if cls is tuple:
        return tuple(_copy(x) for x in obj)
    if cls is dict:
        return {k: _copy(v) for k, v in obj.items()}
    if cls is collections.OrderedDict:
        return collections.OrderedDict((k, _copy(v)) for k, v in obj.items())
    if cls is collections.defaultdict:
        new: Any = collections.defaultdict(obj.default_factory)
        for k, v in obj.items():
            new[k] = _copy(v)
        return new
    if cls is collections.deque:
        return collections.deque((_copy(x) for x in obj), maxlen=obj.maxlen)
    if isinstance(obj, tuple):
        if hasattr(cls, "_fields"):  # namedtuple and typing.NamedTuple
            return cls(*(_copy(x) for x in obj))
        if hasattr(cls, "n_sequence_fields") or cls is _Size:
            return cls([_copy(x) for x in obj])  # torch.return_types.* (structseq) and torch.Size
    if _caches.is_cache(obj) and type(obj) in _caches.SUPPORTED:
        return _caches.copy_cache(obj, _copy)
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
