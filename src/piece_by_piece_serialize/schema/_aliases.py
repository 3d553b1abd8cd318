"""Alias annotations once a schema is read: the ``!`` shorthand numbered per schema, and an annotation moved.

torch gives each ``!`` shorthand its own fresh alias set, ``$0``, ``$1``, ... in the order written across the
arguments and then the returns; the parser first builds every shorthand as one placeholder (``_FRESH``) and
``_renumber`` numbers them once the whole schema is known. Invariants: a schema without a shorthand is never
rebuilt (``_any_fresh`` is checked first, once per schema); only the outer chain of a type (lists, optionals,
the base) can hold an annotation, so only that chain is walked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._diagnostics import Refused
from ._types import AliasInfo, BaseType, DictType, ListType, OptionalType, Type, TypeVar, UnionType

# the placeholder for "!", numbered per schema by _renumber
_FRESH = AliasInfo(("$",), (), True)


def _any_fresh(items: Sequence[Any]) -> bool:
    """Whether the type of one of ``items`` (arguments or returns) holds a '!' shorthand on its outer chain
    (lists, optionals, the base); one call for all of them, since every schema asks."""
    for item in items:
        t = item.type
        while True:
            alias = t.alias if t.__class__ is not OptionalType else None
            if alias is not None and alias.is_fresh:
                return True
            if t.__class__ is OptionalType or t.__class__ is ListType:
                t = t.elem
            else:
                break
    return False


def _renumber(t: Type, counter: list[int]) -> Type:
    """Give each '!' shorthand on the outer chain of ``t`` its own set ``$0``, ``$1``, ... (inner first, as
    written)."""
    if isinstance(t, OptionalType):
        elem = _renumber(t.elem, counter)
        return t if elem is t.elem else OptionalType(elem)
    if isinstance(t, ListType):
        elem = _renumber(t.elem, counter)
        alias = t.alias
        if alias is not None and alias.is_fresh:
            alias = AliasInfo((f"${counter[0]}",), (), True)
            counter[0] += 1
        return ListType(elem, t.size, alias, t.size_text, t.size_span)
    alias = t.alias
    if alias is not None and alias.is_fresh:
        new = AliasInfo((f"${counter[0]}",), (), True)
        counter[0] += 1
        if isinstance(t, BaseType):
            return BaseType(t.name, new)
        if isinstance(t, TypeVar):
            return TypeVar(t.name, new, t.span)
        if isinstance(t, DictType):
            return DictType(t.key, t.value, new)
        if isinstance(t, UnionType):
            return UnionType(t.members, new, t.absorbed, t.unstable)
    return t


def _with_alias(t: Type, alias: AliasInfo, pos: int) -> Type:
    """``t`` carrying ``alias`` (the types that can carry one), else ``Refused``."""
    if isinstance(t, BaseType):
        return BaseType(t.name, alias)
    if isinstance(t, TypeVar):
        return TypeVar(t.name, alias, t.span)
    if isinstance(t, DictType):
        return DictType(t.key, t.value, alias)
    if isinstance(t, ListType):
        return ListType(t.elem, t.size, alias, t.size_text, t.size_span)
    if isinstance(t, UnionType):
        return UnionType(t.members, alias, t.absorbed, t.unstable)
    raise Refused(f"type '{t}' cannot carry an alias annotation", pos)
