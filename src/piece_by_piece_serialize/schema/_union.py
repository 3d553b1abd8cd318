"""What torch makes of a written type inside a container: member types, optionals, subtyping and Union normalisation.

torch builds tuples, Dicts, Unions, Futures, Awaits and RRefs from the "fake" types of their members
(``_member``), collapses optionals (``_optional``), and normalises a Union in three steps (Note [Union
normalisation]) with its ``isSubtypeOf`` and ``unifyTypes`` (``_subtype``, ``_unify``); this module does the same
on AST types. Invariants: the result is the type torch holds, and prints as torch prints it; a Union costs time
linear in its members (Note [Indexed member merging]); nothing built here is deeper than ``MAX_TYPE_DEPTH``
(``_check_depth`` raises ``Refused`` first); the members normalisation drops are kept in ``absorbed`` (Note
[Absorbed union members] in ``_types``).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Hashable, Iterator
from typing import Any

from .._diagnostics import Refused
from ._aliases import _with_alias
from ._torch_tables import _FAKE_INT, _KIND_ORDER
from ._types import (
    MAX_TYPE_DEPTH,
    AwaitType,
    BaseType,
    ClassType,
    DictType,
    FutureType,
    ListType,
    OptionalType,
    RRefType,
    TupleType,
    Type,
    TypeVar,
    UnionType,
)


def _member(t: Type) -> Type:
    """``t`` as a container holds it: its fake type (SymInt is int, ...), without alias annotations."""
    if isinstance(t, OptionalType):
        elem = _member(t.elem)
        return t if elem is t.elem else OptionalType(elem, t.absorbed)
    if isinstance(t, ListType):
        elem = _member(t.elem)
        if elem is t.elem and t.alias is None:
            return t
        return ListType(elem, t.size, None, t.size_text, t.size_span)
    if isinstance(t, BaseType) and t.name in _FAKE_INT:
        return BaseType("int")
    return t.without_aliases()


def _optional(elem: Type, pos: int) -> Type:
    """``elem?`` normalised as torch does."""
    if isinstance(elem, OptionalType):  # torch: T?? is T?
        return elem
    if isinstance(elem, UnionType) and _NONE in elem.members:
        # torch: Union(A, B, NoneType)? is Union(A, B)? (the optional already holds None)
        elem = UnionType(tuple(m for m in elem.members if m != _NONE), elem.alias, elem.absorbed, elem.unstable)
    if isinstance(elem, UnionType) and elem.members == (_SCALAR,):
        # torch: the optional of a Union of exactly int, float and complex is Scalar? (OptionalType's constructor),
        # and the Union's annotation stays on the Scalar (Union(int, Scalar)(a!)? is Scalar(a!)?)
        scalar = _SCALAR if elem.alias is None else BaseType("Scalar", elem.alias)
        return OptionalType(scalar, elem.absorbed)
    if isinstance(elem, BaseType) and elem.name == "NoneType":
        # torch: INTERNAL ASSERT in union_type.cpp (an optional None unifies to a one-type Union)
        raise Refused("'NoneType?' is not a type (None is already optional)", pos)
    _check_depth(elem._depth + 1, pos)
    if isinstance(elem, UnionType):
        # a stable Union comes out of torch's passes unchanged (Note [Unstable unions])
        return OptionalType(elem, elem.absorbed) if elem.unstable is None else _optional_union(elem, pos)
    return OptionalType(elem, ())


def _optional_union(elem: UnionType, pos: int) -> Type:
    """``Union(...)?``: torch's OptionalType is the Union of the members and None, normalised again, and holds
    the members but None as a Union made once more (OptionalType's constructor); a member the first pass left
    beside one that absorbs it (Note [Unstable unions]) merges here."""
    again = _union([*elem.members, _NONE], pos)
    made = again
    if isinstance(again, OptionalType):  # one type and None: its annotation, if any, moves onto that type
        held = again.elem if elem.alias is None else _with_alias(again.elem, elem.alias, pos)
    else:
        made = _union([m for m in again.members if m != _NONE], pos)  # type: ignore[attr-defined]  # a UnionType
        held = _with_alias(made, elem.alias, pos) if elem.alias is not None else made
    # the members each pass absorbed, written or not (Note [Absorbed union members] in _types)
    absorbed = tuple(dict.fromkeys((*elem.absorbed, *_absorbed_of(again), *_absorbed_of(made))))
    _check_depth(held._depth + 1, pos)
    return OptionalType(held, absorbed)


def _absorbed_of(t: Type) -> tuple[Type, ...]:
    return t.absorbed if isinstance(t, (UnionType, OptionalType)) else ()


def _check_depth(depth: int, pos: int) -> None:
    if depth > MAX_TYPE_DEPTH:
        raise Refused(f"type nested deeper than {MAX_TYPE_DEPTH} levels", pos)


# the c10::TypeKind of each type class (a BaseType's kind is its name)
_KIND_OF_CLASS: dict[type[Type], str] = {
    TypeVar: "TypeVar", ClassType: "Class", OptionalType: "Optional", ListType: "List", TupleType: "Tuple",
    DictType: "Dict", UnionType: "Union", FutureType: "Future", AwaitType: "Await", RRefType: "RRef",
}  # fmt: skip


def _kind_name(t: Type) -> str:
    if isinstance(t, BaseType):
        return t.name
    return _KIND_OF_CLASS[t.__class__]


# Note [Union normalisation]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch builds a Union in three steps (union_type.cpp, standardizeVectorForUnion), and so do we:
# 1. flatten: nested unions and optionals are spliced in (an optional adds NoneType), Scalar (NumberType) becomes
#    int, float and complex, and -- container members being "fake" types -- SymInt, ScalarType, Layout and
#    MemoryFormat become int;
# 2. filterDuplicateSubtypes: right to left, each member is unified (unifyTypes, type.cpp) with the members
#    before it; the first that unifies is replaced by the result and the member leaves the list. unifyTypes
#    returns the supertype when one is a subtype of the other (int <: Scalar, anything <: Any, a custom class
#    <: AnyClassType, Futures, Awaits and tuples covariantly), merges Futures (Future(unify(A, B))) and
#    equal-length tuples element-wise (NoneType with T gives T?); NoneType is never unified at the top;
# 3. sort by type kind, then text. UnionType::create then makes Union(T, None) the optional T?, and int, float,
#    complex and None the optional Scalar?. One type left is an internal assert in torch, a SchemaError here.
# The members held as int, float and complex are shown as one Scalar member (torch prints them as "Scalar" too).
# Cost: torch's step 2 compares pairs, quadratic in the members. Ours finds the same partner for each member
# through an index (Note [Indexed member merging]), so a Union costs time linear in its size.
#
# Note [Unstable unions]
# ~~~~~~~~~~~~~~~~~~~~~~
# Step 2 is one pass, so a member can survive it next to one that would absorb it, made only later in the pass:
# in Union((int, Any), (Any, (Tensor, Tensor)), (str, (int, str))), (str, (int, str)) is compared with the two
# tuples before it first, and only then do they merge into (Any, Any). torch accepts the Union, but its printed
# text, Union((Any, Any), (str, (int, str))), is one type when read again (an internal assert; with more members,
# another Union). Canonical text must read back as the same type, so such a Union is refused where it is kept as
# written (an argument's or a return's type, a list's element, a member of a tuple, Dict, Future, Await or RRef):
# its members are run through steps 1 and 2 once more, and one that merges is named. Two places normalise it
# again as torch does, and there it merges: a Union member of a Union (flattened into the outer one) and the
# optional of a Union (torch's OptionalType is the Union of its members and None: Union(...)? above becomes
# (Any, Any)? in torch and here).
_NONE = BaseType("NoneType")
_SCALAR = BaseType("Scalar")
_NUMBERS = (BaseType("int"), BaseType("float"), BaseType("complex"))
_NUMBER_SET = frozenset(_NUMBERS)
_ANY = BaseType("Any")
_ANY_CLASS = BaseType("AnyClassType")


def _torch_members(t: UnionType) -> Iterator[Type]:
    """The members as torch holds them: Scalar is int, float and complex."""
    for m in t.members:
        if m == _SCALAR:
            yield from _NUMBERS
        else:
            yield m


# torch's type equality does not look at the names of type variables (VarType compares by kind): List(a) equals
# List(b), Dict(str, a) equals Dict(str, b); nor does it tell Union(Scalar) from Scalar (NumberType is the Union of
# int, float and complex, and a Union compares its members): Scalar[] equals Union(Scalar)[]. Lists, dicts and RRefs
# unify only when equal, so they are compared with their type variables erased to one and Union(Scalar) as Scalar.
_ERASED = TypeVar("t")
_INVARIANT = (ListType, DictType, RRefType)


def _erase(t: Type) -> Type:
    """``t`` as torch's type equality sees it: every type variable replaced by one and the same, and
    ``Union(Scalar)`` by ``Scalar``."""
    if t.__class__ is TypeVar:
        return _ERASED
    if t.__class__ is UnionType and t.members == (_SCALAR,):
        return _SCALAR
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(t):
        value = getattr(t, f.name)
        if isinstance(value, Type):
            changes[f.name] = _erase(value)
        elif type(value) is tuple and value and isinstance(value[0], Type):
            changes[f.name] = tuple(_erase(v) for v in value)
    return dataclasses.replace(t, **changes) if changes else t


def _subtype(a: Type, b: Type) -> bool:
    """torch's ``a->isSubtypeOf(*b)`` on normalised member types (aliases already dropped)."""
    if a == b or b == _ANY:
        return True
    if a.__class__ in _INVARIANT and a.__class__ is b.__class__:
        return _erase(a) == _erase(b)
    if isinstance(a, UnionType):  # every member (Scalar as its three numbers) fits b
        return all(_subtype(m, b) for m in _torch_members(a))
    if isinstance(a, OptionalType):  # OptionalType is a Union of its element and None
        return _subtype(_NONE, b) and (
            all(_subtype(m, b) for m in _NUMBERS) if a.elem == _SCALAR else _subtype(a.elem, b)
        )
    if a == _SCALAR:  # NumberType: a Union holding int, float and complex, or Scalar itself
        if isinstance(b, UnionType):
            return _SCALAR in b.members
        if isinstance(b, OptionalType):
            return _subtype(a, b.elem)
        return False
    if isinstance(b, OptionalType):
        return a == _NONE or _subtype(a, b.elem)
    if isinstance(b, UnionType):
        return any(_subtype(a, m) for m in _torch_members(b))
    if a.__class__ is BaseType and a in _NUMBER_SET:  # (hashing a deep type only to miss would cost its size)
        return b == _SCALAR
    if isinstance(a, ClassType):
        return b == _ANY_CLASS
    if isinstance(a, TupleType):
        return (
            isinstance(b, TupleType)
            and len(a.elems) == len(b.elems)
            and all(_subtype(x, y) for x, y in zip(a.elems, b.elems, strict=True))
        )
    if isinstance(a, (FutureType, AwaitType)):
        return isinstance(b, a.__class__) and _subtype(a.elem, b.elem)
    if isinstance(a, TypeVar):
        return isinstance(b, TypeVar)  # torch compares type variables by kind only
    return False


def _unify(a: Type, b: Type, pos: int) -> Type | None:
    """torch's ``unifyTypes(a, b)`` (default_to_union=False): their common supertype, or None."""
    # Two tuples (or Futures) unify element by element; where one is a subtype of the other that gives the other,
    # as torch's subtype tests first do, so they are skipped: asked at every level of a nesting, they cost its
    # square (two 60-deep tuples in a Union took 100,000 calls)
    if a.__class__ is b.__class__ and a.__class__ in (TupleType, FutureType):
        return _unify_elements(a, b, pos)
    if _subtype(a, b):
        return b
    if _subtype(b, a):
        return a
    if a == _NONE:
        return _optional(b, pos)
    if b == _NONE:
        return _optional(a, pos)
    if isinstance(a, OptionalType):
        elem = _unify(a.elem, b, pos)
        return None if elem is None else _optional(elem, pos)
    if isinstance(b, OptionalType):
        elem = _unify(b.elem, a, pos)
        return None if elem is None else _optional(elem, pos)
    return None


def _unify_elements(a: Type, b: Type, pos: int) -> Type | None:
    """``_unify`` of two tuples or two Futures: covariant, element by element."""
    if isinstance(a, FutureType):
        elem = _unify(a.elem, b.elem, pos)  # type: ignore[attr-defined]  # b is a FutureType too
        return None if elem is None else FutureType(elem)
    x_elems, y_elems = a.elems, b.elems  # type: ignore[attr-defined]  # two TupleTypes
    if len(x_elems) != len(y_elems):
        return None
    elems = []
    for x, y in zip(x_elems, y_elems, strict=True):
        u = _unify(x, y, pos)
        if u is None:
            return None
        elems.append(u)
    # where one is the supertype this is equal to it (its very elements): comparing would walk the rest again
    return TupleType(tuple(elems))


def _mergeable(a: Type, b: Type) -> bool:
    """Cheap test: can unifyTypes(a, b) succeed for two different flattened members, neither of them None?"""
    if a == _ANY or b == _ANY:
        return True
    ka, kb = a.__class__, b.__class__
    if ka is ClassType or kb is ClassType:
        return a == _ANY_CLASS or b == _ANY_CLASS
    return ka is kb and ka in (TupleType, FutureType, AwaitType, TypeVar, ListType, DictType, RRefType)


def _merge_pairwise(types: list[Type], pos: int) -> list[Type]:
    """torch's filterDuplicateSubtypes as torch runs it: right to left, each member is unified with the members
    before it, nearest first; the first that unifies takes the result and the member leaves the list."""
    end = len(types) - 1
    for i in range(len(types) - 1, 0, -1):
        ti = types[i]
        for j in range(min(i - 1, end), -1, -1):
            if _merges(ti, types[j]):
                unified = _unify(ti, types[j], pos)
                if unified is not None:
                    types[j] = unified
                    types[i] = types[end]
                    end -= 1
                    break
    return types[: end + 1]


def _merges(ti: Type, tj: Type) -> bool:
    """The pair test of the merging loop before ``_unify``: None only with None (torch's get_supertype), and
    only pairs that can unify at all."""
    return (ti == _NONE) == (tj == _NONE) and _mergeable(ti, tj)


# Note [Indexed member merging]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# _merge_pairwise tries, for each member from the right, every member before it, nearest first, until one unifies:
# quadratic in the members. _merge_indexed finds the same partner for each member without trying the others:
# * The shape key of a type (_shape_key) forgets what unification forgives -- optionals (T unifies with T? and
#   None), and the names of type variables (torch unifies any two) -- and keeps the rest: Future and tuple
#   structure, and every other type whole (lists, dicts, RRefs and builtin types unify only when equal; lists,
#   dicts and RRefs with their type variables erased, since torch's equality ignores their names). By
#   induction over _subtype and _unify, two members without a wildcard unify only if their keys are equal.
# * Wildcards are what unifies with types of other keys: Any, AnyClassType, Scalar, None inside a Future or
#   tuple, a nested Union, and Await (which unifies by subtyping only, so equal keys do not promise a merge). A
#   member holding one is "wild".
# * So the partner of a member is the nearest of: the members before it with its key (the nearest one unifies),
#   the wild members before it that can merge with it at all (_mergeable groups: Any with everything, classes
#   with AnyClassType, else the same kind), each tried with the same _merges/_unify test as the loop. A wild
#   member tries every member of its groups, nearest first, as the loop does.
# The partner, the result written in its place and the order of the survivors are the loop's own. Skipping the
# pairs in between cannot hide an error: _unify raises only for a result deeper than MAX_TYPE_DEPTH, and what it
# builds from two types is at most as deep as their two depths added (by induction over its cases), so members
# at most _INDEXED_DEPTH deep never reach it; a Union with a deeper member takes the loop. The cost is linear in
# the members, plus, for each member, the candidates tried between it and its partner that do not unify with it:
# wild members of its group (for a wild member, any member of its group).
_INDEXED_DEPTH = MAX_TYPE_DEPTH // 2
_WILD = frozenset({"Any", "AnyClassType", "Scalar", "NoneType"})
_NO_KEY = object()  # the key of a wild type
# the group of a member (_group): "Any", "Class", the class of a tuple, Future, Await or type variable, or None
_Group = str | type[Type] | None


def _shape_key(t: Type) -> Hashable:
    """The shape key of a member (Note [Indexed member merging]), or _NO_KEY if it holds a wildcard."""
    cls = t.__class__
    if cls is BaseType:
        return _NO_KEY if t.name in _WILD else t  # type: ignore[attr-defined]  # cls is BaseType (mypy narrows by isinstance only)
    if cls is OptionalType:
        return _shape_key(t.elem)  # type: ignore[attr-defined]  # cls is OptionalType
    if cls is FutureType:
        elem = _shape_key(t.elem)  # type: ignore[attr-defined]  # cls is FutureType
        return _NO_KEY if elem is _NO_KEY else ("Future", elem)
    if cls is TupleType:
        elems: list[Hashable] = []
        for e in t.elems:  # type: ignore[attr-defined]  # cls is TupleType
            k = _shape_key(e)
            if k is _NO_KEY:
                return _NO_KEY
            elems.append(k)
        return ("Tuple", tuple(elems))
    if cls is TypeVar:
        return "TypeVar"
    if cls is UnionType or cls is AwaitType:
        return _NO_KEY
    if cls in _INVARIANT:
        return _erase(t)  # unify only when equal, type variables whatever their names
    return t  # ClassType: unifies only when equal


def _group(t: Type) -> _Group:
    """Members that _mergeable lets meet: Any meets every group; else classes with AnyClassType, and each of
    tuples, Futures, Awaits and type variables with its own kind. None (and anything else) is in no group."""
    if t == _ANY:
        return "Any"
    cls = t.__class__
    if cls is ClassType or t == _ANY_CLASS:
        return "Class"
    if cls in (TupleType, FutureType, AwaitType, TypeVar):
        return cls
    return None


class _Positions:
    """A sorted list of member positions, searched from the nearest below a bound."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[int] = []

    def add(self, j: int) -> None:
        items = self.items
        if not items or items[-1] < j:
            items.append(j)
        else:
            items.insert(bisect_left(items, j), j)

    def remove(self, j: int) -> None:
        items = self.items
        del items[bisect_left(items, j)]

    def below(self, i: int) -> Iterator[int]:
        """Positions under ``i``, nearest first (positions from ``i`` up are never asked for again: dropped)."""
        items = self.items
        while items and items[-1] >= i:
            items.pop()
        return reversed(items)


def _merge_indexed(types: list[Type], pos: int) -> list[Type]:
    """The result of _merge_pairwise, found through indexes (Note [Indexed member merging])."""
    n = len(types)
    by_key: dict[Hashable, _Positions] = {}
    wild: dict[_Group, _Positions] = {}  # group -> positions of wild members
    by_group: dict[_Group, _Positions] = {}  # group -> positions of all members
    anys = _Positions()
    every = _Positions()
    where: list[Any] = [None] * n  # position -> (key, group) as indexed

    def index(j: int, t: Type) -> None:
        key, group = _shape_key(t), _group(t)
        where[j] = (key, group)
        if group is None and t == _NONE:
            return
        every.add(j)
        if group == "Any":
            anys.add(j)
        elif group is not None:
            by_group.setdefault(group, _Positions()).add(j)
        if key is _NO_KEY:
            if group is not None and group != "Any":
                wild.setdefault(group, _Positions()).add(j)
        else:
            by_key.setdefault(key, _Positions()).add(j)

    def unindex(j: int) -> None:
        key, group = where[j]
        every.remove(j)
        if group == "Any":
            anys.remove(j)
        elif group is not None:
            by_group[group].remove(j)
        if key is _NO_KEY:
            if group is not None and group != "Any":
                wild[group].remove(j)
        else:
            by_key[key].remove(j)

    for j, t in enumerate(types):
        index(j, t)
    end = n - 1
    for i in range(n - 1, 0, -1):
        ti = types[i]
        key, group = where[i]
        if group is None and ti == _NONE:
            continue  # None merges with nothing (and there is no other None)
        if group == "Any":
            lists = [every.below(i)]
        elif key is _NO_KEY:
            lists = [anys.below(i)] + ([by_group[group].below(i)] if group is not None else [])
        else:
            lists = [anys.below(i), by_key[key].below(i)]
            if group is not None and group in wild:
                lists.append(wild[group].below(i))
        best, unified = -1, None
        for candidates in lists:
            for j in candidates:
                if j <= best:
                    break
                if _merges(ti, types[j]):
                    u = _unify(ti, types[j], pos)
                    if u is not None:
                        best, unified = j, u
                        break
        if unified is not None:
            unindex(best)
            types[best] = unified
            index(best, unified)
            types[i] = types[end]
            end -= 1
    return types[: end + 1]


def _flatten(members: list[Type]) -> dict[Type, None]:
    """Step 1 of Note [Union normalisation]: the flattened members, in order, as the keys of a dict (duplicates
    dropped at once: torch unifies equal members anyway, and it keeps the work linear for long unions of the same
    types)."""
    seen: dict[Type, None] = {}
    stack = list(reversed(members))
    while stack:
        m = stack.pop()
        if isinstance(m, UnionType):
            stack.extend(reversed(m.members))
        elif isinstance(m, OptionalType):
            stack.append(_NONE)
            stack.append(m.elem)
        elif m == _SCALAR:
            seen.update(dict.fromkeys(_NUMBERS))
        elif isinstance(m, BaseType) and m.name in _FAKE_INT:
            seen[BaseType("int")] = None
        else:
            seen[m] = None
    return seen


def _filter_duplicates(types: list[Type], pos: int) -> list[Type]:
    """Step 2 of Note [Union normalisation], torch's filterDuplicateSubtypes: the surviving members."""
    if all(t._depth <= _INDEXED_DEPTH for t in types):
        return _merge_indexed(types, pos)
    return _merge_pairwise(types, pos)


def _union(members: list[Type], pos: int) -> Type:
    """``Union(members)`` as torch makes it (Note [Union normalisation]): a UnionType, or the optional it
    becomes; ``Refused`` if fewer than two types are left."""
    # 1. flatten
    seen = _flatten(members)
    # 2. filterDuplicateSubtypes, in torch's order
    types = _filter_duplicates(list(seen), pos)
    has_none = _NONE in types
    flat = [t for t in types if t != _NONE]
    if _NUMBER_SET.issubset(flat):
        flat = [t for t in flat if t not in _NUMBER_SET] + [_SCALAR]
    kept = set(flat)
    absorbed = tuple(t for t in seen if t != _NONE and t not in kept and t not in _NUMBER_SET)
    # 3. what UnionType::create makes of it
    if has_none and len(flat) == 1:
        return OptionalType(flat[0], absorbed)
    if not has_none and flat == [_SCALAR]:
        return UnionType((_SCALAR,), None, absorbed)  # torch keeps Union(Scalar): three types
    if len(flat) + has_none < 2:
        # torch: INTERNAL ASSERT in union_type.cpp ("Use the common supertype instead of creating a Union")
        only = str(flat[0]) if flat else "NoneType"
        raise Refused(f"Union needs two or more different types; these all unify to '{only}'", pos)
    if has_none:
        flat.append(_NONE)
    flat.sort(key=lambda t: (_KIND_ORDER[_kind_name(t)], str(t)))
    return UnionType(tuple(flat), None, absorbed, _merging(flat, pos))


def _merging(members: list[Type], pos: int) -> Type | None:
    """A member that normalising ``members`` once more merges (Note [Unstable unions]), or None."""
    seen = list(_flatten(members))
    kept = _filter_duplicates(list(seen), pos)
    return None if len(kept) == len(seen) else next(m for m in seen if m not in kept)


def _check_stable(t: Type, pos: int) -> None:
    """Refuse a Union (or the Union an optional holds) kept as written that normalises again to another type
    (Note [Unstable unions]); ``pos`` is where its text starts."""
    if isinstance(t, OptionalType):
        t = t.elem
    if isinstance(t, UnionType) and t.unstable is not None:
        gone = t.unstable
        raise Refused(
            f"this Union normalises to {t.without_aliases()}, where '{gone}' still unifies with another member: read "
            f"again, that text is another type (torch reads it back so, or fails); leave '{gone}' out",
            pos,
        )
