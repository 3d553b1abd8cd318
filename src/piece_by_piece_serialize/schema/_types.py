"""The type nodes of the schema AST: alias annotations and the types they annotate, with their canonical text.

Every node is a frozen, slotted dataclass with tuple fields, and ``str(node)`` is the text torch prints for it
(with the deviations of Note [Printer deviations] in ``_ast``). Invariants: a type's nesting depth is computed on
construction and never exceeds ``MAX_TYPE_DEPTH``; spans and the absorbed members of a Union are kept with
``compare=False``, so two types that differ only in layout or in what normalisation dropped are equal. This
module imports nothing from the package (and never lark or torch).

Note [Absorbed union members]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Union normalisation drops members another member absorbs (``AnyClassType`` absorbs every custom class, ``Any``
everything but None, ``Future(Any)`` every Future). torch checks custom classes and type variables while it
parses, before the Union forms, so a check of what was *written* must still see them: ``UnionType`` and
``OptionalType`` keep the dropped members in ``absorbed`` (``compare=False``, never printed), and
``schema.parse_schema`` walks them for its ``class_exists`` and ``allow_typevars`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "MAX_TYPE_DEPTH",
    "Span",
    "AliasInfo",
    "Type",
    "BaseType",
    "TypeVar",
    "ClassType",
    "OptionalType",
    "ListType",
    "TupleType",
    "DictType",
    "UnionType",
    "FutureType",
    "AwaitType",
    "RRefType",
]

# Types nest at most this deep. torch's recursive-descent parser overflows the C stack near 5,000; our
# dataclasses' generated __eq__/__hash__/__repr__ and the printer recurse once or a few frames per level, so the
# bound keeps every operation far below Python's recursion limit. Real schemas nest 4 deep at most.
MAX_TYPE_DEPTH = 100

# Where a node was written: 0-based ``(start, end)`` offsets into the parsed text.
Span = tuple[int, int]


# ---------------------------------------------------------------------------------------------------------------
# Alias annotations


@dataclass(frozen=True, slots=True, eq=False)
class AliasInfo:
    """An alias annotation: ``(a)``, ``(a!)``, ``(a|b -> b|*)`` or the fresh-set shorthand ``!``.

    ``before``/``after`` are the alias sets in the order written, without duplicates. Without ``->`` the after
    set equals the before set. The shorthand ``!`` is a fresh set: ``before == ("$<n>",)``, ``after == ()`` and
    ``is_write`` -- the way torch represents it; the numbers count shorthands in order of appearance. Equality
    compares the sets, not their order, as torch does.
    """

    before: tuple[str, ...]
    after: tuple[str, ...]
    is_write: bool = False

    @property
    def is_fresh(self) -> bool:
        """True for the ``!`` shorthand (a fresh, written-to set with an empty after set)."""
        return self.is_write and not self.after and len(self.before) == 1 and self.before[0][:1] == "$"

    def _key(self) -> tuple[frozenset[str], frozenset[str], bool]:
        return (frozenset(self.before), frozenset(self.after), self.is_write)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not AliasInfo:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        if self.is_fresh:
            return "!"
        text = "(" + "|".join(self.before) + ("!" if self.is_write else "")
        if frozenset(self.after) != frozenset(self.before):
            text += " -> " + "|".join(self.after)
        return text + ")"


def _alias_text(alias: AliasInfo | None) -> str:
    return "" if alias is None else str(alias)


# ---------------------------------------------------------------------------------------------------------------
# Types


def _depth_of(*children: Type) -> int:
    return 1 + max((c._depth for c in children), default=0)


@dataclass(frozen=True, slots=True)
class Type:
    """Base class of every type. ``alias`` is the annotation written right after the type (None if none or if
    the type cannot carry one)."""

    # Nesting depth (1 for a leaf), bounded by MAX_TYPE_DEPTH; computed on construction.
    _depth: int = field(init=False, repr=False, compare=False, default=1)

    def _set_depth(self, depth: int) -> None:
        if depth > MAX_TYPE_DEPTH:
            raise ValueError(f"type nested deeper than {MAX_TYPE_DEPTH} levels")
        object.__setattr__(self, "_depth", depth)

    @property
    def alias(self) -> AliasInfo | None:
        return None

    def without_aliases(self) -> Type:
        """This type with every alias annotation on its outer chain (lists, optionals, the base) removed."""
        return self


@dataclass(frozen=True, slots=True)
class BaseType(Type):
    """A builtin type by its canonical (torch-printed) name: ``Tensor``, ``int`` (also written ``DeviceIndex``,
    ``ConstQuantizerPtr``), ``SymInt``, ``float``, ``Scalar``, ``NoneType`` (also written ``None``), ..."""

    name: str
    alias: AliasInfo | None = None

    def __str__(self) -> str:
        return self.name + _alias_text(self.alias)

    def without_aliases(self) -> Type:
        return self if self.alias is None else BaseType(self.name)


@dataclass(frozen=True, slots=True)
class TypeVar(Type):
    """A type variable (a lower-case unknown identifier, possibly dotted: ``t``, ``foo.Bar``)."""

    name: str
    alias: AliasInfo | None = None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def __str__(self) -> str:
        return self.name + _alias_text(self.alias)

    def without_aliases(self) -> Type:
        return self if self.alias is None else TypeVar(self.name, span=self.span)


@dataclass(frozen=True, slots=True)
class ClassType(Type):
    """A TorchBind custom class ``__torch__.torch.classes.<namespace>.<name>`` (cannot carry an annotation)."""

    namespace: str
    name: str
    span: Span = field(default=(0, 0), compare=False, repr=False)

    @property
    def qualified_name(self) -> str:
        return f"__torch__.torch.classes.{self.namespace}.{self.name}"

    def __str__(self) -> str:
        return self.qualified_name


@dataclass(frozen=True, slots=True)
class OptionalType(Type):
    """``T?``. torch collapses ``T??`` to ``T?``; so does the parser (never build OptionalType(OptionalType))."""

    elem: Type
    # Types written inside a Union that normalisation absorbed (Note [Absorbed union members]).
    absorbed: tuple[Type, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        self._set_depth(self.elem._depth + 1)

    def __str__(self) -> str:
        return f"{self.elem}?"

    @property
    def alias(self) -> AliasInfo | None:
        # The annotation of T(a)? belongs to the optional as a whole (torch prints it before the "?").
        return self.elem.alias

    def without_aliases(self) -> Type:
        elem = self.elem.without_aliases()
        return self if elem is self.elem else OptionalType(elem, self.absorbed)


@dataclass(frozen=True, slots=True)
class ListType(Type):
    """``T[]``, or ``T[N]`` when ``size`` is set (only on the outer type of an argument or return), with the
    annotation written after the brackets. ``size_text`` keeps the source text of N (``2.5`` reads as 2)."""

    elem: Type
    size: int | None = None
    alias: AliasInfo | None = None
    size_text: str | None = field(default=None, compare=False, repr=False)
    size_span: Span = field(default=(0, 0), compare=False, repr=False)

    def __post_init__(self) -> None:
        self._set_depth(self.elem._depth + 1)

    def __str__(self) -> str:
        size = "" if self.size is None else str(self.size)
        return f"{self.elem}[{size}]{_alias_text(self.alias)}"

    def without_aliases(self) -> Type:
        elem = self.elem.without_aliases()
        if elem is self.elem and self.alias is None:
            return self
        return ListType(elem, self.size, None, self.size_text, self.size_span)


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """``(A, B)``; ``()`` is the empty tuple. Members never carry annotations (torch drops them)."""

    elems: tuple[Type, ...]

    def __post_init__(self) -> None:
        self._set_depth(_depth_of(*self.elems))

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elems)) + ")"


@dataclass(frozen=True, slots=True)
class DictType(Type):
    """``Dict(K, V)`` with an optional annotation after it."""

    key: Type
    value: Type
    alias: AliasInfo | None = None

    def __post_init__(self) -> None:
        self._set_depth(_depth_of(self.key, self.value))

    def __str__(self) -> str:
        return f"Dict({self.key}, {self.value}){_alias_text(self.alias)}"

    def without_aliases(self) -> Type:
        return self if self.alias is None else DictType(self.key, self.value)


@dataclass(frozen=True, slots=True)
class UnionType(Type):
    """``Union(A, B, ...)``: two or more members (or just ``Scalar``: torch keeps ``Union(Scalar)``), normalised
    as torch does: nested unions and optionals flattened, members unified (torch's ``unifyTypes``: a member that
    is a subtype of another disappears, Futures and equal-length tuples merge), ``int``, ``float`` and
    ``complex`` together shown as ``Scalar``, members sorted by kind."""

    members: tuple[Type, ...]
    alias: AliasInfo | None = None
    # Types written inside the Union that normalisation absorbed (Note [Absorbed union members]).
    absorbed: tuple[Type, ...] = field(default=(), compare=False, repr=False)
    # A member that normalising the members once more would merge (Note [Unstable unions] in ``_union``), or None.
    unstable: Type | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._set_depth(_depth_of(*self.members))

    def __str__(self) -> str:
        return "Union(" + ", ".join(map(str, self.members)) + ")" + _alias_text(self.alias)

    def without_aliases(self) -> Type:
        return self if self.alias is None else UnionType(self.members, None, self.absorbed, self.unstable)


@dataclass(frozen=True, slots=True)
class FutureType(Type):
    """``Future(T)``."""

    elem: Type

    def __post_init__(self) -> None:
        self._set_depth(self.elem._depth + 1)

    def __str__(self) -> str:
        return f"Future({self.elem})"


@dataclass(frozen=True, slots=True)
class AwaitType(Type):
    """``Await(T)``."""

    elem: Type

    def __post_init__(self) -> None:
        self._set_depth(self.elem._depth + 1)

    def __str__(self) -> str:
        return f"Await({self.elem})"


@dataclass(frozen=True, slots=True)
class RRefType(Type):
    """``RRef(T)``."""

    elem: Type

    def __post_init__(self) -> None:
        self._set_depth(self.elem._depth + 1)

    def __str__(self) -> str:
        return f"RRef({self.elem})"

