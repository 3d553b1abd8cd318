"""Safe type lookup for TreeSpec names: a class or callable to its canonical reference, and a reference back.

A name refers to a type by text: a builtin's bare name (``list``), a torch pytree serialized type name, or
``module.qualname``. :func:`_ref_for` chooses the canonical one for an object (and refuses an object no
reference maps back to); :func:`_resolve_ref` finds the object a reference names. Invariant: a lookup never
runs code. It reads torch's pytree registry, and walks ``__dict__`` entries of modules already in
``sys.modules`` (``object.__getattribute__``, so no ``__getattr__`` hook, no lazy import, no import at all).

Imports: the standard library and the error class; torch's pytree module on first use (:func:`_pytree`, shared
with the rest of the package), through :mod:`.._optional`, which names the install line when torch is missing. Nothing else of this package: the encoder and the decoder import this module.
"""

from __future__ import annotations

import sys
from typing import Any

from .._optional import import_torch
from ..errors import TreeSpecNameError

_PYTREE: Any = None


def _pytree() -> Any:
    # torch is imported on first use only, then kept (this runs on every encode and decode).
    global _PYTREE
    if _PYTREE is None:
        import_torch("encoding or decoding a TreeSpec (tree_spec_as_name, tree_spec_from_name)")
        import torch.utils._pytree as pytree

        _PYTREE = pytree
    return _PYTREE


def _encode_error(msg: str, subject: str) -> TreeSpecNameError:
    """An encoding error; its source line is the offending type's name, so the caret points at it."""
    return TreeSpecNameError(msg, subject, 0)


def _module_dict(obj: Any) -> Any:
    # object.__getattribute__ bypasses metaclass/module __getattr__ hooks: reading a name never runs code.
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


def _resolve_path(path: str) -> Any:
    """The object at ``path`` (``builtins`` name, or ``module.qualname``) among loaded modules, or ``None``.

    ``path`` is a Python dotted path already decoded from the name by the grammar; it is walked, never imported.
    """
    if "." not in path:
        return _module_dict(sys.modules["builtins"]).get(path)
    parts = path.split(".")  # a Python qualified name, not TreeSpec-name syntax
    for i in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None:
            break
    else:
        return None
    obj = module
    for part in parts[i:]:
        namespace = _module_dict(obj)
        if namespace is None or part not in namespace:
            return None
        obj = namespace[part]
    return obj


def _path_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        # an instance (None, functools.partial(...), ...) has no path: name it by its repr, kept short
        text = repr(obj)
        return text if len(text) <= 60 else text[:57] + "..."
    return qualname if module == "builtins" else f"{module}.{qualname}"


def _registered_name(cls: Any) -> str | None:
    pytree = _pytree()
    entry = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
    if entry is None or entry.serialized_type_name == pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
        return None
    name = entry.serialized_type_name
    # An empty name cannot be spelled as a reference; such a class is referred to by its path instead.
    return name if name and pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE.get(name) is cls else None


def _ref_for(obj: Any, what: str, how: str) -> str:
    """The canonical reference of a class or callable: a builtin's bare name (``list``), else its pytree
    serialized type name, else ``module.qualname``; always one that :func:`_resolve_ref` maps back to ``obj``."""
    path = _path_of(obj)
    if "." in path:
        name = _registered_name(obj) if isinstance(obj, type) else None
        if name is not None:
            return name
    if _pytree().SERIALIZED_TYPE_TO_PYTHON_TYPE.get(path, obj) is not obj:
        raise _encode_error(f"cannot encode {what} {path}: a different type is registered under that name; {how}",
                           path)
    if _resolve_path(path) is not obj:
        raise _encode_error(f"cannot encode {what} {path}: it is not reachable as module.qualname from a loaded "
                           f"module; {how}", path)
    return path


def _resolve_ref(ref: str) -> Any:
    found = _pytree().SERIALIZED_TYPE_TO_PYTHON_TYPE.get(ref)
    return found if found is not None else _resolve_path(ref)


# The second half of each refusal to encode a type: how the user makes it reachable by a reference.
_HOW_NAMEDTUPLE = ("define it at module level, or register it with torch.utils._pytree._register_namedtuple(cls, "
                   "serialized_type_name=...)")
_HOW_NODE = ("register it with torch.utils._pytree.register_pytree_node(cls, ..., serialized_type_name=...) and, "
             "for a context that is not made of plain values, to_dumpable_context/from_dumpable_context")
_HOW_FACTORY = "use a class defined at module level (list, dict, int, ... or your own) as the default factory"
_HOW_ENUM = "define the Enum class at module level"


def _check_ref(obj: Any, ref: str, what: str, how: str, text: str, pos: int) -> None:
    """Refuse ``ref`` (at ``pos`` of the name ``text``) unless it is the canonical reference of ``obj``, the
    object it resolved to: a name spells each type one way only."""
    try:
        canonical = _ref_for(obj, what, how)
    except TreeSpecNameError as exc:
        raise TreeSpecNameError(exc.msg, text, pos) from None
    if canonical != ref:
        raise TreeSpecNameError(f"non-canonical type reference '{ref}': this {what} is written '{canonical}'",
                                text, pos)

