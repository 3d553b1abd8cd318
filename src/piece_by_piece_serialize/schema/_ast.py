"""The typed AST of the PyTorch function-schema language, and its canonical printer.

This module is the AST's one import point: the schema nodes (``OperatorName``, ``Argument``, ``Return``,
``FunctionSchema``) live here, beside the type nodes of ``_types`` and the default values of ``_values``, which
it re-exports. Every node is a frozen, slotted dataclass with tuple fields; ``str(node)`` is the canonical text,
and canonical text is a fixed point: parsing ``str(schema)`` gives a schema equal to ``schema``. For every schema
torch itself registers, ``str(schema)`` is byte for byte what ``str(torch._C.parse_schema(text))`` prints. Where
torch's printer emits text its own parser rejects, this printer deviates so that the fixed point holds -- see
Note [Printer deviations]. None of the AST modules imports lark or torch.

Source positions (``span``: 0-based ``(start, end)`` offsets into the parsed text) and the source text of
default values and fixed list sizes are kept with ``compare=False``: they help tools point at things, but two
schemas that differ only in layout are equal.

Note [Printer deviations]
~~~~~~~~~~~~~~~~~~~~~~~~~~
torch prints (function_schema.h, ivalue.cpp, alias_info.h) and the AST's printers (here, ``_types``, ``_values``) print
instead:

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._torch_tables import _ENUM_NAMES
from ._types import (
    MAX_TYPE_DEPTH,
    AliasInfo,
    AwaitType,
    BaseType,
    ClassType,
    DictType,
    FutureType,
    ListType,
    OptionalType,
    RRefType,
    Span,
    TupleType,
    Type,
    TypeVar,
    UnionType,
)
from ._values import (
    BoolValue,
    ComplexValue,
    DefaultValue,
    DeviceValue,
    FloatValue,
    IntValue,
    ListValue,
    NoneValue,
    StrValue,
    format_float,
    quote_string,
)

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


def _default_text(type_: Type, default: DefaultValue) -> str:
    # An int default of a float or complex argument can only come from an identifier that parses to an int for
    # any argument type (_ENUM_DEFAULTS), and only the identifier reads back as that int (a digit would read as a
    # double).
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
    name_span: Span = field(default=(0, 0), compare=False, repr=False)  # where the name alone was written

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
