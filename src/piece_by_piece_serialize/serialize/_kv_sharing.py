"""transformers' ``KVSharingDict``: the dict through which Gemma3n's layers share keys and values, carried as
``KVSharingDict_N__<key>__<count>...`` (:class:`~..type_info.KVSharingInfo`) and written back like a cache.

Gemma3n's text model makes one ``KVSharingDict()`` per forward call and hands it to every decoder layer: the last
layers of each attention type that compute keys and values store them in it (``shared_kv_states[layer_type] =
key_states, value_states``) and the layers after them read them back instead of computing their own. It is a
``UserDict`` of ``str -> tuple of tensors``, on purpose not a ``dict`` and not a pytree node (FSDP2's helpers
must not rebuild it: the layers rely on its identity). So the serializer knows it by class, as it knows caches:
its items are its tensors, key by key, and behind a custom operator the dict a layer filled is written back into
the caller's (Note [shared arguments]).

Note [shared arguments]
~~~~~~~~~~~~~~~~~~~~~~~
An argument that several layers share and mutate (a cache, a KVSharingDict) reaches an operator as tensors and
is rebuilt inside it as a new object, so what the layer writes into it would be lost. The custom-operator
wrapper therefore returns such an argument's state after the call with the outputs and writes it into the
caller's object (:func:`write_back`: same object, new contents), so the next layer, behind its own operator,
reads what the previous one stored; under ``torch.export`` the stored tensors are outputs of one call node and
inputs of the next, which is the data flow of the original model.

Imports: the type-info AST only; torch and transformers are never imported here (a value can only be a
``KVSharingDict`` if ``transformers.cache_utils`` is already loaded).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from ..type_info import KVSharingInfo

_MODULE = "transformers.cache_utils"


def is_kv_sharing(obj: Any) -> bool:
    """Whether ``obj`` is a ``transformers.cache_utils.KVSharingDict`` (its class exactly)."""
    cu = sys.modules.get(_MODULE)
    return cu is not None and type(obj) is getattr(cu, "KVSharingDict", None)


def describe(obj: Any, what: str) -> KVSharingInfo:
    """The type-info node of a KVSharingDict; ``TypeError`` naming the entry that is not ``str -> tensors``."""
    entries = []
    for key, value in obj.items():
        if type(value) is not tuple or not all(_is_tensor(t) for t in value):
            raise TypeError(f"{what}: KVSharingDict[{key!r}] is a {type(value).__name__}, not a tuple of tensors")
        entries.append((key, len(value)))
    try:
        return KVSharingInfo(tuple(entries))
    except ValueError as err:
        raise TypeError(f"{what}: {err}") from None


def flatten(obj: Any) -> list[Any]:
    """Its tensors, key by key, each tuple in order."""
    return [t for value in obj.values() for t in value]


def rebuild(info: KVSharingInfo, items: Sequence[Any]) -> Any:
    """A new KVSharingDict holding ``items`` as ``info`` says (the tensors themselves, not copies)."""
    out = sys.modules[_MODULE].KVSharingDict()
    pos = 0
    for key, count in info.entries:
        out[key] = tuple(items[pos : pos + count])
        pos += count
    return out


def write_back(dst: Any, src: Any) -> None:
    """Make ``dst`` hold what ``src`` holds, in place (Note [shared arguments])."""
    dst.clear()
    dst.update(src)


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)
