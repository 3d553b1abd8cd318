"""torch is the oracle: every schema torch registers, the reference document's accept/reject vectors, and the
values torch reads from default literals.

Counts are asserted over the whole set (never sampled); a failure message lists what disagreed.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from _schema_oracle import both
from _torch_registry import TORCH_2_13_REGISTERED as REGISTERED
from _torch_registry import shipped_schemas
from piece_by_piece_serialize import extract_names_from_schema
from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import ListType, ListValue, OptionalType, parse_schema

# What torch registers on import: the schemas a clean interpreter lists (other test modules import parts of torch
# that register more operators in Python, and register their own), as this process's registry holds them.
_SHIPPED = frozenset(shipped_schemas())
TORCH_SCHEMAS = [s for s in torch._C._jit_get_all_schemas() if str(s) in _SHIPPED]


def test_registered_schema_count():
    assert len(TORCH_SCHEMAS) == REGISTERED


def test_every_registered_schema_parses_names_and_prints_like_torch():
    parsed = names = printed = refixed = 0
    failures = []
    for theirs in TORCH_SCHEMAS:
        text = str(theirs)
        try:
            ours = parse_schema(text)
        except SchemaError as e:
            failures.append(f"parse: {text}\n  {e.msg}")
            continue
        parsed += 1
        if list(ours.argument_names) == [a.name for a in theirs.arguments]:
            names += 1
        else:
            failures.append(f"names: {text}")
        if str(ours) == text:
            printed += 1
        else:
            failures.append(f"print: {text}\n  ours: {ours}")
        if parse_schema(str(ours)) == ours:
            refixed += 1
    assert (parsed, names, printed, refixed) == (REGISTERED,) * 4, "\n".join(failures[:30])


def test_extract_names_on_every_registered_schema():
    ok = sum(extract_names_from_schema(str(s)) == [a.name for a in s.arguments] for s in TORCH_SCHEMAS)
    assert ok == REGISTERED


def _size(t):
    while isinstance(t, OptionalType):
        t = t.elem
    return t.size if isinstance(t, ListType) else None


def test_structure_matches_torch_on_every_registered_schema():
    # Beyond the text: kwarg-only flags, defaults present, write/out flags, fixed sizes, return names, overload.
    same = 0
    failures = []
    for theirs in TORCH_SCHEMAS:
        ours = parse_schema(str(theirs))
        got = (
            [(a.name, a.kwarg_only, a.default is not None, a.is_write, a.is_out, _size(a.type))
             for a in ours.arguments],
            [r.name for r in ours.returns],
            any(a.is_write for a in ours.arguments),
            ours.name.overload,
        )
        want = (
            [(a.name, a.kwarg_only, a.has_default_value(), a.is_write, a.is_out, a.N) for a in theirs.arguments],
            [r.name or None for r in theirs.returns],
            theirs.is_mutable,
            theirs.overload_name,
        )  # fmt: skip
        if got == want:
            same += 1
        else:
            failures.append(f"{theirs}\n  ours {got}\n  torch {want}")
    assert same == REGISTERED, "\n".join(failures[:20])


# ---------------------------------------------------------------------------------------------------------------
# Reference vectors (shared/reference/schema-language.md, section 10)

ACCEPT = [
    "ns::f.ov(Tensor(a!) self, *, Scalar alpha=1) -> Tensor(a!)",
    "f(Tensor!? k, int!? n) -> ()",
    "f(Tensor[](b!) h) -> ()",
    "f(Tensor(a)[](b!) x) -> ()",
    "f((int, int)? g=None) -> ()",
    "f(int[2] s=1, SymInt[] t=[1, 2], int[1] d=-1, bool[3] m=True) -> ()",
    "f(float e=1e-5, float g=.5, float h=5.) -> ()",
    "f(str a='x\"y', str b=\"\"\"q\"\"\", str c=\"\\101\") -> ()",
    "f(ScalarType? d=bfloat16, Layout? l=strided, MemoryFormat m=contiguous_format, int r=Mean) -> ()",
    'f(Device d="cuda:0") -> ()',
    "f(complex c=2j) -> ()",
    "f(Dict(str, Tensor) d, Union(int, str) u, Future(t) fu, Await(t) aw, RRef(t) r) -> t",
    "f(Any x, ...) -> ...",
    "f(Tensor x) -> (Tensor a, Tensor b, ...)",
    "f() -> ((str, t)[])",
    "f(int x)->int # comment",
    "f(\n  int x,\n  int y) -> int\n",
    "f(__torch__.torch.classes.quantized.Conv2dPackedParamsBase p) -> ()",
    "f(foo.Bar x) -> ()",
]
REJECT = [
    "a::b::c() -> ()",
    "f.default() -> ()",
    "f.__x() -> ()",
    "f(int in) -> ()",
    "f(int x,) -> ()",
    "f(int x)\n-> int",
    "f(Tensor?(a) x) -> ()",
    "f(Tensor(*|a) x) -> ()",
    "f(Tensor(a!|b) x) -> ()",
    "f(int[2][] x) -> ()",
    "f(int[]? x=[1]) -> ()",
    "f(int[] x=None) -> ()",
    "f(str[] x=[]) -> ()",
    "f(float x=inf) -> ()",
    "f(int x=+1) -> ()",
    'f(str s="\\x41") -> ()',
    'f(str s="a\\rb") -> ()',
    "f(Device d=None) -> ()",
    "f(float x=1f) -> ()",
    "f(Tensor x) -> (str, t)[]",
    "f(Dimname d) -> ()",
    "f(Foo x) -> ()",
    "f(SymBool b=True) -> ()",
    "f(int x=1, int y) -> ()",
]


def test_reference_vectors_agree_with_torch():
    accepted = 0
    for text in ACCEPT:
        theirs = torch._C.parse_schema(text)
        ours = parse_schema(text)
        assert list(ours.argument_names) == [a.name for a in theirs.arguments], text
        assert torch._C.parse_schema(str(ours)) == theirs or "!" in text, text
        accepted += 1
    rejected = 0
    for text in REJECT:
        with pytest.raises(RuntimeError):
            torch._C.parse_schema(text)
        with pytest.raises(SchemaError):
            parse_schema(text)
        rejected += 1
    assert (accepted, rejected) == (len(ACCEPT), len(REJECT)) == (19, 24)


# ---------------------------------------------------------------------------------------------------------------
# Alias annotations: every set of up to three items drawn from a name, another name, "*" and nothing (torch reads
# each item after a "*" as an optional "*", so "(*|)" and "(a|*||*)" are annotations), with and without "!" and an
# after-set of up to two items. The fuzzer found "(*|*|)", which the grammar had refused.

_ITEMS = ["a", "b", "*", ""]


def _alias_sets(most: int) -> list[str]:
    return ["|".join(items) for n in range(1, most + 1) for items in itertools.product(_ITEMS, repeat=n)]


def test_every_small_alias_annotation_agrees_with_torch():
    both_accept = both_reject = 0
    failures = []
    for before, bang, after in itertools.product(_alias_sets(3), ["", "!"], [None, *_alias_sets(2)]):
        annotation = f"({before}{bang}{'' if after is None else ' -> ' + after})"
        text = f"f(Tensor{annotation} x) -> Tensor"
        theirs, ours = both(text)
        if ours is None:
            if theirs is not None:
                failures.append(f"torch accepts, we reject: {text}")
            both_reject += 1
            continue
        if theirs is None:
            failures.append(f"torch rejects, we accept: {text}")
        elif torch._C.parse_schema(str(ours)) != theirs:
            failures.append(f"printed differently: {text} -> {ours} (torch: {theirs})")
        else:
            both_accept += 1
    assert not failures, "\n".join(failures[:20])
    assert both_accept + both_reject == 84 * 2 * 21
    assert (both_accept, both_reject) == (744, 2784)


# ---------------------------------------------------------------------------------------------------------------
# Layout: every text made of a declaration and up to two pieces of blank, newline, line continuation, comment or tab
# before it, in its middle (outside brackets) and after it. torch's lexer measures a line's width after a newline
# (Note [line widths] in schema/_transform.py); the fuzzer found " f() -> t\n\\\n" (a continuation line narrower
# than the first), which we had accepted.

_LAYOUT = ["", " ", "\n", "\\\n", "# c\n", "\t"]
_MIDDLES = ["", "\n", "\\\n", " \\\n", "\n \\\n"]


def test_every_small_layout_agrees_with_torch():
    agree = [0, 0]
    failures = []
    for before, middle, after in itertools.product(itertools.product(_LAYOUT, repeat=2), _MIDDLES, itertools.product(_LAYOUT, repeat=2)):
        text = "".join(before) + "f(int x)" + middle + " -> t" + "".join(after)
        theirs, ours = (schema is not None for schema in both(text))
        if ours != theirs:
            failures.append(f"torch {'accepts' if theirs else 'rejects'}, we do not: {text!r}")
        else:
            agree[ours] += 1
    assert not failures, "\n".join(failures[:20])
    assert agree == [2892, 3588]  # [both refuse, both accept], of 6 * 6 * 5 * 6 * 6


# ---------------------------------------------------------------------------------------------------------------
# Default values: our typed values against torch's Argument.default_value, over a grid of types and literals

TYPES = ["int", "SymInt", "float", "complex", "bool", "str", "Scalar", "ScalarType", "Layout", "int?", "float?",
         "ScalarType?", "Device", "Device?", "int[]", "int[2]", "float[]", "float[2]", "bool[]", "bool[3]",
         "complex[]", "SymInt[2]", "ScalarType[]", "Tensor", "Tensor?", "str?"]  # fmt: skip
LITERALS = ["None", "True", "False", "0", "1", "-1", "010", "0x10", "1.5", "-2.5", ".5", "5.", "1e5", "1E5", "1e-5",
            "0x1.8p1", "0x1e5", "2j", "-2.5j", "12", "-0.0", "9223372036854775807", "'a'", '"cuda:1"', '"cpu"',
            "'\\101'", "float32", "bfloat16", "Mean", "strided", "long", "float", "complex", "[]", "[1, 2]",
            "[1.5]", "[True, False]", "[2j]", "[float32]", "[1, 1]"]  # fmt: skip


def _same(ours, theirs) -> bool:
    if isinstance(theirs, (list, tuple)):
        return isinstance(ours, tuple) and len(ours) == len(theirs) and all(map(_same, ours, theirs))
    if isinstance(theirs, torch.device):
        return str(theirs) == ours
    if isinstance(theirs, float) and isinstance(ours, float):
        return (ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)) or (ours == theirs == 0.0)
    return type(ours) is type(theirs) and ours == theirs


def test_default_values_match_torch():
    both = agree = 0
    disagreements = []
    for type_, literal in itertools.product(TYPES, LITERALS):
        text = f"f({type_} x={literal}) -> ()"
        try:
            theirs = torch._C.parse_schema(text).arguments[0].default_value
        except Exception:
            with pytest.raises(SchemaError):
                parse_schema(text)
            continue
        ours = parse_schema(text).arguments[0].default
        both += 1
        value = ours.value
        if isinstance(theirs, (torch.dtype, torch.layout, torch.memory_format)):
            # torch hands ScalarType/Layout codes to Python as objects; both printers write the integer code
            ok = str(parse_schema(text)) == str(torch._C.parse_schema(text))
        else:
            ok = _same(value, theirs)
        if ok:
            agree += 1
        else:
            disagreements.append(f"{text}: ours {value!r} torch {theirs!r}")
    assert both > 300
    assert agree == both, "\n".join(disagreements[:30])


def test_default_text_and_span_are_kept():
    text = "f(int x=0x10, Scalar t=1E5, int[2.5] y, float[2] z=[1, 2]) -> ()"
    schema = parse_schema(text)
    x, t, y, z = schema.arguments
    assert (x.default.value, x.default.text, text[slice(*x.default.span)]) == (0, "0x10", "0x10")
    assert (t.default.value, t.default.text) == (1, "1E5")
    assert (y.type.size, y.type.size_text, text[slice(*y.type.size_span)]) == (2, "2.5", "2.5")
    assert isinstance(z.default, ListValue) and z.default.text == "[1, 2]" and z.default.value == (1.0, 2.0)
    assert [text[slice(*a.span)] for a in schema.arguments] == [
        "int x=0x10", "Scalar t=1E5", "int[2.5] y", "float[2] z=[1, 2]"
    ]


def test_typevars_off_agrees_with_torch_on_every_registered_schema():
    # allow_typevars=False is how Library.define parses. torch still allows type variables when the raw text
    # starts with "aten::" or "prim::"; renaming the namespace or adding a leading blank turns that off.
    agree = accepted = 0
    disagreements = []
    variants = []
    for theirs in TORCH_SCHEMAS:
        text = str(theirs)
        namespace = parse_schema(text).name.namespace
        variants += [text, "ns" + text[len(namespace) :], " " + text]
    for text in variants:
        torch_ok, ours = (schema is not None for schema in both(text, allow_typevars=False))
        accepted += ours
        if ours == torch_ok:
            agree += 1
        else:
            disagreements.append(text)
    assert agree == len(variants) == 3 * REGISTERED, "\n".join(disagreements[:20])
    assert accepted < len(variants)  # some do use type variables


def test_newlines_agree_with_torch_on_every_registered_schema():
    # Newlines (and comments) between arguments are ignored inside the parentheses; a newline between the
    # arrow and a bare return is an error in both parsers; a line continuation there is fine.
    counts = {"inside": 0, "after_arrow": 0, "continued": 0}
    disagreements = []
    for theirs in TORCH_SCHEMAS:
        text = str(theirs)
        schema = parse_schema(text)
        starts = [a.span[0] for a in schema.arguments]
        inside = text
        for start in reversed(starts):
            inside = inside[:start] + "# note\n  " + inside[start:]
        variants = [("inside", inside, True)]
        bare = len(schema.returns) == 1 and not schema.is_varret and str(schema.returns[0])[:1] != "("
        if bare:  # a single return printed without parentheses
            at = schema.returns[0].span[0]
            variants.append(("after_arrow", text[:at] + "\n" + text[at:], False))
            variants.append(("continued", text[:at] + "\\\n" + text[at:], True))
        for kind, variant, expected in variants:
            theirs, read = both(variant)
            torch_ok, ours = theirs is not None, read == schema
            if ours == torch_ok == expected:
                counts[kind] += 1
            else:
                disagreements.append(repr(variant))
    assert not disagreements, "\n".join(disagreements[:20])
    assert counts["inside"] == REGISTERED
    assert counts["after_arrow"] == counts["continued"] > 3000


# After the declaration a newline and blank lines are ignored, but a line that starts with blanks and goes on
# with a line continuation is torch's 'indent', an error; found by the grammar-text property test in CI
# ('Tensor ()->Tensor # c\n \\\n', which the parser took before INDENT).
_TRAILING = [
    ("Tensor ()->Tensor # c\n \\\n", False), ("Tensor ()->Tensor\n\t\\\n", False), ("Tensor ()->Tensor\n \\\n\\\n", False),
    ("Tensor ()->Tensor \n \\\n \n", False), ("Tensor ()->Tensor\n \\\n# c\n", False), ("Tensor ()\n \\\n->Tensor", False),
    ("Tensor ()->Tensor # c\n\\\n", True), ("Tensor ()->Tensor\n\\\n \\\n", True), ("Tensor ()->Tensor \\\n ", True),
    ("\n \\\nTensor ()->Tensor", True), ("Tensor (\n \\\nTensor x)->Tensor", True), ("Tensor ()->Tensor # c\n\n", True),
]


@pytest.mark.parametrize(("text", "accepted"), _TRAILING)
def test_an_indented_line_continuation_agrees_with_torch(text: str, accepted: bool) -> None:
    try:
        torch._C.parse_schema(text)
    except RuntimeError:
        torch_ok = False
    else:
        torch_ok = True
    try:
        parse_schema(text)
    except SchemaError as e:
        ours = False
        assert 0 <= e.pos <= len(text)
    else:
        ours = True
    assert ours == torch_ok == accepted
