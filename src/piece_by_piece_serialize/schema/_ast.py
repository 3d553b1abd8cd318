"""The typed AST of the PyTorch function-schema language, and its canonical printer.

Every node is a frozen, slotted dataclass with tuple fields; ``str(node)`` is the canonical text, and canonical
text is a fixed point: parsing ``str(schema)`` gives a schema equal to ``schema``. For every schema torch itself
registers, ``str(schema)`` is byte for byte what ``str(torch._C.parse_schema(text))`` prints. Where torch's printer
emits text its own parser rejects, this printer deviates so that the fixed point holds -- see Note [Printer
deviations]. This module never imports lark or torch.

Source positions (``span``: 0-based ``(start, end)`` offsets into the parsed text) and the source text of
default values and fixed list sizes are kept with ``compare=False``: they help tools point at things, but two
schemas that differ only in layout are equal.

Note [Printer deviations]
~~~~~~~~~~~~~~~~~~~~~~~~~~
torch prints (function_schema.h, ivalue.cpp, alias_info.h) and this module prints instead:

* ``Tensor!`` as ``Tensor($0! -> )``                 -> ``Tensor!``
* ``Tensor(a)?[]`` as ``Tensor?(a)[]``               -> ``Tensor(a)?[]`` (an annotation stays on the type it was written on)
* ``int[] x=[1, 1]`` as ``int[] x=1``                -> ``int[] x=[1, 1]`` (the one-scalar form only when it reads back
  the same, i.e. ``int[N]`` with N equal elements)
* ``Device d="cpu"`` as ``Device d=cpu``; ``Scalar x="a"`` as ``Scalar x=a``   -> strings are always quoted
* complex ``2j`` as ``0.+2.j``                        -> ``2.j`` (only imaginary literals exist)
* ``-0.0`` as ``0.``                                  -> ``-0.``; subnormal doubles as ``%.17g`` text that torch's strtod
  rejects -> exact hexadecimal (``0x1p-1074``)
* non-ASCII strings as octal escapes of each signed byte -> the characters themselves; ``\\r`` (which torch cannot
  read back) -> ``\\015``
* alias sets in hash order                            -> in the order written (equality ignores the order)
* ``Tensor(a)[](b)[](c)`` as ``Tensor[](b)[](c)``     -> every annotation that was written
* an optional of an optional Scalar (``Scalar??``, ``Union(Scalar, None)?``) as ``Union(Scalar)?`` -> ``Scalar?``
  (torch reads both as the same type; ``Union(Scalar)?`` itself prints as ``Scalar?`` in torch, so only
  ``Scalar?`` is a fixed point)

Note [Absorbed union members]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Union normalisation drops members another member absorbs (``AnyClassType`` absorbs every custom class, ``Any``
everything but None, ``Future(Any)`` every Future). torch checks custom classes and type variables while it
parses, before the Union forms, so a check of what was *written* must still see them: ``UnionType`` and
``OptionalType`` keep the dropped members in ``absorbed`` (``compare=False``, never printed), and
``schema.parse_schema`` walks them for its ``class_exists`` and ``allow_typevars`` checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "MAX_TYPE_DEPTH",
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
    "DefaultValue",
    "NoneValue",
    "BoolValue",
    "IntValue",
    "FloatValue",
    "ComplexValue",
    "StrValue",
    "DeviceValue",
    "ListValue",
    "OperatorName",
    "Argument",
    "Return",
    "FunctionSchema",
    "format_float",
    "quote_string",
]

# Types nest at most this deep. torch's recursive-descent parser overflows the C stack near 5,000; our
# dataclasses' generated __eq__/__hash__/__repr__ and the printer recurse once or a few frames per level, so the
# bound keeps every operation far below Python's recursion limit. Real schemas nest 4 deep at most.
MAX_TYPE_DEPTH = 100

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

    def __post_init__(self) -> None:
        self._set_depth(_depth_of(*self.members))

    def __str__(self) -> str:
        return "Union(" + ", ".join(map(str, self.members)) + ")" + _alias_text(self.alias)

    def without_aliases(self) -> Type:
        return self if self.alias is None else UnionType(self.members, None, self.absorbed)


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


# ---------------------------------------------------------------------------------------------------------------
# Default values


def format_float(value: float) -> str:
    """A double as torch prints it (ivalue.cpp): integral values as ``1.``/``-3.``, others with 17 significant
    digits (``1.0000000000000001e-05``). Deviations (Note [Printer deviations]): ``-0.0`` keeps its sign and a
    subnormal is printed in exact hexadecimal, because torch's reader rejects ``%.17g`` subnormals."""
    if value == 0.0:
        return "-0." if math.copysign(1.0, value) < 0 else "0."
    if math.isfinite(value) and abs(value) < 2.2250738585072014e-308:
        return float.hex(value)
    if math.isfinite(value) and -(2.0**63) <= value < 2.0**63 and value == int(value):
        return f"{int(value)}."
    return f"{value:.17g}"


_NAMED_ESCAPES = {
    "\\": "\\\\",
    "'": "\\'",
    '"': '\\"',
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\t": "\\t",
    "\v": "\\v",
}


def quote_string(value: str) -> str:
    """A string as a double-quoted literal that torch's lexer reads back to the same value.

    Matches torch's printQuotedString on printable ASCII and the named escapes; ``\\r`` and other control
    characters become 3-digit octal escapes, printable non-ASCII characters are kept, and lone surrogates (bytes
    of invalid UTF-8 that came from octal escapes) are written back as octal escapes of those bytes.
    """
    out = ['"']
    for ch in value:
        code = ord(ch)
        escaped = _NAMED_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\{code:03o}")
        elif 0xDC80 <= code <= 0xDCFF:  # a raw byte carried by the surrogateescape error handler
            out.append(f"\\{code - 0xDC00:03o}")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogateescape"))
    out.append('"')
    return "".join(out)


@dataclass(frozen=True, slots=True)
class DefaultValue:
    """Base class of default values. ``text`` is the default's source text and ``span`` its position."""

    text: str = field(default="", compare=False, repr=False, kw_only=True)
    span: Span = field(default=(0, 0), compare=False, repr=False, kw_only=True)

    @property
    def value(self) -> object:
        """The Python value (None, bool, int, float, complex, str, or a tuple of those)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class NoneValue(DefaultValue):
    """``None``."""

    @property
    def value(self) -> None:
        return None

    def __str__(self) -> str:
        return "None"


@dataclass(frozen=True, slots=True)
class BoolValue(DefaultValue):
    """``True`` / ``False``."""

    value: bool

    def __str__(self) -> str:
        return "True" if self.value else "False"


@dataclass(frozen=True, slots=True)
class IntValue(DefaultValue):
    """A 64-bit integer. Enum-like identifiers (``Mean``, ``strided``, dtype names) are stored as their codes."""

    value: int

    def __post_init__(self) -> None:
        if not -(2**63) <= self.value < 2**63:
            raise ValueError(f"an int default must fit in 64 bits, got {self.value}")

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class FloatValue(DefaultValue):
    """A double."""

    value: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.value):  # the language has no literal for inf or nan
            raise ValueError(f"a float default must be finite, got {self.value}")

    def __str__(self) -> str:
        return format_float(self.value)


@dataclass(frozen=True, slots=True)
class ComplexValue(DefaultValue):
    """A complex number. The language has only imaginary literals (``2j``), so the real part is always 0."""

    imag: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.imag):
            raise ValueError(f"a complex default must be finite, got {self.imag}j")

    @property
    def value(self) -> complex:
        return complex(0.0, self.imag)

    def __str__(self) -> str:
        return format_float(self.imag) + "j"


@dataclass(frozen=True, slots=True)
class StrValue(DefaultValue):
    """A string (octal escapes that form invalid UTF-8 are kept as surrogate-escaped bytes)."""

    value: str

    def __str__(self) -> str:
        return quote_string(self.value)


@dataclass(frozen=True, slots=True)
class DeviceValue(DefaultValue):
    """The default of a ``Device`` argument: a device type and an optional index (``"cuda:0"``)."""

    device_type: str
    index: int | None = None

    @property
    def value(self) -> str:
        return self.device_type if self.index is None else f"{self.device_type}:{self.index}"

    def __str__(self) -> str:
        return quote_string(self.value)


ScalarValue = NoneValue | BoolValue | IntValue | FloatValue | ComplexValue | StrValue | DeviceValue


@dataclass(frozen=True, slots=True)
class ListValue(DefaultValue):
    """A list default ``[a, b]`` (of ints, doubles, bools or complex numbers, never mixed)."""

    items: tuple[DefaultValue, ...]

    @property
    def value(self) -> tuple[object, ...]:
        return tuple(item.value for item in self.items)

    def __str__(self) -> str:
        return "[" + ", ".join(map(str, self.items)) + "]"


# Identifiers that parse to these ints for any argument type. An int default of a float or complex argument
# can only come from one of them, and only the identifier reads back as that int (a digit would read as a double).
_ENUM_NAMES = {6: "float", 9: "complex", 4: "long", 0: "strided", 1: "Mean"}


def _default_text(type_: Type, default: DefaultValue) -> str:
    if (
        isinstance(default, IntValue)
        and isinstance(type_, BaseType)
        and type_.name in ("float", "complex")
        and default.value in _ENUM_NAMES
    ):
        return _ENUM_NAMES[default.value]
    # torch prints an int[N] list of >= 2 equal elements as one scalar; keep that where it reads back the same
    # (the size matches the length), print the list everywhere else (Note [Printer deviations]).
    if (
        isinstance(default, ListValue)
        and isinstance(type_, ListType)
        and type_.size is not None
        and type_.size == len(default.items) >= 2
        and isinstance(type_.elem, BaseType)
        and type_.elem.name == "int"
        and all(item == default.items[0] for item in default.items)
    ):
        return str(default.items[0])
    return str(default)


# ---------------------------------------------------------------------------------------------------------------
# Schemas


@dataclass(frozen=True, slots=True)
class OperatorName:
    """``namespace::name.overload``; ``namespace`` and ``overload`` are empty when absent, ``name`` is empty
    for a nameless schema ``(Tensor x) -> Tensor``."""

    namespace: str
    name: str
    overload: str = ""

    def __str__(self) -> str:
        text = f"{self.namespace}::{self.name}" if self.namespace else self.name
        return f"{text}.{self.overload}" if self.overload else text


@dataclass(frozen=True, slots=True)
class Argument:
    """One input argument: ``type name[=default]``; ``kwarg_only`` for arguments after ``*``."""

    name: str
    type: Type
    default: DefaultValue | None = None
    kwarg_only: bool = False
    span: Span = field(default=(0, 0), compare=False, repr=False)

    @property
    def alias_info(self) -> AliasInfo | None:
        """The annotation of the argument's outer type (``Tensor(a!)``, ``Tensor[](a)``, ``Tensor(a)?``)."""
        return self.type.alias

    @property
    def is_write(self) -> bool:
        """True if the argument is written to: ``Tensor(a!)``, ``Tensor!``, ``Tensor(a!)[]`` (torch marks the
        list itself mutable when its elements are)."""
        t = self.type
        while True:
            alias = t.alias
            if alias is not None and alias.is_write:
                return True
            if isinstance(t, (OptionalType, ListType)):
                t = t.elem
            else:
                return False

    @property
    def is_out(self) -> bool:
        """torch's ``Argument::is_out``: keyword-only and annotated (``Tensor(a!)[]`` counts: torch gives the
        list an annotation of its own when its elements have one)."""
        if not self.kwarg_only:
            return False
        t = self.type
        if t.alias is not None:
            return True
        while isinstance(t, OptionalType):
            t = t.elem
        return isinstance(t, ListType) and t.elem.alias is not None

    def __str__(self) -> str:
        text = f"{self.type} {self.name}"
        if self.default is not None:
            text += "=" + _default_text(self.type, self.default)
        return text


@dataclass(frozen=True, slots=True)
class Return:
    """One return: a type and an optional field name."""

    type: Type
    name: str | None = None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    @property
    def alias_info(self) -> AliasInfo | None:
        return self.type.alias

    def __str__(self) -> str:
        return str(self.type) if self.name is None else f"{self.type} {self.name}"


@dataclass(frozen=True, slots=True)
class FunctionSchema:
    """A whole schema: ``name(arguments) -> returns``. ``is_vararg``/``is_varret`` mark a trailing ``...``."""

    name: OperatorName
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    is_vararg: bool = False
    is_varret: bool = False

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments)

    def __str__(self) -> str:
        parts = []
        seen_kwarg_only = False
        for argument in self.arguments:
            if argument.kwarg_only and not seen_kwarg_only:
                parts.append("*")
                seen_kwarg_only = True
            parts.append(str(argument))
        if self.is_vararg:
            parts.append("...")
        returns = [str(r) for r in self.returns]
        if self.is_varret:
            returns.append("...")
        if len(self.returns) == 1 and not self.is_varret:
            # A single return prints bare, unless that would read as a return list: ((int, str)).
            ret = returns[0]
            ret_text = f"({ret})" if ret[:1] == "(" else ret
        elif not self.returns and self.is_varret:
            ret_text = "..."
        else:
            ret_text = "(" + ", ".join(returns) + ")"
        return f"{self.name}({', '.join(parts)}) -> {ret_text}"
