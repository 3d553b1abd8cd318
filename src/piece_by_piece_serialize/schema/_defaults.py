"""A default value's meaning by the type of its argument: torch's parseDefaultValue and parseSingleConstant.

The grammar hands each default over raw, as a ``_Raw`` tuple ``(form, payload, start, end)``; the argument's
type picks how it is read: the "fake" type decides between int, double and complex, ``ScalarType`` defaults may
be dtype names, ``Device`` defaults are strings, tensors default to None only, and ``int[N] x=v`` repeats ``v``
N times. Invariants: every value built here is one the printer writes back to the same value (torch's internal
asserts and unprintable values are ``Refused`` instead), and a short text cannot make a long list (``_MAX_REPEAT``).
"""

from __future__ import annotations

from typing import Any

from .._diagnostics import Refused
from .._lalr.choice import Token
from ._fail import _quoted
from ._literals import _device_value, _number_value, _string_value
from ._torch_tables import _DTYPES, _ENUM_DEFAULTS, _SCALAR_KINDS
from ._types import BaseType, ListType, OptionalType, Type
from ._values import BoolValue, ComplexValue, DefaultValue, FloatValue, IntValue, ListValue, NoneValue, StrValue

_MAX_REPEAT = 4096  # int[N] x=v repeats v N times; a larger N would let a short text allocate without bound

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
            raise Refused(
                f"invalid default value '{name}': expected a number, a string, True, False, None, {what}"
                "or one of float, complex, long, strided, Mean, contiguous_format",
                start,
            )
        return IntValue(code, text=name, span=span)
    raise Refused("expected a single value, got a list", start)  # form == "list"


def _default_for(t: Type, raw: _Raw) -> DefaultValue:
    form, payload, start, end = raw
    if isinstance(t, OptionalType):
        if form == "list":
            raise Refused(f"a default for optional type '{t}' must be a single value or None, got a list", start)
        dtype_ok = isinstance(t.elem, BaseType) and t.elem.name == "ScalarType"
        return _single_constant(raw, "", dtype_ok)
    if isinstance(t, ListType):
        return _list_default(t, raw)
    kind = _scalar_kind(t)
    if kind is None:
        raise Refused(f"type '{t.without_aliases()}' cannot have a default value", start)
    if kind == "tensor":
        if form != "none":
            raise Refused(f"the default of a '{t.without_aliases()}' argument can only be None", start)
        return NoneValue(text="None", span=(start, end))
    if kind == "device":
        if form != "string":
            raise Refused("the default of a 'Device' argument must be a string such as \"cpu\"", start)
        return _device_value(payload)
    if form == "list":
        raise Refused(f"type '{t.without_aliases()}' takes a single default value, got a list", start)
    return _single_constant(raw, kind, isinstance(t, BaseType) and t.name == "ScalarType")


_LIST_ITEM_CLASS = {"int": IntValue, "float": FloatValue, "bool": BoolValue, "complex": ComplexValue}


def _list_default(t: ListType, raw: _Raw) -> ListValue:
    form, payload, start, end = raw
    kind = _scalar_kind(t.elem)
    item_class = _LIST_ITEM_CLASS.get(kind or "")
    if item_class is None:
        raise Refused(
            f"type '{t.without_aliases()}' cannot have a default value (only lists of int, float, bool or "
            "complex can)",
            start,
        )
    dtype_ok = isinstance(t.elem, BaseType) and t.elem.name == "ScalarType"
    if form == "list":
        items = tuple(_single_constant(item, kind or "", dtype_ok) for item in payload)
    elif t.size is None:
        raise Refused(f"expected '[' for the default of '{t.without_aliases()}' (a single value needs a size, "
                    "as in int[2] x=1)", start)
    else:
        if form == "ident":
            # torch reads an identifier here as a Tensor default and wants None (parseTensorDefault)
            raise Refused(f"expected '[' or a single value for the default of '{t.without_aliases()}', got "
                        f"identifier '{payload.value}'", start)
        if t.size > _MAX_REPEAT:
            raise Refused(f"the default repeats a value {t.size} times; at most {_MAX_REPEAT} are supported", start)
        item = _single_constant(raw, kind or "", dtype_ok)
        items = (item,) * t.size
    for item in items:
        if item.__class__ is not item_class:
            # torch hits an internal assert (ivalue.h) on such lists; report it as a schema error.
            raise Refused(
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
