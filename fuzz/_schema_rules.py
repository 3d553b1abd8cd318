"""The differential check of our schema parser against ``torch._C.parse_schema``, with the documented
differences checked rule by rule.

Both schema harnesses (text and structure-aware) call :func:`compare`. For one text it requires:

* accept/reject agreement with torch, except the documented differences in acceptance (``ACCEPT_RULES``),
  each recognised by a predicate on our result and on torch's message, never by ignoring the mismatch;
* on text both accept: the argument names agree with torch's, and our printed text equals torch's
  ``str()`` unless a documented printer deviation applies (``PRINT_RULES``, Note [Printer deviations] in
  ``src/piece_by_piece_serialize/schema/_ast.py`` and docs/schema.md). A deviation is accepted only when
  (1) a rule's predicate holds on one of the schema's arguments or returns, (2) torch parses our text back
  to a schema equal (``FunctionSchema.__eq__``) to the one it parsed from the input -- or, where the input held
  an annotation torch drops (``Union(int, Tensor!)``: a container's members carry none) which still took one of
  torch's fresh alias-set numbers, one that prints the same with those numbers counted from 0 in order (a fresh set's
  number is only a name; ``Tensor!`` cannot say it) -- and (3) the schema with
  the rule-hit arguments and returns removed prints identically in torch and here, so the rule cannot
  hide another difference elsewhere in the schema.

Counters (inputs compared, agreement, hits per rule) go to the harness's :class:`_fuzzlib.Stats`.
torch is only handed text whose bracket nesting is at most ``TORCH_MAX_NESTING`` (its recursive parser
overflows the C++ stack a few thousand levels deep); our parser sees every input regardless.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable, Iterator

from _fuzzlib import Stats, bracket_depth, fail, longest_bracketed_number

TORCH_MAX_NESTING = 1000
# torch is not handed a list size of more digits than this (fuzz/_fuzzlib.py, longest_bracketed_number)
TORCH_MAX_SIZE_DIGITS = 7

_NAMED_ESCAPES = set("\a\b\f\n\t\v")


def _ast():
    from piece_by_piece_serialize.schema import _ast as _schema_ast

    return _schema_ast


def iter_types(t: object) -> Iterator[object]:
    """Every type node inside ``t`` (``t`` included), without recursion."""
    a = _ast()
    stack = [t]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (a.OptionalType, a.ListType, a.FutureType, a.AwaitType, a.RRefType)):
            stack.append(node.elem)
        elif isinstance(node, a.TupleType):
            stack.extend(node.elems)
        elif isinstance(node, a.UnionType):
            stack.extend(node.members)
        elif isinstance(node, a.DictType):
            stack.extend((node.key, node.value))


def _aliases(item: object) -> Iterator[object]:
    for node in iter_types(item.type):  # type: ignore[attr-defined]
        alias = getattr(node, "alias", None)
        if alias is not None:
            yield alias


def _strip_optional(t: object) -> object:
    a = _ast()
    while isinstance(t, a.OptionalType):
        t = t.elem
    return t


def _default_values(item: object) -> list[object]:
    a = _ast()
    default = getattr(item, "default", None)
    if default is None:
        return []
    if isinstance(default, a.ListValue):
        return [default, *default.items]
    return [default]


# --- printer deviations: predicates on one argument or return --------------------------------------


def _fresh_alias(item: object) -> bool:
    """``Tensor!``: torch prints ``Tensor($0! -> )``, we print ``Tensor!``."""
    return any(alias.is_fresh for alias in _aliases(item))


def _alias_set_order(item: object) -> bool:
    """Alias sets of two or more names: torch prints them in hash order, we in the order written."""
    return any(len(alias.before) > 1 or len(alias.after) > 1 for alias in _aliases(item))


def _annotated_optional_in_list(item: object) -> bool:
    """``Tensor(a)?[]``: torch prints ``Tensor?(a)[]`` (unparseable), we keep ``Tensor(a)?[]``."""
    a = _ast()
    return any(
        isinstance(node, a.ListType) and isinstance(node.elem, a.OptionalType) and node.elem.alias is not None
        for node in iter_types(item.type)  # type: ignore[attr-defined]
    )


def _annotation_inside_nested_list(item: object) -> bool:
    """An annotation on the element of a list of lists (``Tensor(a)[](b)[](c)``, ``Tensor(a)[][]``): torch
    keeps only some of them (or prints an empty ``()``), we print every annotation written."""
    a = _ast()
    for node in iter_types(item.type):  # type: ignore[attr-defined]
        if isinstance(node, a.ListType):
            inner = _strip_optional(node.elem)
            if isinstance(inner, a.ListType) and any(
                getattr(sub, "alias", None) is not None for sub in iter_types(inner)
            ):
                return True
    return False


def _int_list_collapse(item: object) -> bool:
    """``int[] x=[1, 1]``: torch prints one scalar ``x=1`` (needs ``[N]`` to read back); we keep the list unless
    the size matches."""
    a = _ast()
    t = _strip_optional(item.type)  # type: ignore[attr-defined]
    default = getattr(item, "default", None)
    return (
        isinstance(t, a.ListType)
        and isinstance(t.elem, a.BaseType)
        and t.elem.name == "int"
        and isinstance(default, a.ListValue)
        and len(default.items) >= 2
        and all(x == default.items[0] for x in default.items)
        and t.size != len(default.items)
    )


def _string_default_unquoted(item: object) -> bool:
    """A string default on a type other than ``str`` (``Device d="cpu"``, ``Scalar x="a"``): torch prints it
    raw (unparseable), we quote it."""
    a = _ast()
    base = _strip_optional(item.type)  # type: ignore[attr-defined]
    is_str = isinstance(base, a.BaseType) and base.name == "str"
    return any(
        isinstance(v, a.DeviceValue) or (isinstance(v, a.StrValue) and not is_str) for v in _default_values(item)
    )


def _complex_default(item: object) -> bool:
    """Complex defaults: torch prints ``0.+2.j`` (unparseable), we print ``2.j``."""
    a = _ast()
    return any(isinstance(v, a.ComplexValue) for v in _default_values(item))


def _signed_zero_or_subnormal(item: object) -> bool:
    """``-0.0`` (torch prints ``0.``, losing the sign) and subnormal doubles (torch prints ``%.17g`` text its
    reader rejects; we print exact hexadecimal)."""
    a = _ast()
    for v in _default_values(item):
        x = v.value if isinstance(v, a.FloatValue) else v.imag if isinstance(v, a.ComplexValue) else None
        if isinstance(x, float) and (
            (x == 0.0 and math.copysign(1.0, x) < 0) or (x != 0.0 and abs(x) < 2.2250738585072014e-308)
        ):
            return True
    return False


def _unusual_string(item: object) -> bool:
    """Strings with non-ASCII or control characters other than the named escapes: torch prints octal
    escapes of signed bytes (garbage for UTF-8) and ``\\r`` it cannot read back; we print the characters or
    readable octal escapes."""
    a = _ast()
    for v in _default_values(item):
        if isinstance(v, (a.StrValue, a.DeviceValue)):
            s = v.value
            if any(ord(ch) >= 0x7F or (ord(ch) < 0x20 and ch not in _NAMED_ESCAPES) for ch in s):
                return True
    return False


def _union_with_scalar(item: object) -> bool:
    """torch prints a Union with a Scalar member as broken text (``Union(, str, Scalar)``, ``Union(TensorScalar)``);
    we print ``Union(Scalar, str)``."""
    a = _ast()
    return any(
        isinstance(node, a.UnionType) and any(isinstance(m, a.BaseType) and m.name == "Scalar" for m in node.members)
        for node in iter_types(item.type)  # type: ignore[attr-defined]
    )


def _optional_of_optional_scalar(item: object) -> bool:
    """An optional Scalar (``Scalar?``): torch prints an optional of an optional Scalar (``Scalar??``,
    ``Union(Scalar, None)?``, ``Union(ScalarType?, Scalar)?``) as ``Union(Scalar)?``, which its own parser reads
    back as ``Scalar?``; we print ``Scalar?`` (the fixed point)."""
    a = _ast()
    return any(
        isinstance(node, a.OptionalType) and isinstance(node.elem, a.BaseType) and node.elem.name == "Scalar"
        for node in iter_types(item.type)  # type: ignore[attr-defined]
    )


# Rules for findings reported and not yet resolved: kept apart, named "OPEN: ...", so that a campaign can
# go on finding new problems while the counters show how often each open one was hit. Remove an entry
# once the library is fixed (or the difference is documented and moved to PRINT_RULES). None are open.
OPEN_PRINT_RULES: dict[str, Callable[[object], bool]] = {}

def _enum_default_on_float(item: object) -> bool:
    """``float u=float`` / ``complex v=complex``: torch prints the code (``6``), which reads back as a
    double; we print the identifier, which reads back as the same int."""
    a = _ast()
    t, default = item.type, getattr(item, "default", None)  # type: ignore[attr-defined]
    return isinstance(t, a.BaseType) and t.name in ("float", "complex") and isinstance(default, a.IntValue)


PRINT_RULES: dict[str, Callable[[object], bool]] = {
    "print: Tensor! shorthand": _fresh_alias,
    "print: alias set order": _alias_set_order,
    "print: Tensor(a)?[] annotation placement": _annotated_optional_in_list,
    "print: annotations inside a list of lists": _annotation_inside_nested_list,
    "print: int[] equal-element default": _int_list_collapse,
    "print: quoted non-str string default": _string_default_unquoted,
    "print: complex default": _complex_default,
    "print: -0.0 / subnormal double": _signed_zero_or_subnormal,
    "print: non-ASCII / control characters in a string": _unusual_string,
    "print: enum identifier default of a float/complex argument": _enum_default_on_float,
    "print: Union with a Scalar member": _union_with_scalar,
    "print: optional of an optional Scalar": _optional_of_optional_scalar,
    **OPEN_PRINT_RULES,
}


# --- acceptance differences ---------------------------------------------------------------------------


def _accept_rule_ours_only(schema: object, text: str, torch_message: str) -> str | None:
    """Why we accept a text torch rejects, if a documented rule says so."""
    if "Unknown custom class type" in torch_message:
        # The rule is "not checked by default": with torch's registry as the check, we must reject too.
        from piece_by_piece_serialize.errors import SchemaError
        from piece_by_piece_serialize.schema import parse_schema, torch_class_exists

        try:
            parse_schema(text, class_exists=torch_class_exists)
        except SchemaError:
            return "accept: custom class registration not checked"
    return None


def _accept_rule_torch_only(error: BaseException, text: str, theirs: object) -> str | None:
    """Why we reject a text torch accepts, if a documented rule says so."""
    a = _ast()
    message = getattr(error, "msg", str(error))
    if "cannot carry an alias annotation" in message and torch_parse(str(theirs))[0] is None:
        return "reject: annotation on Union(T, None) whose T cannot carry one"
    if "still unifies with another member: read again" in message:
        # torch's own printed text (its fresh alias sets, which it cannot read, as "!") is not what it parsed
        back, _ = torch_parse(_FRESH_SET.sub("!", str(theirs)))
        if back is None or _fresh_in_order(str(back)) != _fresh_in_order(str(theirs)):  # Note [Unstable unions]
            return "reject: Union that normalises again to another type"
    items = [*theirs.arguments, *theirs.returns]  # type: ignore[attr-defined]
    if f"nested deeper than {a.MAX_TYPE_DEPTH} levels" in message and max(
        _torch_type_depth(x.type) for x in items
    ) > a.MAX_TYPE_DEPTH:
        return "reject: type nesting limit"
    if "repeats a value" in message and any((x.N or 0) > 4096 for x in items):
        return "reject: int[N] repeat limit"
    if "does not fit a 32-bit int" in message:
        return "reject: list size beyond int32 (torch truncates)"
    if "the index must be at most" in message and any(
        # torch keeps the index as an int8: 128 becomes -128, 328 becomes 72
        x.has_default_value() and type(x.default_value).__name__ == "device"
        for x in theirs.arguments  # type: ignore[attr-defined]
    ):
        return "reject: device index beyond int8 (torch wraps it)"
    return None


def _torch_type_depth(t: object) -> int:
    """Nesting depth of a torch type (1 for a leaf), without recursion."""
    deepest = 0
    stack = [(t, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.containedTypes())  # type: ignore[attr-defined]
    return deepest


# --- the comparison ---------------------------------------------------------------------------------


def torch_parse(text: str) -> tuple[object | None, str | None]:
    """``(schema, None)`` or ``(None, message)`` from ``torch._C.parse_schema``."""
    import torch

    try:
        return torch._C.parse_schema(text), None
    except RuntimeError as exc:  # torch reports parse failures (and its internal asserts) this way
        return None, str(exc)
    except (IndexError, ValueError) as exc:
        # C++ std::out_of_range / std::invalid_argument from stoll/stod on a number token, which pybind11
        # turns into IndexError / ValueError: torch rejected the text.
        return None, f"{type(exc).__name__}: {exc}"
    except MemoryError as exc:
        # std::bad_alloc: torch tried to build a huge repeated default (int[N] x=1 with N near 2**31); it did
        # not accept the text. We reject such input before allocating ("repeats a value ... times").
        return None, f"MemoryError: {exc}"
    except UnicodeDecodeError as exc:
        # torch rejected the text, but its message quotes the input cut in the middle of a UTF-8 sequence,
        # so pybind11 cannot turn the message into a str (seen on non-ASCII bytes outside strings).
        return None, f"(torch's error message is not valid UTF-8: {exc})"


def compare(data: object, text: str, ours: object | None, our_error: BaseException | None, stats: Stats) -> None:
    """The differential check of one text; raises Finding on an undocumented disagreement."""
    if bracket_depth(text) > TORCH_MAX_NESTING:
        stats.add("torch skipped (nesting beyond its stack)")
        return
    if longest_bracketed_number(text) > TORCH_MAX_SIZE_DIGITS:
        stats.add("torch skipped (a list size that could make it allocate gigabytes)")
        return
    theirs, their_error = torch_parse(text)
    stats.add("compared with torch")
    if ours is None and theirs is None:
        stats.add("agree: both reject")
        if their_error and "INTERNAL ASSERT FAILED" in their_error:
            stats.add("rule hit: reject: torch internal assert, we raise SchemaError")
        if their_error and their_error.startswith("MemoryError"):
            stats.add("rule hit: reject: torch runs out of memory, we raise SchemaError")
        return
    if ours is not None and theirs is None:
        rule = _accept_rule_ours_only(ours, text, their_error or "")
        if rule is None:
            raise fail(data, f"we accept, torch rejects: {their_error!r}\n  ours: {ours}")
        stats.add(f"rule hit: {rule}")
        return
    if ours is None:
        rule = _accept_rule_torch_only(our_error, text, theirs)  # type: ignore[arg-type]
        if rule is None:
            raise fail(data, f"torch accepts ({theirs}), we reject: {our_error}")
        stats.add(f"rule hit: {rule}")
        return
    stats.add("agree: both accept")
    torch_names = [arg.name for arg in theirs.arguments]  # type: ignore[attr-defined]
    if list(ours.argument_names) != torch_names:  # type: ignore[attr-defined]
        raise fail(data, f"argument names {list(ours.argument_names)} != torch's {torch_names}")  # type: ignore[attr-defined]
    _compare_without_typevars(data, text, ours, stats)
    our_text, their_text = str(ours), _torch_text(theirs)
    if our_text == their_text:
        stats.add("agree: same printed text")
        return
    _check_print_difference(data, ours, theirs, our_text, their_text, stats)


def _torch_text(schema: object) -> str:
    """``str(schema)`` of a torch schema; torch prints string defaults of non-``str`` types raw, so a byte
    such as ``\\377`` makes its text invalid UTF-8 and pybind11 raises UnicodeDecodeError."""
    try:
        return str(schema)
    except UnicodeDecodeError:
        return "<torch's printed text is not valid UTF-8>"


def _compare_without_typevars(data: object, text: str, ours: object, stats: Stats) -> None:
    """With type variables off (how ``Library.define`` parses), acceptance still agrees with torch."""
    a = _ast()
    items = [*ours.arguments, *ours.returns]  # type: ignore[attr-defined]
    if not any(isinstance(node, a.TypeVar) for item in items for node in iter_types(item.type)):
        return
    import torch

    from piece_by_piece_serialize.errors import SchemaError
    from piece_by_piece_serialize.schema import parse_schema

    try:
        torch._C.parse_schema(text, allow_typevars=False)
        torch_accepts = True
    except (RuntimeError, IndexError, ValueError, UnicodeDecodeError):
        torch_accepts = False
    try:
        parse_schema(text, allow_typevars=False)
        we_accept = True
    except SchemaError:
        we_accept = False
    if we_accept != torch_accepts:
        raise fail(data, f"with allow_typevars=False torch {'accepts' if torch_accepts else 'rejects'}, we do not agree")
    stats.add("agree: typevars off (text with type variables)")


_DROPPED_FRESH = "print: fresh alias-set numbers after an annotation torch drops"
_FRESH_NUMBER = re.compile(r"\$(\d+)")  # in torch's printed text: a fresh alias set, "$3"
_FRESH_SET = re.compile(r"\(\$\d+! -> \)")  # torch's printed "Tensor($3! -> )", which it cannot read: "Tensor!"


def _fresh_in_order(torch_text: str) -> str:
    """torch's printed text with its fresh alias sets numbered from 0 in the order they appear, and
    ``Union(Scalar)`` as ``Scalar`` (one type to torch's equality, printed either way: Note [Printer deviations])."""
    numbers: dict[str, int] = {}
    renumbered = _FRESH_NUMBER.sub(lambda m: "$" + str(numbers.setdefault(m.group(1), len(numbers))), torch_text)
    return renumbered.replace("Union(Scalar)", "Scalar")


def _check_print_difference(
    data: object, ours: object, theirs: object, our_text: str, their_text: str, stats: Stats
) -> None:
    items = [*ours.arguments, *ours.returns]  # type: ignore[attr-defined]
    hits: dict[str, int] = {}
    flagged = set()
    for index, item in enumerate(items):
        for rule, predicate in PRINT_RULES.items():
            if predicate(item):
                hits[rule] = hits.get(rule, 0) + 1
                flagged.add(index)
    if not hits:
        raise fail(data, f"printed text differs from torch's with no documented rule:\n  ours:  {our_text}\n  torch: {their_text}")
    back, error = torch_parse(our_text)
    if back is None:
        raise fail(data, f"torch cannot read our printed text back ({error!r}):\n  ours:  {our_text}\n  torch: {their_text}")
    if back != theirs and "print: Tensor! shorthand" in hits and _fresh_in_order(str(back)) == _fresh_in_order(str(theirs)):
        hits[_DROPPED_FRESH] = 1  # the numbers differ by the fresh sets torch gave to annotations it dropped
    elif back != theirs:
        raise fail(
            data,
            f"torch reads our printed text as a different schema (rules {sorted(hits)}):\n"
            f"  ours:  {our_text}\n  torch: {their_text}\n  torch(ours): {back}",
        )
    n_args = len(ours.arguments)  # type: ignore[attr-defined]
    residual = dataclasses.replace(
        ours,
        arguments=tuple(x for i, x in enumerate(ours.arguments) if i not in flagged),  # type: ignore[attr-defined]
        returns=tuple(x for i, x in enumerate(ours.returns) if i + n_args not in flagged),  # type: ignore[attr-defined]
    )
    residual_text = str(residual)
    residual_torch, error = torch_parse(residual_text)
    if residual_torch is None or _torch_text(residual_torch) != residual_text:
        raise fail(
            data,
            f"outside the rule-hit items ({sorted(hits)}) the printed text still differs:\n"
            f"  ours:  {residual_text}\n  torch: {residual_torch if residual_torch is not None else error}",
        )
    for rule in hits:
        stats.add(f"rule hit: {rule}")
    stats.add("differ by documented rule only")
