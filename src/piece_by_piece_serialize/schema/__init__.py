"""Parse, print and query PyTorch operator function schemas.

The language is defined by ``grammars/schema.lark`` and read exactly as ``torch._C.parse_schema`` reads it
(torch 2.13): the same inputs are accepted, the same values come out of defaults, and ``str(parse_schema(s))``
is what torch prints for every schema torch registers. The few deliberate differences are listed in
docs/schema.md. Malformed input raises :class:`~piece_by_piece_serialize.errors.SchemaError`, never anything
else.

Importing this module imports neither torch nor lark: the parser is built on the first parse and then reused.

Imports: the modules of this package, and of the library only :mod:`.._lalr` (the engine), :mod:`..errors` and
:mod:`.._diagnostics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from ..errors import SchemaError
from ._ast import (
    MAX_TYPE_DEPTH,
    AliasInfo,
    Argument,
    AwaitType,
    BaseType,
    BoolValue,
    ClassType,
    ComplexValue,
    DefaultValue,
    DeviceValue,
    DictType,
    FloatValue,
    FunctionSchema,
    FutureType,
    IntValue,
    ListType,
    ListValue,
    NoneValue,
    OperatorName,
    OptionalType,
    Return,
    RRefType,
    StrValue,
    TupleType,
    Type,
    TypeVar,
    UnionType,
    format_float,
    quote_string,
)
from ._values import shortest_default, shortest_float

if TYPE_CHECKING:
    from ._transform import ParseResult

__all__ = [
    "parse_schema",
    "parse_operator_name",
    "extract_names_from_schema",
    "print_shortest",
    "torch_class_exists",
    "SchemaError",
    "MAX_TYPE_DEPTH",
    "FunctionSchema",
    "OperatorName",
    "Argument",
    "Return",
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
    "format_float",
    "shortest_float",
    "quote_string",
]

ClassCheck = Callable[[str, str], bool]


def _parse(text: str) -> ParseResult:
    if not isinstance(text, str):
        raise TypeError(f"a schema must be a str, not {type(text).__name__}")
    from ._choice import parse  # the parser is loaded on first use only

    return parse(text)


def _all_types(t: Type) -> Iterator[Type]:
    """Every type written inside ``t``, including Union members that normalisation absorbed (Note [Absorbed union
    members] in _types.py) -- iterative; depth is bounded anyway."""
    stack = [t]
    while stack:
        t = stack.pop()
        yield t
        if isinstance(t, OptionalType):
            stack.extend(reversed(t.absorbed))
            stack.append(t.elem)
        elif isinstance(t, (ListType, FutureType, AwaitType, RRefType)):
            stack.append(t.elem)
        elif isinstance(t, TupleType):
            stack.extend(reversed(t.elems))
        elif isinstance(t, DictType):
            stack.extend((t.value, t.key))
        elif isinstance(t, UnionType):
            stack.extend(reversed(t.absorbed))
            stack.extend(reversed(t.members))


def _schema_types(schema: FunctionSchema) -> Iterator[Type]:
    for argument in schema.arguments:
        yield from _all_types(argument.type)
    for ret in schema.returns:
        yield from _all_types(ret.type)


def parse_schema(
    text: str,
    *,
    allow_typevars: bool = True,
    allow_nameless: bool = False,
    class_exists: ClassCheck | None = None,
) -> FunctionSchema:
    """Parse one PyTorch function schema, e.g. ``"aten::add.Tensor(Tensor self, Tensor other, *, Scalar
    alpha=1) -> Tensor"``.

    :param text: the schema. Comments, newlines inside brackets and line continuations are allowed as in torch.
    :param allow_typevars: accept lower-case unknown type names as type variables (``t``, ``foo.Bar``), as
        ``torch._C.parse_schema`` does by default. With False (how ``Library.define`` parses) they are errors,
        except in schemas starting with ``aten::`` or ``prim::``, where torch always allows them.
    :param allow_nameless: also accept the nameless forms ``(Tensor x) -> Tensor`` and
        ``((Tensor x) -> Tensor)`` (torch's C++ parser rejects them); the schema's name is then empty.
    :param class_exists: ``class_exists(namespace, name)`` is asked about every custom class type
        ``__torch__.torch.classes.<namespace>.<name>``; False is an error, as in torch, which checks the classes
        registered at run time. By default no check is made; pass :func:`torch_class_exists` to ask torch.
    :returns: the :class:`FunctionSchema`; ``str()`` of it is the canonical form.
    :raises SchemaError: on malformed input (with position, expected tokens and a caret line), on a bare
        operator name, and on the checks above.
    :raises TypeError: if ``text`` is not a str.
    """
    result = _parse(text)
    if result.kind == "name":
        raise SchemaError(
            "expected '(' and an argument list after the operator name (this is only an operator name)",
            text,
            len(text.rstrip()),
            ("'('",),
        )
    if result.kind != "schema" and not allow_nameless:
        raise SchemaError(
            "a schema needs an operator name before its argument list (torch rejects nameless schemas; "
            "pass allow_nameless=True to accept them)",
            text,
            result.pos + (1 if result.kind == "wrapped" else 0),
            ("a name",),
        )
    schema = cast(FunctionSchema, result.value)  # kind "schema", "nameless" or "wrapped"
    if not allow_typevars and not _typevars_forced(text, schema, result.pos):
        for t in _schema_types(schema):
            if isinstance(t, TypeVar):
                raise SchemaError(
                    f"unknown type '{t.name}' (type variables are not allowed here)", text, t.span[0], ()
                )
    if class_exists is not None:
        for t in _schema_types(schema):
            if isinstance(t, ClassType) and not class_exists(t.namespace, t.name):
                raise SchemaError(
                    f"unknown custom class type '{t.namespace}.{t.name}' (register it with torch::class_ first)",
                    text,
                    t.span[0],
                    (),
                )
    return schema


def _typevars_forced(text: str, schema: FunctionSchema, name_pos: int) -> bool:
    # torch allows type variables in any schema whose raw text begins with "aten::" or "prim::" -- a plain
    # prefix test on the string, so a leading blank defeats it. Mirror it with what the parser found.
    namespace = schema.name.namespace
    return (
        name_pos == 0
        and namespace in ("aten", "prim")
        and text[len(namespace) : len(namespace) + 2] == "::"
    )


def parse_operator_name(text: str) -> OperatorName:
    """Parse a bare operator name ``namespace::name.overload`` (the form ``torch._C.parse_schema`` rejects and
    ``torch.jit.parseName`` needs).

    :returns: the :class:`OperatorName`.
    :raises SchemaError: if ``text`` is not exactly an operator name.
    """
    result = _parse(text)
    if result.kind != "name":
        raise SchemaError("expected only an operator name, got a whole schema", text, result.pos, ())
    return cast(OperatorName, result.value)


def torch_class_exists(namespace: str, name: str) -> bool:
    """True if torch has a TorchBind class ``namespace.name`` registered (imports torch); for
    ``parse_schema(..., class_exists=torch_class_exists)``."""
    import torch

    try:
        torch._C._get_custom_class_python_wrapper(namespace, name)
    except RuntimeError:
        return False
    return True


# extract_names_from_schema runs on every forward call of a replaced submodule, with the same few schemas: a
# plain dict hit is the cheapest lookup Python has (functools.lru_cache costs twice as much per hit). Bounded:
# when full, the oldest entry goes first.
_NAMES_MAX = 8192
_names: dict[str, tuple[str, ...]] = {}


def extract_names_from_schema(schema: str) -> list[str]:
    """The input argument names of a schema, in order, keyword-only arguments included.

    Accepts everything :func:`parse_schema` accepts, plus the nameless forms ``(Tensor x) -> Tensor`` and
    ``((Tensor x, Tensor y) -> Tensor)``. Results are cached (at most 8,192 schemas, the oldest dropped first),
    so a repeated schema costs a dictionary lookup; each call returns a new list.

    :param schema: the schema text.
    :returns: the argument names, e.g. ``["self", "other", "alpha"]``.
    :raises SchemaError: if the schema is malformed.
    :raises TypeError: if ``schema`` is not a str.
    """
    try:
        return list(_names[schema])
    except KeyError:
        pass
    names = parse_schema(schema, allow_nameless=True).argument_names
    if len(_names) >= _NAMES_MAX:
        with suppress(KeyError, RuntimeError, StopIteration):  # another thread changed the cache meanwhile
            del _names[next(iter(_names))]
    _names[schema] = names
    return list(names)


def print_shortest(schema: FunctionSchema) -> str:
    """``str(schema)`` with every double default in its shortest spelling: ``eps=1e-05`` where torch prints
    ``eps=1.0000000000000001e-05`` (:func:`shortest_float`). Everything else is printed as ``str`` prints it, and
    torch (like :func:`parse_schema`) reads the text back to the same schema, defaults of the same values.
    """
    arguments = tuple(replace(a, default=shortest_default(a.default)) for a in schema.arguments)
    return str(replace(schema, arguments=arguments))
