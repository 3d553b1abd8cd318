"""Lint a parsed schema for text torch accepts but misreads, cannot print back, or quietly ignores.

torch's schema parser accepts some text whose meaning is not what a reader sees (``int x=0x10`` is 0,
``Scalar t=1E5`` is the integer 1, ``int[2.5]`` has size 2), and torch's printer emits some schemas in
a form its own parser rejects (``Tensor!`` prints as ``Tensor($0! -> )``, ``Device d="cpu"`` as
``d=cpu`` ...), which breaks anything that stores ``str(schema)`` and reads it back (torch.export
artifacts, AOTI packages). Some constructs parse and register but the dispatcher ignores them
(``Tensor[][]``, ``Tensor[]?``). Where a schema is defined decides more rules (``torch.library.define``
wants a nameless schema on one line; ``custom_op`` refuses keyword-only tensors).

Every rule here reads the AST from :mod:`piece_by_piece_serialize.schema` (types, default values with
their source text and spans); none re-reads the schema text, except the one rule that mirrors
``torch.library.define``'s own acceptance test on the raw string. Each finding has an offset into the
schema text, a severity, a stable code (documented in docs/cli.md) and a message.

Imports: the library's :mod:`..schema` (the AST) and :mod:`._contexts`; never the file readers or the
reporting, so a rule can be tested on a schema alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from ..schema import (
    AliasInfo,
    Argument,
    BaseType,
    BoolValue,
    ComplexValue,
    DefaultValue,
    DeviceValue,
    DictType,
    FloatValue,
    FunctionSchema,
    IntValue,
    ListType,
    ListValue,
    NoneValue,
    OptionalType,
    Return,
    StrValue,
    Type,
    TypeVar,
    UnionType,
    format_float,
)
from ._contexts import (
    CONTEXT_CUSTOM_OP,
    CONTEXT_LIBRARY_DEFINE,
    CONTEXT_TORCH_LIBRARY_DEFINE,
    NAMELESS,
)

__all__ = ["Lint", "has_typevar", "lint_schema", "typevar_at"]

# Base types whose default torch stores as a number read by stoll/stod.
_NUMERIC = frozenset({"int", "SymInt", "float", "Scalar"})
# What each scalar base type's default may be without surprise (torch accepts any constant for any kind).
_EXPECTED_DEFAULTS: dict[str, tuple[type, ...]] = {
    "int": (IntValue,),
    "SymInt": (IntValue,),
    "float": (FloatValue, IntValue),
    "bool": (BoolValue,),
    "str": (StrValue,),
    "Scalar": (IntValue, FloatValue, BoolValue, ComplexValue),
    "complex": (ComplexValue,),
}


@dataclass(frozen=True, slots=True)
class Lint:
    """One lint finding: ``offset`` into the schema text, ``severity`` "error"/"warning", a stable ``code``;
    ``related``, another offset the finding is about (the first of two duplicates), which the checker names in
    the message as a place in the file."""

    offset: int
    severity: str
    code: str
    message: str
    related: int | None = None


def lint_schema(schema: FunctionSchema, text: str, context: str) -> list[Lint]:
    """All lint findings for ``schema`` (parsed from ``text``) defined in ``context`` (see ``_sources``)."""
    found: list[Lint] = []
    found.extend(_context_rules(schema, text, context))
    for argument in schema.arguments:
        found.extend(_type_rules(argument.type, argument.span[0]))
        if _holds_tensor(argument.type) and not _dispatch_visible(argument.type):
            found.append(
                Lint(
                    argument.span[0],
                    "warning",
                    "dispatcher-ignores",
                    f"the dispatcher ignores the tensors inside '{argument.type.without_aliases()}' when it picks a kernel "
                    "(only Tensor, Tensor?, Tensor[] and Tensor?[] arguments are dispatch inputs)",
                )
            )
        if argument.default is not None:
            found.extend(_default_rules(argument, argument.default))
        if context == CONTEXT_CUSTOM_OP and argument.kwarg_only and _holds_tensor(argument.type):
            found.append(
                Lint(
                    argument.span[0],
                    "warning",
                    "custom-op-kwarg-tensor",
                    f"custom_op refuses keyword-only Tensor arguments ('{argument.name}') unless the op is tagged torch.Tag.out",
                )
            )
    for ret in schema.returns:
        found.extend(_type_rules(ret.type, ret.span[0]))
    found.extend(_duplicate_names(schema))
    return found


def _duplicate_names(schema: FunctionSchema) -> Iterator[Lint]:
    """Each argument whose name an earlier argument already has. torch registers such a schema (its parser does
    not look), but a call by keyword can reach only one of them and Python-side tools that bind by name
    (``torch.library`` kernels, ``custom_op``, export's argument matching) take the wrong one or fail: a bug, as in
    a schema that declares ``Tensor q_seqlens`` twice."""
    first: dict[str, tuple[int, Argument]] = {}
    for i, argument in enumerate(schema.arguments, 1):
        index, earlier = first.setdefault(argument.name, (i, argument))
        if index != i:
            yield Lint(
                argument.name_span[0],
                "error",
                "duplicate-argument",
                f"argument name '{argument.name}' is used twice (arguments {index} and {i}): a call by keyword reaches "
                "only one of them",
                related=earlier.name_span[0],
            )


def has_typevar(schema: FunctionSchema) -> bool:
    """Whether any argument or return type holds a type variable, union members that normalisation absorbed
    included (only then can parsing with type variables off fail, so only then is it worth doing)."""
    items: tuple[Argument | Return, ...] = (*schema.arguments, *schema.returns)
    stack: list[Type] = [item.type for item in items]
    while stack:
        t = stack.pop()
        if isinstance(t, TypeVar):
            return True
        stack.extend(getattr(t, "absorbed", ()))
        elem = getattr(t, "elem", None)
        if elem is not None:
            stack.append(elem)
        elif isinstance(t, DictType):
            stack.extend((t.key, t.value))
        elif isinstance(t, UnionType):
            stack.extend(t.members)
        else:
            stack.extend(getattr(t, "elems", ()))
    return False


def typevar_at(schema: FunctionSchema, offset: int) -> TypeVar | None:
    """The type variable written at ``offset``, if any (to tell opaque type names from typos)."""
    items: tuple[Argument | Return, ...] = (*schema.arguments, *schema.returns)
    for item in items:
        for t in _walk(item.type):
            if isinstance(t, TypeVar) and t.span[0] == offset:
                return t
    return None


# ------------------------------------------------------------------------------------------------
# Where the schema is defined


def _context_rules(schema: FunctionSchema, text: str, context: str) -> Iterator[Lint]:
    named = bool(schema.name.name)
    if context in NAMELESS and named:
        yield Lint(
            0,
            "error",
            "nameless-expected",
            f"{context} takes the schema without the operator name, like '(Tensor x) -> Tensor'",
        )
    if context == CONTEXT_TORCH_LIBRARY_DEFINE:
        # torch.library.define tests the raw string against the pattern `\(.*\) -> .*` (a full match, where "."
        # never matches a newline) before parsing it: the text must start with '(' and hold ") -> " on a single
        # line. Mirror that test exactly.
        newline = text.find("\n")
        if newline >= 0:
            yield Lint(newline, "error", "define-format", "torch.library.define rejects a schema that spans several lines")
        elif text[:1] != "(" or text.find(") -> ", 1) < 0:
            yield Lint(
                0,
                "error",
                "define-format",
                "torch.library.define rejects this text: it must start with '(' and have ' -> ' with one space on each side",
            )
    if context == CONTEXT_LIBRARY_DEFINE and schema.name.namespace:
        yield Lint(
            0,
            "warning",
            "library-namespace",
            f"Library.define with the namespace '{schema.name.namespace}::' written out: torch records the op as "
            f"'{schema.name.namespace}::{schema.name.namespace}::{schema.name.name}' and its cleanup fails at exit; "
            "leave the namespace to the Library",
        )


# ------------------------------------------------------------------------------------------------
# Types


def _walk(t: Type) -> Iterator[Type]:
    """Every type inside ``t`` (iterative: types nest up to MAX_TYPE_DEPTH)."""
    stack = [t]
    while stack:
        t = stack.pop()
        yield t
        elem = getattr(t, "elem", None)
        if elem is not None:
            stack.append(elem)
        elif isinstance(t, DictType):
            stack.extend((t.value, t.key))
        elif isinstance(t, UnionType):
            stack.extend(reversed(t.members))
        else:
            stack.extend(reversed(getattr(t, "elems", ())))


def _is_tensor(t: Type) -> bool:
    if isinstance(t, OptionalType):
        t = t.elem
    return isinstance(t, BaseType) and t.name == "Tensor"


def _dispatch_visible(t: Type) -> bool:
    """Tensor, Tensor?, Tensor[] or Tensor?[] (fixed sizes included): the types DispatchKeyExtractor reads
    (pytorch/pytorch#124863; torch warns about the others from Library.define since #186454)."""
    if isinstance(t, ListType):
        t = t.elem
    return _is_tensor(t)


def _holds_tensor(t: Type) -> bool:
    return any(isinstance(u, BaseType) and u.name == "Tensor" for u in _walk(t))


def _aliases(t: Type) -> Iterator[AliasInfo]:
    for u in _walk(t):
        alias = getattr(u, "alias", None)
        # OptionalType reports its element's annotation; count each annotation once, on its owner
        if alias is not None and not isinstance(u, OptionalType):
            yield alias


def _type_rules(t: Type, offset: int) -> Iterator[Lint]:
    for alias in _aliases(t):
        if alias.is_fresh:
            yield Lint(
                offset,
                "warning",
                "no-roundtrip",
                "torch prints the '!' shorthand as '($0! -> )', which it cannot parse back; write a named set such as Tensor(a!)",
            )
        for aliases in dict.fromkeys((alias.before, alias.after)):  # without '->' both sets are the same
            if "*" in aliases and len(aliases) > 1:
                yield Lint(
                    offset,
                    "warning",
                    "no-roundtrip",
                    f"torch prints alias sets in hash order, so ({'|'.join(aliases)}) can come back with '*' first, which it cannot parse",
                )
    for u in _walk(t):
        if isinstance(u, ListType):
            elem = u.elem
            if isinstance(elem, OptionalType) and elem.alias is not None:
                yield Lint(
                    offset,
                    "warning",
                    "no-roundtrip",
                    f"torch prints '{u}' as '{elem.elem.without_aliases()}?{elem.alias}[]', which it cannot parse back",
                )
            if u.size is not None and u.size_text is not None and u.size_text != str(u.size):
                yield Lint(
                    u.size_span[0],
                    "warning",
                    "misread-size",
                    f"torch reads the list size '{u.size_text}' as {u.size}",
                )


# ------------------------------------------------------------------------------------------------
# Default values


def _base_name(t: Type) -> str | None:
    if isinstance(t, OptionalType):
        t = t.elem
    return t.name if isinstance(t, BaseType) else None


def _default_rules(argument: Argument, default: DefaultValue) -> Iterator[Lint]:
    t = argument.type
    base = _base_name(t)
    items: tuple[DefaultValue, ...] = default.items if isinstance(default, ListValue) else (default,)
    for item in items:
        yield from _value_rules(item, base if not isinstance(default, ListValue) else _list_elem_name(t))
    if isinstance(default, DeviceValue):
        yield Lint(default.span[0], "warning", "no-roundtrip", f"torch prints Device defaults unquoted ('{argument.name}={default.value}'), which it cannot parse back")
    if isinstance(default, StrValue) and base != "str":
        yield Lint(
            default.span[0],
            "warning",
            "no-roundtrip",
            f"a string default for a '{t}' argument: torch prints it unquoted ('{argument.name}={default.value}'), which it cannot parse back",
        )
    elif base in _EXPECTED_DEFAULTS and not isinstance(default, NoneValue) and not isinstance(default, _EXPECTED_DEFAULTS[base]):
        kind = type(default).__name__.removesuffix("Value").lower()
        yield Lint(
            default.span[0],
            "warning",
            "default-type",
            f"the default {default.text} of the '{t}' argument '{argument.name}' is a {kind}: torch keeps it as a {kind}",
        )
    if isinstance(t, ListType) and t.size is None and isinstance(default, ListValue):
        elem = t.elem
        if isinstance(elem, BaseType) and elem.name == "int" and len(default.items) >= 2 and all(i == default.items[0] for i in default.items):
            yield Lint(
                default.span[0],
                "warning",
                "no-roundtrip",
                f"torch prints the default {default} of an int[] as the single value {default.items[0]}, which parses back only with a fixed size (int[{len(default.items)}])",
            )
    if isinstance(t, OptionalType) and isinstance(t.elem, ListType) and t.elem.size is not None and not isinstance(default, (NoneValue, ListValue)):
        yield Lint(
            default.span[0],
            "warning",
            "misread-optional-list",
            f"torch stores the default of '{t}' as the single value {default}, not a list of {t.elem.size}",
        )


def _list_elem_name(t: Type) -> str | None:
    if isinstance(t, OptionalType):
        t = t.elem
    return _base_name(t.elem) if isinstance(t, ListType) else None


def _value_rules(item: DefaultValue, base: str | None) -> Iterator[Lint]:
    if isinstance(item, ComplexValue):
        torch_text = f"{format_float(0.0)}{'-' if item.imag < 0 else '+'}{format_float(abs(item.imag))}j"
        yield Lint(item.span[0], "warning", "no-roundtrip", f"torch prints the complex default {item.text} as {torch_text}, which it cannot parse back")
    elif isinstance(item, FloatValue) and item.value == 0.0 and math.copysign(1.0, item.value) < 0:
        yield Lint(item.span[0], "warning", "no-roundtrip", "torch prints -0.0 as '0.', losing the sign")
    elif isinstance(item, StrValue):
        if any(ord(ch) >= 0x80 for ch in item.value):
            yield Lint(item.span[0], "warning", "no-roundtrip", "torch prints non-ASCII characters in string defaults as broken octal escapes")
        if "\r" in item.value:
            yield Lint(item.span[0], "warning", "no-roundtrip", "torch prints a carriage return as '\\r', an escape its parser rejects")
    if isinstance(item, (IntValue, FloatValue)) and base in _NUMERIC:
        seen = _as_written(item.text)
        if seen is not None and (seen != item.value or (isinstance(item, IntValue) and isinstance(seen, float) and base == "Scalar")):
            kind = "integer" if isinstance(item, IntValue) else "float"
            yield Lint(item.span[0], "warning", "misread-number", f"torch reads {item.text} as the {kind} {item.value!r}, not {seen!r}")


def _as_written(text: str) -> int | float | None:
    """What a number literal means to a reader (Python's reading), or None when it is not a number.

    torch reads integers with std::stoll (base 10, stopping at the first other character) and decides
    int vs float by looking for '.', 'e' and 'j'; comparing with this reading exposes the difference.
    """
    sign = -1 if text[:1] == "-" else 1
    body = text[1:] if sign < 0 else text
    if body.isdigit():
        return sign * int(body)
    for read in (lambda s: int(s, 0), float, float.fromhex):
        try:
            return sign * read(body)
        except ValueError:
            continue
    return None
