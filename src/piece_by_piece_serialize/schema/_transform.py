"""Tokens -> AST for the schema language: the LALR tables of ``grammars/schema.lark`` with these callbacks.

The engine (:mod:`._lalr`, running the tables lark computes from the grammar; see :mod:`._lalr_build`) is built
once, on first use, with the transformer below embedded (no parse tree is built); every syntax error it reports
becomes a :class:`SchemaError` positioned in the text. The transformer gives the syntax its meaning exactly as
torch's C++ parser does (schema_type_parser.cpp, function_schema_parser.cpp): type names, typevars, enum and
dtype defaults, number conversion with C ``strtod``/``stoll`` semantics, string escapes, device strings, Union
normalisation, the argument-order and vararg checks. Where torch would hit an internal assert, or store a value
its printer cannot write back, it raises a ``SchemaError`` instead (listed in docs/schema.md).

Invariants: no engine object (token, failure) escapes this module; the transformer keeps no per-parse state, so
the shared engine is safe to reuse and re-enter; work is linear in the input, and type nesting is bounded by
``MAX_TYPE_DEPTH`` before anything recursive can see it.
"""

from __future__ import annotations

import dataclasses
import threading
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from .._lalr.engine import Engine, Failure, Token
from .._lalr.tables import load
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
)

__all__ = ["parse", "ParseResult"]


class _Fail(Exception):
    """A meaning error found by the transformer: converted to SchemaError (with the text) by ``parse``."""

    def __init__(self, msg: str, pos: int, expected: Sequence[str] = ()) -> None:
        super().__init__(msg)
        self.msg = msg
        self.pos = pos
        self.expected = tuple(expected)


# ---------------------------------------------------------------------------------------------------------------
# Tables (torch 2.13: schema_type_parser.cpp type_map, c10::getStringToDtypeMap, parseSingleConstant)

# spelling -> canonical (printed) name
_BASE_TYPES = {
    "int": "int",
    "SymInt": "SymInt",
    "float": "float",
    "complex": "complex",
    "bool": "bool",
    "str": "str",
    "Scalar": "Scalar",
    "ScalarType": "ScalarType",
    "Layout": "Layout",
    "MemoryFormat": "MemoryFormat",
    "Device": "Device",
    "DeviceIndex": "int",
    "ConstQuantizerPtr": "int",
    "Generator": "Generator",
    "Quantizer": "Quantizer",
    "Storage": "Storage",
    "Stream": "Stream",
    "QScheme": "QScheme",
    "Capsule": "Capsule",
    "Any": "Any",
    "AnyClassType": "AnyClassType",
    "AnyEnumType": "AnyEnumType",
    "SymBool": "SymBool",
    "None": "NoneType",
    "NoneType": "NoneType",
}

# The default-value parser is chosen by the "fake" type: ScalarType, Layout and MemoryFormat defaults are ints.
_SCALAR_KINDS = {
    "int": "int",
    "SymInt": "int",
    "ScalarType": "int",
    "Layout": "int",
    "MemoryFormat": "int",
    "float": "float",
    "complex": "complex",
    "bool": "bool",
    "str": "str",
    "Scalar": "number",
    "Device": "device",
    "Tensor": "tensor",
    "Generator": "tensor",
    "Quantizer": "tensor",
}

# Identifiers accepted as a default for any type, and their codes.
_ENUM_DEFAULTS = {"float": 6, "complex": 9, "long": 4, "strided": 0, "Mean": 1, "contiguous_format": 0}

# Identifiers accepted as a ScalarType / ScalarType? default (c10::getStringToDtypeMap), and their codes.
_DTYPES = {
    "uint8": 0, "int8": 1, "int16": 2, "short": 2, "int32": 3, "int": 3, "int64": 4, "long": 4,
    "float16": 5, "half": 5, "float32": 6, "float": 6, "float64": 7, "double": 7,
    "complex32": 8, "chalf": 8, "complex64": 9, "cfloat": 9, "complex128": 10, "cdouble": 10,
    "bool": 11, "qint8": 12, "quint8": 13, "qint32": 14, "bfloat16": 15, "quint4x2": 16, "quint2x4": 17,
    "bits1x8": 18, "bits2x4": 19, "bits4x2": 20, "bits8": 21, "bits16": 22,
    "float8_e5m2": 23, "float8_e4m3fn": 24, "float8_e5m2fnuz": 25, "float8_e4m3fnuz": 26,
    "uint16": 27, "uint32": 28, "uint64": 29,
    "uint1": 30, "uint2": 31, "uint3": 32, "uint4": 33, "uint5": 34, "uint6": 35, "uint7": 36,
    "int1": 37, "int2": 38, "int3": 39, "int4": 40, "int5": 41, "int6": 42, "int7": 43,
    "float8_e8m0fnu": 44, "float4_e2m1fn_x2": 45,
}  # fmt: skip

# c10::Device accepts these type names (privateuseone may be renamed at run time; not modelled).
_DEVICE_TYPES = frozenset(
    [
        "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
        "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone"
    ]
)

# Order of members in a normalised Union: torch sorts them by c10::TypeKind, then (for equal kinds) by text.
_KIND_ORDER = {
    name: i
    for i, name in enumerate(
        [
            "Any", "AnyEnumType", "Tensor", "Storage", "Tuple", "List", "Dict", "Scalar", "float", "complex",
            "Future", "Await", "RRef", "int", "NoneType", "str", "Generator", "Quantizer", "bool", "Optional",
            "TypeVar", "Device", "Stream", "Class", "Capsule", "QScheme", "ScalarType", "Layout", "MemoryFormat",
            "AnyClassType", "SymInt", "SymBool", "Union"
        ]
    )
}

# DictType::create accepts only these key types ("Cannot create dict for key type ...").
_DICT_KEYS = frozenset(
    {"int", "SymInt", "float", "complex", "bool", "str", "Tensor", "Device", "Any", "ScalarType", "Layout", "MemoryFormat"}
)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_MAX_REPEAT = 4096  # int[N] x=v repeats v N times; a larger N would let a short text allocate without bound


# ---------------------------------------------------------------------------------------------------------------
# Numbers: C strtod / std::stoll semantics on token text


def _quoted(value: str) -> str:
    """A token as quoted in a message: on one line (control characters escaped) and not too long."""
    value = _short(value)
    return f"'{value}'" if value.isprintable() else repr(value)


def _short(text: str) -> str:
    """A literal as quoted in a message: long ones are cut in the middle."""
    return text if len(text) <= 40 else text[:18] + "..." + text[-18:]


def _digits_end(text: str, i: int, hexadecimal: bool = False) -> int:
    n = len(text)
    while i < n and (("0" <= text[i] <= "9") or (hexadecimal and text[i] in "abcdefABCDEF")):
        i += 1
    return i


def _stoll(text: str, pos: int) -> int:
    """std::stoll(text): optional '-', then decimal digits up to the first other character."""
    i = 1 if text[:1] == "-" else 0
    j = _digits_end(text, i)
    if j == i:
        raise _Fail(f"invalid integer '{_short(text)}' (torch reads it with std::stoll)", pos)
    k = i
    while k < j - 1 and text[k] == "0":  # leading zeros do not count against the 64-bit range
        k += 1
    if j - k > 19:  # also keeps int() below Python's limit on digits converted at once
        raise _Fail(f"integer '{_short(text)}' out of the 64-bit range", pos)
    value = int(text[k:j])
    if text[:1] == "-":
        value = -value
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Fail(f"integer '{_short(text)}' out of the 64-bit range", pos)
    return value


def _stod(text: str, pos: int) -> float:
    """std::stod(text): C strtod on the longest numeric prefix of ``text``. No prefix, overflow, or an
    underflow (a tiny result that is not exact -- glibc's ERANGE) is an error, as in torch."""
    n = len(text)
    i = 1 if text[:1] == "-" else 0
    hexadecimal = text[i : i + 2] in ("0x", "0X")
    j = i + 2 if hexadecimal else i
    int_end = _digits_end(text, j, hexadecimal)
    frac_start = frac_end = int_end
    if int_end < n and text[int_end] == ".":
        frac_start = int_end + 1
        frac_end = _digits_end(text, frac_start, hexadecimal)
    if int_end == j and frac_end == frac_start:
        if hexadecimal:  # "0x" without hex digits: strtod reads the "0" alone
            hexadecimal, int_end, frac_start, frac_end = False, i + 1, i + 1, i + 1
        else:
            raise _Fail(f"invalid number '{_short(text)}' (torch reads it with std::stod)", pos)
    mantissa_end = end = frac_end  # "1." keeps its point; without a point frac_end == int_end
    exp_digits = ""
    if end < n and text[end] in (("p", "P") if hexadecimal else ("e", "E")):
        k = end + 1
        if k < n and text[k] in "+-":
            k += 1
        exp_end = _digits_end(text, k)
        if exp_end > k:
            exp_digits = text[k:exp_end].lstrip("0")
            end = exp_end
    prefix = text[:end]
    digits = text[j:int_end] + text[frac_start:frac_end]
    if not digits.strip("0"):
        return -0.0 if i else 0.0
    exp_negative = "-" in text[mantissa_end:end]
    if len(exp_digits) > 7:  # an exponent this large overflows or underflows whatever the digits
        value = 0.0 if exp_negative else float("inf")
    else:
        try:
            value = float.fromhex(prefix) if hexadecimal else float(prefix)
        except OverflowError:  # fromhex raises where strtod returns HUGE_VAL
            value = float("inf")
    if value in (float("inf"), -float("inf")):
        raise _Fail(f"number '{_short(text)}' is out of the double range", pos)
    if abs(value) < 2.2250738585072014e-308 and not _exact(prefix, value, hexadecimal):
        raise _Fail(f"number '{_short(text)}' is too small for a double (underflow)", pos)
    return value


def _exact(prefix: str, value: float, hexadecimal: bool) -> bool:
    """Whether the (tiny) double ``value`` is exactly the number written as ``prefix``."""
    if value == 0.0:
        return False  # the digits are not all zero (checked by the caller)
    if not hexadecimal:
        return Decimal(prefix) == Decimal(value)
    # A subnormal is exact iff its hexadecimal significand reproduces the written one; compare as fractions
    # with power-of-two denominators (int(..., 16) has no digit limit).
    from fractions import Fraction

    body = prefix.lstrip("-")[2:]
    p_at = max(body.find("p"), body.find("P"))
    exponent = int(body[p_at + 1 :]) if p_at >= 0 else 0
    mantissa = body[:p_at] if p_at >= 0 else body
    point = mantissa.find(".")
    int_part, frac_part = (mantissa, "") if point < 0 else (mantissa[:point], mantissa[point + 1 :])
    written = Fraction(int(int_part + frac_part or "0", 16)) * Fraction(2) ** (exponent - 4 * len(frac_part))
    return written == abs(Fraction(value))


def _number_value(minus: Token | None, number: Token, kind: str) -> DefaultValue:
    """parseSingleConstant's number branch: the kind and the characters of the literal pick the value type."""
    text = ("-" if minus is not None else "") + number.value
    start = minus.start_pos if minus is not None else number.start_pos
    span = (start, number.end_pos)
    if kind == "complex" or "j" in text:
        # torch drops the last character (the 'j'), whatever it is, and reads the rest as the imaginary part.
        return ComplexValue(_stod(text[:-1], start), text=text, span=span)
    if kind == "float" or "." in text or "e" in text:
        return FloatValue(_stod(text, start), text=text, span=span)
    return IntValue(_stoll(text, start), text=text, span=span)


# ---------------------------------------------------------------------------------------------------------------
# String literals (torch parse_string_literal.h)

_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "v": "\v", "t": "\t", "\n": "\n"}


def _string_value(token: Token) -> str:
    raw = token.value
    quote = 3 if raw[:3] in ("'''", '"""') and len(raw) >= 6 else 1
    body = raw[quote:-quote]
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]  # the lexer guarantees a character after every backslash
        pos = token.start_pos + quote + i
        simple = _SIMPLE_ESCAPES.get(nxt)
        if simple is not None:
            out += simple.encode()
            i += 2
        elif nxt == "x":
            raise _Fail("unsupported escape '\\x' in string (torch has no hex escapes)", pos)
        elif nxt in "uU":
            raise _Fail(f"unsupported escape '\\{nxt}' in string (torch has no unicode escapes)", pos)
        else:
            octal = body[i + 1 : i + 4]
            if len(octal) == 3 and all("0" <= c <= "7" for c in octal) and int(octal, 8) < 256:
                out.append(int(octal, 8))
                i += 4
            else:
                raise _Fail(
                    f"ill-formed escape {_quoted(chr(92) + nxt)} in string (expected \\\\, \\', \\\", \\a, \\b, \\f, \\n, \\t, \\v"
                    " or three octal digits below \\400)",
                    pos,
                )
    return out.decode("utf-8", "surrogateescape")


def _device_value(token: Token) -> DeviceValue:
    """c10::Device(string): ``type`` or ``type:index`` with a known type and a canonical decimal index."""
    text = _string_value(token)
    span = (token.start_pos, token.end_pos)
    colon = text.find(":")
    dtype, index_text = (text, None) if colon < 0 else (text[:colon], text[colon + 1 :])
    if dtype not in _DEVICE_TYPES:
        raise _Fail(
            f"invalid device {_quoted(text)}: expected one of {', '.join(sorted(_DEVICE_TYPES))}, optionally with ':<index>'",
            token.start_pos,
        )
    index = None
    if index_text is not None:
        if (
            not index_text
            or not all("0" <= c <= "9" for c in index_text)
            or (len(index_text) > 1 and index_text[0] == "0")
        ):
            raise _Fail(f"invalid device {_quoted(text)}: the index must be a decimal number", token.start_pos)
        # torch reads the index as an int (beyond that it gives up, as we do) and then stores it in an int8:
        # 128 and more wrap and print as text it cannot read back, so we stop at 127.
        # (The length test comes first: int() refuses strings of more than 4,300 digits.)
        if len(index_text) > 10 or int(index_text) > 2**31 - 1:
            raise _Fail(f"invalid device {_quoted(text)}: the index is too large", token.start_pos)
        if int(index_text) > 127:
            raise _Fail(f"invalid device {_quoted(text)}: the index must be at most 127", token.start_pos)
        index = int(index_text)
    return DeviceValue(dtype, index, text=token.value, span=span)


# ---------------------------------------------------------------------------------------------------------------
# Defaults by type (parseDefaultValue)

# Raw default forms handed from the grammar rules to `argument`: (form, payload, start, end)
_Raw = tuple[str, Any, int, int]


def _scalar_kind(t: Type) -> str | None:
    if isinstance(t, BaseType):
        return _SCALAR_KINDS.get(t.name)
    return None


def _single_constant(raw: _Raw, kind: str, dtype_ok: bool) -> DefaultValue:
    form, payload, start, end = raw
    span = (start, end)
    if form == "number":
        return _number_value(payload[0], payload[1], kind)
    if form == "true":
        return BoolValue(True, text="True", span=span)
    if form == "false":
        return BoolValue(False, text="False", span=span)
    if form == "none":
        return NoneValue(text="None", span=span)
    if form == "string":
        return StrValue(_string_value(payload), text=payload.value, span=span)
    if form == "ident":
        name = payload.value
        code = _ENUM_DEFAULTS.get(name)
        if code is None and dtype_ok:
            code = _DTYPES.get(name)
        if code is None:
            what = "a dtype name, " if dtype_ok else ""
            raise _Fail(
                f"invalid default value '{name}': expected a number, a string, True, False, None, {what}"
                "or one of float, complex, long, strided, Mean, contiguous_format",
                start,
            )
        return IntValue(code, text=name, span=span)
    raise _Fail("expected a single value, got a list", start)  # form == "list"


def _default_for(t: Type, raw: _Raw) -> DefaultValue:
    form, payload, start, end = raw
    if isinstance(t, OptionalType):
        if form == "list":
            raise _Fail(f"a default for optional type '{t}' must be a single value or None, got a list", start)
        dtype_ok = isinstance(t.elem, BaseType) and t.elem.name == "ScalarType"
        return _single_constant(raw, "", dtype_ok)
    if isinstance(t, ListType):
        return _list_default(t, raw)
    kind = _scalar_kind(t)
    if kind is None:
        raise _Fail(f"type '{t.without_aliases()}' cannot have a default value", start)
    if kind == "tensor":
        if form != "none":
            raise _Fail(f"the default of a '{t.without_aliases()}' argument can only be None", start)
        return NoneValue(text="None", span=(start, end))
    if kind == "device":
        if form != "string":
            raise _Fail("the default of a 'Device' argument must be a string such as \"cpu\"", start)
        return _device_value(payload)
    if form == "list":
        raise _Fail(f"type '{t.without_aliases()}' takes a single default value, got a list", start)
    return _single_constant(raw, kind, isinstance(t, BaseType) and t.name == "ScalarType")


_LIST_ITEM_CLASS = {"int": IntValue, "float": FloatValue, "bool": BoolValue, "complex": ComplexValue}


def _list_default(t: ListType, raw: _Raw) -> ListValue:
    form, payload, start, end = raw
    kind = _scalar_kind(t.elem)
    item_class = _LIST_ITEM_CLASS.get(kind or "")
    if item_class is None:
        raise _Fail(
            f"type '{t.without_aliases()}' cannot have a default value (only lists of int, float, bool or "
            "complex can)",
            start,
        )
    dtype_ok = isinstance(t.elem, BaseType) and t.elem.name == "ScalarType"
    if form == "list":
        items = tuple(_single_constant(item, kind or "", dtype_ok) for item in payload)
    elif t.size is None:
        raise _Fail(f"expected '[' for the default of '{t.without_aliases()}' (a single value needs a size, "
                    "as in int[2] x=1)", start)
    else:
        if form == "ident":
            # torch reads an identifier here as a Tensor default and wants None (parseTensorDefault)
            raise _Fail(f"expected '[' or a single value for the default of '{t.without_aliases()}', got "
                        f"identifier '{payload.value}'", start)
        if t.size > _MAX_REPEAT:
            raise _Fail(f"the default repeats a value {t.size} times; at most {_MAX_REPEAT} are supported", start)
        item = _single_constant(raw, kind or "", dtype_ok)
        items = (item,) * t.size
    for item in items:
        if item.__class__ is not item_class:
            # torch hits an internal assert (ivalue.h) on such lists; report it as a schema error.
            raise _Fail(
                f"list default for '{t.without_aliases()}' has an element {_quoted(item.text)} that is not {kind}",
                item.span[0],
            )
    return ListValue(items, text=_raw_text(raw), span=(start, end))


def _raw_text(raw: _Raw) -> str:
    form, payload, _, _ = raw
    if form == "list":
        return "[" + ", ".join(_raw_text(item) for item in payload) + "]"
    if form == "number":
        digits: str = payload[1].value  # payload: (the MINUS token or None, the NUMBER token)
        return ("-" if payload[0] is not None else "") + digits
    return payload.value if isinstance(payload, Token) else str(payload)


# ---------------------------------------------------------------------------------------------------------------
# Types


# torch builds containers (tuples, Dict, Union, Future, Await, RRef) from the "fake" types of their members:
# SymInt, ScalarType, Layout and MemoryFormat become int there (Future(SymInt) prints as Future(int)), and the
# members' alias annotations are dropped.
_FAKE_INT = frozenset({"SymInt", "ScalarType", "Layout", "MemoryFormat"})


def _member(t: Type) -> Type:
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
        elem = UnionType(tuple(m for m in elem.members if m != _NONE), elem.alias, elem.absorbed)
    if isinstance(elem, UnionType) and elem.members == (_SCALAR,):
        # torch: the optional of a Union of exactly int, float and complex is Scalar? (OptionalType's constructor)
        return OptionalType(_SCALAR, elem.absorbed)
    if isinstance(elem, BaseType) and elem.name == "NoneType":
        # torch: INTERNAL ASSERT in union_type.cpp (an optional None unifies to a one-type Union)
        raise _Fail("'NoneType?' is not a type (None is already optional)", pos)
    _check_depth(elem._depth + 1, pos)
    return OptionalType(elem, elem.absorbed if isinstance(elem, UnionType) else ())


def _check_depth(depth: int, pos: int) -> None:
    if depth > MAX_TYPE_DEPTH:
        raise _Fail(f"type nested deeper than {MAX_TYPE_DEPTH} levels", pos)


def _kind_name(t: Type) -> str:
    if isinstance(t, BaseType):
        return t.name
    return {
        TypeVar: "TypeVar", ClassType: "Class", OptionalType: "Optional", ListType: "List", TupleType: "Tuple",
        DictType: "Dict", UnionType: "Union", FutureType: "Future", AwaitType: "Await", RRefType: "RRef",
    }[t.__class__]  # fmt: skip


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
_UNION_AS_INT = frozenset({"SymInt", "ScalarType", "Layout", "MemoryFormat"})
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
# List(b), Dict(str, a) equals Dict(str, b). Lists, dicts and RRefs unify only when equal, so they are compared
# with their type variables erased to one.
_ERASED = TypeVar("t")
_INVARIANT = (ListType, DictType, RRefType)


def _erase(t: Type) -> Type:
    """``t`` with every type variable replaced by one and the same."""
    if t.__class__ is TypeVar:
        return _ERASED
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
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        if len(a.elems) != len(b.elems):
            return None
        elems = []
        for x, y in zip(a.elems, b.elems, strict=True):
            u = _unify(x, y, pos)
            if u is None:
                return None
            elems.append(u)
        return TupleType(tuple(elems))
    if isinstance(a, FutureType) and isinstance(b, FutureType):
        elem = _unify(a.elem, b.elem, pos)
        return None if elem is None else FutureType(elem)
    return None


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
        elif isinstance(m, BaseType) and m.name in _UNION_AS_INT:
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
        raise _Fail(f"Union needs two or more different types; these all unify to '{only}'", pos)
    if has_none:
        flat.append(_NONE)
    flat.sort(key=lambda t: (_KIND_ORDER[_kind_name(t)], str(t)))
    return UnionType(tuple(flat), None, absorbed)


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
            return UnionType(t.members, new, t.absorbed)
    return t



_FRESH = AliasInfo(("$",), (), True)
# Types are immutable: one instance of each builtin type without annotation serves every schema.
_PLAIN_BASE = {name: BaseType(name) for name in set(_BASE_TYPES.values()) | {"Tensor"}}
_NONE = BaseType("NoneType")  # placeholder for "!", numbered per schema by _renumber

# ---------------------------------------------------------------------------------------------------------------
# The transformer. Callbacks are named after the grammar's rules and aliases and run inside the LALR parser.
# Types travel as (type, start, end) triples and alias annotations as (AliasInfo, end) pairs, so that
# arguments and returns get their source spans without lark's position propagation.


def _alias_end(c: Sequence[Any], index: int, default_end: int) -> tuple[AliasInfo | None, int]:
    if len(c) > index and isinstance(c[index], tuple):
        return c[index][0], c[index][1]
    return None, default_end


# What the callbacks pass between them (the grammar fixes which one each child is): a type with its source span,
# a parameter list, a return list, a parsed argument.
_Spanned = tuple[Type, int, int]
_Params = tuple[tuple[Argument, ...], bool]  # (arguments, has '...')
_Returns = tuple[tuple[Return, ...], bool]  # (returns, has '...')
_Arg = tuple[str, Type, Token, DefaultValue | None, int, int]  # ("arg", type, name token, default, start, end)
# A rule's children: tokens and the values of its sub-rules, of the kinds the grammar puts there.
_Kids = list[Any]


class _ToAst:
    # --- schema ---------------------------------------------------------------------------------------------
    def start(self, c: _Kids) -> ParseResult:
        result: ParseResult = c[0]
        return result

    def bare_name(self, c: _Kids) -> ParseResult:
        return ParseResult("name", c[0][0], c[0][1])

    def named_schema(self, c: _Kids) -> ParseResult:
        (name, name_pos), (returns, varret) = c[0], c[-1]
        return ParseResult("schema", _schema(name, _params_of(c[2]), returns, varret), name_pos)

    def nameless_schema(self, c: _Kids) -> ParseResult:
        returns, varret = c[-1]
        return ParseResult("nameless", _schema(OperatorName("", ""), _params_of(c[1]), returns, varret), 0)

    def wrapped_schema(self, c: _Kids) -> ParseResult:
        returns, varret = c[-2]
        return ParseResult("wrapped", _schema(OperatorName("", ""), _params_of(c[2]), returns, varret), 0)

    def operator_name(self, c: _Kids) -> tuple[OperatorName, int]:
        # name | name . overload | ns : : name | ns : : name . overload  (tokens, as the grammar gives them)
        has_ns = len(c) >= 4
        namespace = c[0].value if has_ns else ""
        name = c[3 if has_ns else 0].value
        overload = ""
        if len(c) in (3, 6):
            tok = c[-1]
            overload = tok.value
            if overload == "default":
                raise _Fail("the overload name 'default' is reserved", tok.start_pos)
            if overload[:2] == "__":
                raise _Fail(f"an overload name cannot start with '__' (got '{overload}')", tok.start_pos)
        return OperatorName(namespace, name, overload), c[0].start_pos

    def name(self, c: _Kids) -> Token:
        tok: Token = c[0]
        return tok

    # --- parameters -----------------------------------------------------------------------------------------
    def params(self, c: _Kids) -> _Params:
        arguments: list[Argument] = []
        kwarg_only = vararg = seen_default = False
        for item in c:
            if item.__class__ is Token:  # COMMA
                continue
            tag = item[0]
            if vararg:
                raise _Fail("'...' must be the last parameter", item[1] if tag != "arg" else item[4])
            if tag != "arg":
                if tag == "*":
                    kwarg_only = True
                else:  # "..."
                    vararg = True
                continue
            _, type_, name_tok, default, start, end = item
            if default is not None:
                seen_default = True
            elif seen_default and not kwarg_only and not isinstance(type_, ListType):
                # torch: INTERNAL ASSERT "Non-default positional argument follows default argument"
                raise _Fail(
                    f"argument '{name_tok.value}' has no default but follows an argument with one "
                    "(move it before them, or after '*')",
                    start,
                )
            arguments.append(Argument(name_tok.value, type_, default, kwarg_only, (start, end)))
        if vararg:
            for argument in arguments:
                if argument.default is not None:
                    raise _Fail("a schema with '...' cannot have default values", argument.default.span[0])
        return tuple(arguments), vararg

    def kwarg_marker(self, c: _Kids) -> tuple[str, int]:
        return ("*", c[0].start_pos)

    def vararg_marker(self, c: _Kids) -> tuple[str, int]:
        return ("...", c[0].start_pos)

    def argument(self, c: _Kids) -> _Arg:
        (type_, start, end), name_tok = c[0], c[1]
        default = None
        end = name_tok.end_pos
        if len(c) > 2:
            raw = c[3]
            default = _default_for(type_, raw)
            end = raw[3]
        return ("arg", type_, name_tok, default, start, end)

    def arg_type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    def sized_arg_type(self, c: _Kids) -> _Spanned:
        (elem, start, _), number, rsqb = c[0], c[2], c[3]
        alias, end = _alias_end(c, 4, rsqb.end_pos)
        optional = isinstance(c[-1], Token) and c[-1].type == "QMARK"
        if optional:
            end = c[-1].end_pos
        size = _stoll(number.value, number.start_pos)
        # torch keeps N in an int32: larger values wrap around (kept, as torch does) -- unless they wrap to a
        # negative size, which torch prints as text it cannot read back.
        size = (size + 2**31) % 2**32 - 2**31
        if size < 0:
            raise _Fail(f"list size {_short(number.value)} does not fit a 32-bit int", number.start_pos)
        _check_depth(elem._depth + 1 + optional, start)
        t: Type = ListType(elem, size, alias, number.value, (number.start_pos, number.end_pos))
        return (OptionalType(t) if optional else t), start, end

    # --- returns --------------------------------------------------------------------------------------------
    def varret(self, c: _Kids) -> _Returns:
        return (), True

    def no_returns(self, c: _Kids) -> _Returns:
        return (), False

    def return_list(self, c: _Kids) -> _Returns:
        returns: _Returns = c[1]
        return returns

    def single_return(self, c: _Kids) -> _Returns:
        return (c[0],), False

    def return_items(self, c: _Kids) -> _Returns:
        returns: list[Return] = []
        varret = False
        for item in c:
            if isinstance(item, Token):
                continue
            if varret:
                raise _Fail("'...' must be the last return", item.span[0] if isinstance(item, Return) else item[1])
            if isinstance(item, Return):
                returns.append(item)
            else:
                varret = True
        return tuple(returns), varret

    def varret_marker(self, c: _Kids) -> tuple[str, int]:
        return ("...", c[0].start_pos)

    def return_(self, c: _Kids) -> Return:
        type_, start, end = c[0]
        if len(c) > 1:
            return Return(type_, c[1].value, (start, c[1].end_pos))
        return Return(type_, None, (start, end))

    bare_return = return_

    def bare_arg_type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    # --- types ----------------------------------------------------------------------------------------------
    def type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    bare_type = type

    def list_type(self, c: _Kids) -> _Spanned:
        elem, start, _ = c[0]
        alias, end = _alias_end(c, 3, c[2].end_pos)
        _check_depth(elem._depth + 1, start)
        return ListType(elem, None, alias), start, end

    def optional_type(self, c: _Kids) -> _Spanned:
        elem, start, _ = c[0]
        return _optional(elem, start), start, c[1].end_pos

    def tuple_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        elems = tuple(_member(x[0]) for x in c if isinstance(x, tuple))
        _check_depth(1 + max((e._depth for e in elems), default=0), start)
        return TupleType(elems), start, c[-1].end_pos

    def tensor_type(self, c: _Kids) -> _Spanned:
        if len(c) == 1:
            return _PLAIN_BASE["Tensor"], c[0].start_pos, c[0].end_pos
        alias, end = c[1]
        return BaseType("Tensor", alias), c[0].start_pos, end

    def dict_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        key, value = _member(c[2][0]), _member(c[4][0])
        if not (isinstance(key, BaseType) and key.name in _DICT_KEYS):
            raise _Fail(
                f"a Dict key type must be one of {', '.join(sorted(_DICT_KEYS))}; got '{key}'", c[2][1]
            )
        _check_depth(1 + max(key._depth, value._depth), start)
        alias, end = _alias_end(c, 6, c[5].end_pos)
        return DictType(key, value, alias), start, end

    def union_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        members = [_member(x[0]) for x in c if isinstance(x, tuple) and len(x) == 3]
        _check_depth(1 + max(m._depth for m in members), start)
        result = _union(members, start)
        last = c[-1]
        alias, end = (last[0], last[1]) if isinstance(last, tuple) and len(last) == 2 else (None, last.end_pos)
        if alias is not None:
            if isinstance(result, UnionType):
                result = UnionType(result.members, alias, result.absorbed)
            else:  # Union(T, None) became T?: the annotation belongs to T and prints before the "?"
                result = OptionalType(_with_alias(result.elem, alias, start), result.absorbed)  # type: ignore[attr-defined]  # _union made T? of it
        return result, start, end

    def future_type(self, c: _Kids) -> _Spanned:
        return self._single(FutureType, c)

    def await_type(self, c: _Kids) -> _Spanned:
        return self._single(AwaitType, c)

    def rref_type(self, c: _Kids) -> _Spanned:
        return self._single(RRefType, c)

    @staticmethod
    def _single(cls: Callable[[Type], Type], c: _Kids) -> _Spanned:
        start = c[0].start_pos
        elem = _member(c[2][0])
        _check_depth(elem._depth + 1, start)
        return cls(elem), start, c[3].end_pos

    def class_type(self, c: _Kids) -> _Spanned:
        torch_tok, classes_tok = c[2], c[4]
        for tok, word in ((torch_tok, "torch"), (classes_tok, "classes")):
            if tok.value != word:
                raise _Fail(
                    f"expected '{word}' in a custom class type __torch__.torch.classes.<namespace>.<name>, "
                    f"got '{tok.value}'",
                    tok.start_pos,
                )
        start, end = c[0].start_pos, c[8].end_pos
        return ClassType(c[6].value, c[8].value, (start, end)), start, end

    def named_type(self, c: _Kids) -> _Spanned:
        parts = c[0]
        first, last = parts[0], parts[-1]
        alias, end = _alias_end(c, 1, last.end_pos)
        text = first.value if len(parts) == 1 else "".join(p.value for p in parts)
        canonical = _BASE_TYPES.get(text)
        if canonical is not None:
            return (_PLAIN_BASE[canonical] if alias is None else BaseType(canonical, alias)), first.start_pos, end
        if first.value[0].islower():
            return TypeVar(text, alias, (first.start_pos, last.end_pos)), first.start_pos, end
        raise _Fail(
            f"unknown type '{text}' (a type variable must start with a lower-case letter)", first.start_pos
        )

    def base_name(self, c: _Kids) -> list[Token]:
        return c

    # --- alias annotations ----------------------------------------------------------------------------------
    def alias(self, c: _Kids) -> tuple[AliasInfo, int]:
        sets = [x for x in c if isinstance(x, list)]
        before = tuple(sets[0])
        after = tuple(sets[1]) if len(sets) > 1 else before
        is_write = any(isinstance(x, Token) and x.type == "BANG" for x in c)
        return AliasInfo(before, after, is_write), c[-1].end_pos

    def fresh_alias(self, c: _Kids) -> tuple[AliasInfo, int]:
        return _FRESH, c[0].end_pos

    def alias_set(self, c: _Kids) -> list[str]:
        # dict.fromkeys: the names in written order without duplicates, in linear time
        return list(dict.fromkeys(tok.value for tok in c if tok.type != "BAR"))

    # --- defaults -------------------------------------------------------------------------------------------
    def list_default(self, c: _Kids) -> _Raw:
        items = [x for x in c if isinstance(x, tuple)]
        return ("list", items, c[0].start_pos, c[-1].end_pos)

    def true_const(self, c: _Kids) -> _Raw:
        return ("true", c[0], c[0].start_pos, c[0].end_pos)

    def false_const(self, c: _Kids) -> _Raw:
        return ("false", c[0], c[0].start_pos, c[0].end_pos)

    def none_const(self, c: _Kids) -> _Raw:
        return ("none", c[0], c[0].start_pos, c[0].end_pos)

    def string_const(self, c: _Kids) -> _Raw:
        return ("string", c[0], c[0].start_pos, c[0].end_pos)

    def ident_const(self, c: _Kids) -> _Raw:
        return ("ident", c[0], c[0].start_pos, c[0].end_pos)

    def number_const(self, c: _Kids) -> _Raw:
        minus = c[0] if len(c) == 2 else None
        return ("number", (minus, c[-1]), c[0].start_pos, c[-1].end_pos)


def _schema(name: OperatorName, params: _Params, returns: tuple[Return, ...], varret: bool) -> FunctionSchema:
    arguments, vararg = params
    if _any_fresh(arguments) or _any_fresh(returns):
        counter = [0]
        arguments = tuple(
            Argument(a.name, _renumber(a.type, counter), a.default, a.kwarg_only, a.span) for a in arguments
        )
        returns = tuple(Return(_renumber(r.type, counter), r.name, r.span) for r in returns)
    return FunctionSchema(name, arguments, tuple(returns), vararg, varret)


def _params_of(child: _Params | Token) -> _Params:
    # `params?` is absent for "()": the child in its place is then the RPAR token.
    return child if isinstance(child, tuple) else ((), False)


def _with_alias(t: Type, alias: AliasInfo, pos: int) -> Type:
    if isinstance(t, BaseType):
        return BaseType(t.name, alias)
    if isinstance(t, TypeVar):
        return TypeVar(t.name, alias, t.span)
    if isinstance(t, DictType):
        return DictType(t.key, t.value, alias)
    if isinstance(t, ListType):
        return ListType(t.elem, t.size, alias, t.size_text, t.size_span)
    if isinstance(t, UnionType):
        return UnionType(t.members, alias, t.absorbed)
    raise _Fail(f"type '{t}' cannot carry an alias annotation", pos)


class ParseResult:
    """What the grammar recognised: ``kind`` is "schema", "name" (a bare operator name), "nameless" or
    "wrapped"; ``value`` a FunctionSchema or an OperatorName; ``pos`` where the name starts."""

    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind: str, value: FunctionSchema | OperatorName, pos: int) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos


# ---------------------------------------------------------------------------------------------------------------
# Newlines


class _Newlines:
    """Postlexer: torch ignores newlines inside brackets and around the declaration; a newline anywhere else
    reaches the parser (which has no rule for it) and is reported there."""

    always_accept = ("NEWLINE",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        started = False
        pending = None
        for tok in stream:
            kind = tok.type
            if kind == "NEWLINE":
                if depth == 0 and started and pending is None:
                    pending = tok
                continue
            if pending is not None:
                yield pending
                pending = None
            started = True
            if kind == "LPAR" or kind == "LSQB":
                depth += 1
            elif (kind == "RPAR" or kind == "RSQB") and depth:
                depth -= 1
            yield tok


# ---------------------------------------------------------------------------------------------------------------
# Parsers (built once, lazily) and error translation

_lock = threading.Lock()
_engines: dict[bool, Engine] = {}


def _engine(multiline: bool) -> Engine:
    """The engine for one-line or multi-line text (the latter drops the newlines torch ignores)."""
    engine = _engines.get(multiline)
    if engine is None:
        with _lock:
            engine = _engines.get(multiline)
            if engine is None:
                engine = Engine(load("schema"), _ToAst(), _Newlines() if multiline else None)
                _engines[multiline] = engine
    return engine


def parse(text: str) -> ParseResult:
    """Parse ``text`` with the schema grammar. Raises SchemaError (only) on malformed input."""
    engine = _engine("\n" in text)
    try:
        result: ParseResult = engine.parse(text)  # the start rule's value (_ToAst.start)
        return result
    except _Fail as e:
        raise SchemaError(e.msg, text, e.pos, e.expected) from None
    except Failure as e:
        raise _translate(e, engine, text) from None


_DESCRIBE = {
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "COLON": "':'", "DOT": "'.'",
    "DOTS": "'...'", "ARROW": "'->'", "EQUAL": "'='", "STAR": "'*'", "QMARK": "'?'", "BANG": "'!'", "BAR": "'|'",
    "MINUS": "'-'", "NONE": "'None'", "NONETYPE": "'NoneType'", "TRUE": "'True'", "FALSE": "'False'",
    "NUMBER": "a number", "STRING": "a string", "NEWLINE": "a newline", "$END": "end of input",
}  # fmt: skip
_NAME_TERMINALS = frozenset({"IDENT", "TENSOR", "DICT", "UNION", "FUTURE", "AWAIT", "RREF", "TORCH_NS"})
_ORDER = ["a type", "a name", *_DESCRIBE.values()]


def _expected_text(expected: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    names = set(expected)
    shown = set()
    if "NONETYPE" in names:  # only where a type may start
        shown.add("a type")
        names -= _NAME_TERMINALS | {"NONE", "NONETYPE"}
    elif names & _NAME_TERMINALS:
        shown.add("a name")
        names -= _NAME_TERMINALS
    shown.update(_DESCRIBE.get(n, n) for n in names)
    ordered = sorted(shown, key=lambda s: (_ORDER.index(s) if s in _ORDER else len(_ORDER), s))
    if not ordered:
        return "nothing", ()
    if len(ordered) == 1:
        return ordered[0], tuple(ordered)
    return ", ".join(ordered[:-1]) + " or " + ordered[-1], tuple(ordered)


def _context(stack: list[Any] | None) -> str:
    """Where the parser stood, from the top of its value stack: " after 'x'", " after a type", ..."""
    if stack is None:
        return ""
    if not stack:
        return " at the start"
    top = stack[-1]
    if isinstance(top, Token):
        return f" after {_quoted(top.value)}" if top.type != "NEWLINE" else " after a newline"
    if isinstance(top, tuple) and top:
        head = top[0]
        if isinstance(head, Type):
            return " after a type"
        if isinstance(head, AliasInfo):
            return " after an alias annotation"
        if isinstance(head, OperatorName):
            return " after the operator name"
        if head == "arg":
            return f" after argument {_quoted(top[2].value)}"
    if isinstance(top, Return):
        return " after a return"
    if isinstance(top, list):
        return " in an alias set"
    return ""


def _translate(e: Failure, engine: Engine, text: str) -> SchemaError:
    # LALR merges states, so a state's table can list tokens that would fail after a reduction: ask the engine
    # which tokens it would really shift there.
    allowed = sorted(engine.accepts(e.states))
    wanted, expected = _expected_text(allowed)
    context = _context(e.values)
    tok = e.token
    if tok is not None:
        if tok.type == "$END":
            pos, got = len(text), "end of input"
        else:
            pos = tok.start_pos
            got = "a newline" if tok.type == "NEWLINE" else _quoted(tok.value)
        return SchemaError(f"expected {wanted}{context}, got {got}", text, pos, expected)
    pos = e.pos
    ch = text[pos]
    if ch.isascii() and (ch.isalpha() or ch == "_"):
        end = pos
        while end < len(text) and text[end].isascii() and (text[end].isalnum() or text[end] == "_"):
            end += 1
        word = text[pos:end]
        got = f"reserved word '{word}'" if "IDENT" in allowed else f"'{word}'"
    elif ch == "#":
        got = "a '# type:' comment"
    elif ch in "'\"":
        got = "an unterminated string"
    elif ch == "\\":
        got = "a '\\' that does not continue the line"
    elif ch.isprintable() and not ch.isspace():
        got = f"'{ch}'"
    else:
        got = f"character {ch!r}"
    return SchemaError(f"expected {wanted}{context}, got {got}", text, pos, expected)
