"""The default-value nodes of the schema AST, and how torch prints doubles and strings.

Every node is a frozen, slotted dataclass; ``value`` is the Python value and ``str(node)`` the canonical text
(``format_float`` and ``quote_string`` are the two printers the rest of the package shares; their deviations
from torch are in Note [Printer deviations] in ``_ast``). Invariants: an int fits in 64 bits and a double is
finite, checked on construction; ``text`` and ``span`` (the source text and position) are ``compare=False``, so
``1.0`` and ``1.`` are equal defaults. Whatever the printer writes, the lexer reads back to the same value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ._torch_tables import _DBL_MIN, _ESCAPES, _INT64_MAX, _INT64_MIN
from ._types import Span

__all__ = [
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
    "shortest_default",
    "quote_string",
]


def format_float(value: float) -> str:
    """A double as torch prints it (ivalue.cpp): integral values as ``1.``/``-3.``, others with 17 significant
    digits (``1.0000000000000001e-05``). Deviations (Note [Printer deviations]): ``-0.0`` keeps its sign and a
    subnormal is printed in exact hexadecimal, because torch's reader rejects ``%.17g`` subnormals."""
    if value == 0.0:
        return "-0." if math.copysign(1.0, value) < 0 else "0."
    if math.isfinite(value) and abs(value) < _DBL_MIN:
        return float.hex(value)
    if math.isfinite(value) and -(2.0**63) <= value < 2.0**63 and value == int(value):
        return f"{int(value)}."
    return f"{value:.17g}"


def shortest_float(value: float) -> str:
    """The shortest spelling of a double that torch reads back to the same value: Python's shortest round-trip
    ``repr`` (``1e-05``, where torch prints ``1.0000000000000001e-05``), or :func:`format_float` where that is
    no longer (integral values, ``1.``) or where torch's reader needs it (a subnormal, in hexadecimal)."""
    printed = format_float(value)
    if printed.endswith(".") or "x" in printed:
        return printed
    short = repr(value)  # correctly rounded, the fewest digits that read back (strtod) to this very double
    return short if len(short) < len(printed) else printed


# the character -> its escape, the inverse of the table the lexer reads (a backslash-newline is read, never written)
_NAMED_ESCAPES = {char: "\\" + letter for letter, char in _ESCAPES.items()}


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
        if not _INT64_MIN <= self.value <= _INT64_MAX:
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


@dataclass(frozen=True, slots=True)
class ListValue(DefaultValue):
    """A list default ``[a, b]`` (of ints, doubles, bools or complex numbers, never mixed)."""

    items: tuple[DefaultValue, ...]

    @property
    def value(self) -> tuple[object, ...]:
        return tuple(item.value for item in self.items)

    def __str__(self) -> str:
        return "[" + ", ".join(map(str, self.items)) + "]"


class _ShortFloat(FloatValue):
    """A double printed in its shortest spelling (what ``schema format --shortest`` writes); equal to its value."""

    __slots__ = ()

    def __str__(self) -> str:
        return shortest_float(self.value)


class _ShortComplex(ComplexValue):
    __slots__ = ()

    def __str__(self) -> str:
        return shortest_float(self.imag) + "j"


def shortest_default(default: DefaultValue | None) -> DefaultValue | None:
    """The same default, its doubles (a list's too) printed in their shortest spelling."""
    if type(default) is FloatValue:
        return _ShortFloat(default.value, span=default.span)
    if type(default) is ComplexValue:
        return _ShortComplex(default.imag, span=default.span)
    if type(default) is ListValue:
        return ListValue(tuple(shortest_default(item) or item for item in default.items), span=default.span)
    return default
