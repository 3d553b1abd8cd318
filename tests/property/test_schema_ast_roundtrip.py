"""Property: any schema AST the language can express prints to text that parses back to an equal AST, and that
text is canonical (printing the re-parsed schema gives the same text). torch reads the text too.

The strategies draw only ASTs the parser can produce (its invariants): annotations only on the outer chain of
an argument or return type (lists, optionals, the base), container members in torch's "fake" types
(SymInt/ScalarType/Layout/MemoryFormat are int inside tuples, Dict, Union, Future, ...), no T??, no None?,
fixed sizes only on the outer list, normalised Unions, defaults of the kinds each type admits, and no
positional argument without a default after one with a default.
"""

from __future__ import annotations

import string

import torch
from hypothesis import given
from hypothesis import strategies as st

from piece_by_piece_serialize._diagnostics import Refused
from piece_by_piece_serialize.schema import _aliases, _defaults, _torch_tables, _transform, _union
from piece_by_piece_serialize.schema import (
    AliasInfo,
    Argument,
    AwaitType,
    BaseType,
    BoolValue,
    ComplexValue,
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
    TypeVar,
    UnionType,
    parse_schema,
)

RESERVED = {"def", "if", "else", "elif", "while", "return", "is", "and", "or", "not", "in", "for", "global",
            "raise", "assert", "break", "continue", "del", "pass", "class", "import", "with", "as", "True",
            "False", "None", "Ellipsis", "NoneType"}  # fmt: skip
BUILTIN_SPELLINGS = set(_torch_tables._BASE_TYPES) | {"Tensor"}

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in RESERVED)
names = st.one_of(identifiers, st.sampled_from(["Tensor", "Dict", "Union", "Future", "Await", "RRef", "__torch__"]))
overloads = names.filter(lambda s: s != "default" and s[:2] != "__")
typevar_heads = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(string.ascii_lowercase),
    st.from_regex(r"[a-z0-9_]{0,4}", fullmatch=True),
).filter(lambda s: s not in BUILTIN_SPELLINGS and s not in RESERVED)
typevar_names = st.builds(lambda head, dotted: head + dotted, typevar_heads, st.sampled_from(["", ".Bar", ".x.Y"]))

BASES = sorted(set(_torch_tables._BASE_TYPES.values()) | {"Tensor"})
FAKE_BASES = [b for b in BASES if b not in _torch_tables._FAKE_INT]


@st.composite
def alias_infos(draw):
    def alias_set():
        xs = draw(st.lists(identifiers, min_size=0, max_size=3, unique=True))
        star = draw(st.booleans()) or not xs
        return tuple(xs) + (("*",) if star else ())

    before = alias_set()
    after = alias_set() if draw(st.booleans()) else before
    return AliasInfo(before, after, draw(st.booleans()))


maybe_alias = st.one_of(st.none(), alias_infos(), st.just(_aliases._FRESH))


def member(t):
    return _union._member(t)


def leaf(fake: bool):
    return st.one_of(
        st.builds(BaseType, st.sampled_from(FAKE_BASES if fake else BASES)),
        st.builds(TypeVar, typevar_names),
    )


def containers(inner):
    members = inner.map(member).filter(lambda t: not (isinstance(t, BaseType) and t.name == "NoneType"))
    keys = st.sampled_from(sorted(_torch_tables._DICT_KEYS - _torch_tables._FAKE_INT)).map(BaseType)
    return st.one_of(
        st.lists(members, max_size=3).map(lambda xs: TupleType(tuple(xs))),
        st.builds(DictType, keys, members),
        st.builds(FutureType, members),
        st.builds(AwaitType, members),
        st.builds(RRefType, members),
        st.lists(members, min_size=2, max_size=3).flatmap(union_of),
        members.flatmap(optional_of),
        st.builds(ListType, members),
    )


def optional_of(t):
    try:
        return st.just(_union._optional(t, 0))
    except Refused:
        return st.nothing()


def union_of(members):
    try:
        result = _union._union(list(members), 0)
    except Refused:
        return st.nothing()
    return st.just(result)


inner_types = st.recursive(leaf(False), containers, max_leaves=6)


@st.composite
def outer_types(draw, allow_size=True):
    """An argument/return type: a base with a chain of [] / ? (each [] and the base may be annotated)."""
    t = draw(inner_types)
    t = with_alias(t, draw(maybe_alias))
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            t = ListType(t, None, draw(maybe_alias))
        elif not (isinstance(t, BaseType) and t.name == "NoneType"):
            t = _union._optional(t, 0)
    if allow_size and draw(st.booleans()):
        t = ListType(t, draw(st.integers(0, 2**31 - 1)), draw(maybe_alias))
        if draw(st.booleans()):
            t = OptionalType(t)
    return t


def with_alias(t, alias):
    if alias is None or not isinstance(t, (BaseType, TypeVar, DictType, UnionType)):
        return t
    return _aliases._with_alias(t, alias, 0)


finite = st.floats(allow_nan=False, allow_infinity=False)
int64 = st.integers(-(2**63), 2**63 - 1)
texts = st.text(
    st.characters(exclude_categories=["Cs"]) | st.sampled_from([chr(c) for c in range(0xDC80, 0xDD00)]), max_size=8
).filter(lambda s: s == s.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"))
scalar_values = st.one_of(
    st.builds(NoneValue),
    st.builds(BoolValue, st.booleans()),
    st.builds(IntValue, int64),
    st.builds(FloatValue, finite),
    st.builds(ComplexValue, finite),
    st.builds(StrValue, texts),
)
ENUM_CODES = sorted(_torch_tables._ENUM_DEFAULTS.values())


def defaults_for(t):
    """A strategy for the defaults type ``t`` admits, or None."""
    if isinstance(t, OptionalType):
        return scalar_values
    if isinstance(t, ListType):
        kind = _defaults._scalar_kind(t.elem)
        item = {
            "int": st.builds(IntValue, int64),
            "float": st.builds(FloatValue, finite),
            "bool": st.builds(BoolValue, st.booleans()),
            "complex": st.builds(ComplexValue, finite),
        }.get(kind or "")
        if item is None:
            return None
        return st.lists(item, max_size=4).map(lambda xs: ListValue(tuple(xs)))
    kind = _defaults._scalar_kind(t)
    if kind is None:
        return None
    if kind == "tensor":
        return st.builds(NoneValue)
    if kind == "device":
        return st.builds(DeviceValue, st.sampled_from(sorted(_torch_tables._DEVICE_TYPES)), st.none() | st.integers(0, 127))
    if kind == "float":
        return st.one_of(st.builds(FloatValue, finite), st.builds(IntValue, st.sampled_from(ENUM_CODES)),
                         st.builds(BoolValue, st.booleans()), st.builds(NoneValue), st.builds(StrValue, texts),
                         st.builds(ComplexValue, finite))  # fmt: skip
    if kind == "complex":
        return st.one_of(st.builds(ComplexValue, finite), st.builds(IntValue, st.sampled_from(ENUM_CODES)),
                         st.builds(BoolValue, st.booleans()), st.builds(NoneValue), st.builds(StrValue, texts))  # fmt: skip
    return scalar_values


@st.composite
def schemas(draw):
    arguments = []
    arg_names = draw(st.lists(names, max_size=5))
    kwarg_from = draw(st.integers(0, len(arg_names)))
    vararg = draw(st.booleans()) and draw(st.booleans())
    for i, name in enumerate(arg_names):
        t = draw(outer_types())
        default = None
        options = defaults_for(t)
        if options is not None and not vararg and draw(st.booleans()):
            default = draw(options)
        arguments.append(Argument(name, t, default, i >= kwarg_from))
    # torch (FunctionSchema::checkSchema): once a positional argument has a default, every later positional one
    # must have one too or be a list; a defaulted list counts as a default like any other. So the non-list
    # arguments without a default go first (the sort is stable), the rest after them.
    positional = [a for a in arguments if not a.kwarg_only]
    positional.sort(key=lambda a: a.default is not None or isinstance(a.type, ListType))
    ordered = positional + [a for a in arguments if a.kwarg_only]
    returns = tuple(Return(draw(outer_types()), draw(st.none() | names)) for _ in range(draw(st.integers(0, 3))))
    name = OperatorName(draw(st.just("") | names), draw(names), draw(st.just("") | overloads))
    schema = _transform._schema(name, (tuple(ordered), vararg), returns, draw(st.booleans()))
    return schema


@given(schemas())
def test_printed_schema_parses_back_to_the_same_ast(schema: FunctionSchema):
    text = str(schema)
    again = parse_schema(text)
    assert again == schema
    assert str(again) == text


@given(schemas())
def test_torch_accepts_our_canonical_text(schema: FunctionSchema):
    text = str(schema)
    theirs = torch._C.parse_schema(text)
    assert [a.name for a in theirs.arguments] == list(schema.argument_names)
