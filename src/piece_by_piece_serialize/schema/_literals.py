"""Lexeme conversion for the schema language: the value of a number, string or device token, as torch reads it.

Numbers follow C ``strtod`` and ``std::stoll`` on the token text (the longest numeric prefix, hexadecimal
floats, overflow and inexact underflow refused); strings follow parse_string_literal.h (named and octal escapes,
no hex or unicode escapes, invalid UTF-8 kept as surrogate-escaped bytes); devices follow ``c10::Device(string)``.
Invariants: each converter reads one token and nothing else, returns a value node or raises ``Refused`` at a
position inside that token, and works in time linear in the token (no ``int()`` on an unbounded digit string).
"""

from __future__ import annotations

from decimal import Decimal

from .._diagnostics import Refused
from .._lalr.choice import Token
from ._fail import _quoted, _short
from ._torch_tables import _DBL_MIN, _DEVICE_TYPES, _ESCAPES, _INT64_MAX, _INT64_MIN
from ._values import ComplexValue, DefaultValue, DeviceValue, FloatValue, IntValue

# ---------------------------------------------------------------------------------------------------------------
# Numbers: C strtod / std::stoll semantics on token text


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
        raise Refused(f"invalid integer '{_short(text)}' (torch reads it with std::stoll)", pos)
    k = i
    while k < j - 1 and text[k] == "0":  # leading zeros do not count against the 64-bit range
        k += 1
    if j - k > 19:  # also keeps int() below Python's limit on digits converted at once
        raise Refused(f"integer '{_short(text)}' out of the 64-bit range", pos)
    value = int(text[k:j])
    if text[:1] == "-":
        value = -value
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise Refused(f"integer '{_short(text)}' out of the 64-bit range", pos)
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
            raise Refused(f"invalid number '{_short(text)}' (torch reads it with std::stod)", pos)
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
        raise Refused(f"number '{_short(text)}' is out of the double range", pos)
    if abs(value) < _DBL_MIN and not _exact(prefix, value, hexadecimal):
        raise Refused(f"number '{_short(text)}' is too small for a double (underflow)", pos)
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

# the table torch's lexer reads, plus a backslash before a newline, which stands for the newline
_SIMPLE_ESCAPES = {**_ESCAPES, "\n": "\n"}


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
            raise Refused("unsupported escape '\\x' in string (torch has no hex escapes)", pos)
        elif nxt in "uU":
            raise Refused(f"unsupported escape '\\{nxt}' in string (torch has no unicode escapes)", pos)
        else:
            octal = body[i + 1 : i + 4]
            if len(octal) == 3 and all("0" <= c <= "7" for c in octal) and int(octal, 8) < 256:
                out.append(int(octal, 8))
                i += 4
            else:
                raise Refused(
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
        raise Refused(
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
            raise Refused(f"invalid device {_quoted(text)}: the index must be a decimal number", token.start_pos)
        # torch reads the index as an int (beyond that it gives up, as we do) and then stores it in an int8:
        # 128 and more wrap and print as text it cannot read back, so we stop at 127.
        # (The length test comes first: int() refuses strings of more than 4,300 digits.)
        if len(index_text) > 10 or int(index_text) > 2**31 - 1:
            raise Refused(f"invalid device {_quoted(text)}: the index is too large", token.start_pos)
        if int(index_text) > 127:
            raise Refused(f"invalid device {_quoted(text)}: the index must be at most 127", token.start_pos)
        index = int(index_text)
    return DeviceValue(dtype, index, text=token.value, span=span)
