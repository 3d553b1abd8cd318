"""Each lint rule: its exact message and position, and, where torch can tell, torch confirming the claim.

The claims are checked against the oracle: a "misread" warning states the value torch really stores
(read back from torch._C.parse_schema), and a "no-roundtrip" warning is only right if torch's own
printed form fails to parse back to the same schema (or loses the value, like -0.0).
"""

from __future__ import annotations

import math

import pytest
import torch

from piece_by_piece_serialize.cli._check import check_site
from piece_by_piece_serialize.cli.sources import SchemaSite

# schema, then (column, severity, code, message) for every finding, in order
CASES = [
    ("ns::a(int x=0x10) -> ()", [(13, "warning", "misread-number", "torch reads 0x10 as the integer 0, not 16")]),
    ("ns::b(Scalar t=1E5) -> ()", [(16, "warning", "misread-number", "torch reads 1E5 as the integer 1, not 100000.0")]),
    ("ns::b2(int w=-0x1) -> ()", [(14, "warning", "misread-number", "torch reads -0x1 as the integer 0, not -1")]),
    ("ns::c(int[2.5] s) -> ()", [(11, "warning", "misread-size", "torch reads the list size '2.5' as 2")]),
    ("ns::d(int[99999999999] s) -> ()", [(11, "warning", "misread-size", "torch reads the list size '99999999999' as 1215752191")]),
    ("ns::e(int[2]? x=1) -> ()", [(17, "warning", "misread-optional-list", "torch stores the default of 'int[2]?' as the single value 1, not a list of 2")]),
    ("ns::f(Tensor! x) -> ()", [(7, "warning", "no-roundtrip", "torch prints the '!' shorthand as '($0! -> )', which it cannot parse back; write a named set such as Tensor(a!)")]),
    ("ns::g(Device d=\"cpu\") -> ()", [(16, "warning", "no-roundtrip", "torch prints Device defaults unquoted ('d=cpu'), which it cannot parse back")]),
    ("ns::h(Tensor(a!)?[] xs) -> ()", [(7, "warning", "no-roundtrip", "torch prints 'Tensor(a!)?[]' as 'Tensor?(a!)[]', which it cannot parse back")]),
    ("ns::i(int[] x=[1,1]) -> ()", [(15, "warning", "no-roundtrip", "torch prints the default [1, 1] of an int[] as the single value 1, which parses back only with a fixed size (int[2])")]),
    ("ns::j(complex c=2j) -> ()", [(17, "warning", "no-roundtrip", "torch prints the complex default 2j as 0.+2.j, which it cannot parse back")]),
    ("ns::k(float f=-0.0) -> ()", [(15, "warning", "no-roundtrip", "torch prints -0.0 as '0.', losing the sign")]),
    ("ns::l(str s=\"caf\u00e9\") -> ()", [(13, "warning", "no-roundtrip", "torch prints non-ASCII characters in string defaults as broken octal escapes")]),
    ("ns::l2(str s=\"a\\015b\") -> ()", [(14, "warning", "no-roundtrip", "torch prints a carriage return as '\\r', an escape its parser rejects")]),
    ("ns::o(Scalar x=\"a\") -> ()", [(16, "warning", "no-roundtrip", "a string default for a 'Scalar' argument: torch prints it unquoted ('x=a'), which it cannot parse back")]),
    ("ns::p(Tensor(a|*) x) -> ()", [(7, "warning", "no-roundtrip", "torch prints alias sets in hash order, so (a|*) can come back with '*' first, which it cannot parse")]),
    ("ns::q(int y=True) -> ()", [(13, "warning", "default-type", "the default True of the 'int' argument 'y' is a bool: torch keeps it as a bool")]),
    (
        "ns::m(Tensor[][] x, Tensor[]? y) -> ()",
        [
            (7, "warning", "dispatcher-ignores", "the dispatcher ignores the tensors inside 'Tensor[][]' when it picks a kernel (only Tensor, Tensor?, Tensor[] and Tensor?[] arguments are dispatch inputs)"),
            (21, "warning", "dispatcher-ignores", "the dispatcher ignores the tensors inside 'Tensor[]?' when it picks a kernel (only Tensor, Tensor?, Tensor[] and Tensor?[] arguments are dispatch inputs)"),
        ],
    ),
    # not misread: decimal with a leading zero, float kinds read with strtod, plain fixed sizes
    ("ns::ok(int x=010, float y=1E5, float z=0x10, Scalar w=1.5, int[2] s=1, Tensor?[] t) -> ()", []),
]


def findings(text: str, context: str = "text"):
    site = SchemaSite("<t>", text, tuple((1, c) for c in range(1, len(text) + 2)), context, [text])
    return [(f.column, f.severity, f.code, f.message) for f in check_site(site).findings]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[t for t, _ in CASES])
def test_rule(text, expected):
    assert findings(text) == expected


def test_every_rule_code_is_exercised():
    codes = {code for _, found in CASES for _, _, code, _ in found}
    assert codes == {"misread-number", "misread-size", "misread-optional-list", "no-roundtrip", "default-type", "dispatcher-ignores"}


# ---- the oracle agrees with each claim --------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [c for c in CASES if c[1] and c[1][0][2] == "no-roundtrip"], ids=lambda c: str(c)[:40])
def test_no_roundtrip_claims_hold_in_torch(text, expected):
    schema = torch._C.parse_schema(text)
    printed = str(schema)
    try:
        back = torch._C.parse_schema(printed)
    except RuntimeError:
        return  # torch cannot read its own print: the warning is right
    # it parsed back: then a value was lost (the sign of -0.0)
    (old,), (new,) = [a.default_value for a in schema.arguments], [a.default_value for a in back.arguments]
    assert math.copysign(1.0, old) != math.copysign(1.0, new), printed


def test_misread_claims_hold_in_torch():
    def torch_arg(text):
        return torch._C.parse_schema(text).arguments[0]

    assert torch_arg("ns::a(int x=0x10) -> ()").default_value == 0
    value = torch_arg("ns::b(Scalar t=1E5) -> ()").default_value
    assert value == 1 and isinstance(value, int)
    assert torch_arg("ns::b2(int w=-0x1) -> ()").default_value == 0
    assert torch_arg("ns::c(int[2.5] s) -> ()").N == 2
    assert torch_arg("ns::d(int[99999999999] s) -> ()").N == 1215752191
    assert torch_arg("ns::e(int[2]? x=1) -> ()").default_value == 1
    assert torch_arg("ns::q(int y=True) -> ()").default_value is True
    assert [a.default_value for a in torch._C.parse_schema(CASES[-1][0]).arguments][:3] == [10, 100000.0, 16.0]


# ---- rules that depend on where the schema was written ---------------------------------------


def test_nameless_expected_in_torch_library_define():
    assert findings("myops::f(Tensor x) -> Tensor", "torch.library.define")[0] == (
        1,
        "error",
        "nameless-expected",
        "torch.library.define takes the schema without the operator name, like '(Tensor x) -> Tensor'",
    )


def test_define_format():
    assert findings("(Tensor x)->Tensor", "torch.library.define") == [
        (1, "error", "define-format", "torch.library.define rejects this text: it must start with '(' and have ' -> ' with one space on each side")
    ]
    assert findings("(Tensor x,\n Tensor y) -> Tensor", "torch.library.define")[0][1:3] == ("error", "define-format")
    assert findings("(Tensor x) -> Tensor", "torch.library.define") == []


def test_library_namespace():
    assert findings("myops::f(Tensor x) -> Tensor", "Library.define") == [
        (
            1,
            "warning",
            "library-namespace",
            "Library.define with the namespace 'myops::' written out: torch records the op as 'myops::myops::f' and its "
            "cleanup fails at exit; leave the namespace to the Library",
        )
    ]


def test_custom_op_kwarg_tensor():
    assert findings("(Tensor x, *, Tensor y) -> Tensor", "custom_op") == [
        (15, "warning", "custom-op-kwarg-tensor", "custom_op refuses keyword-only Tensor arguments ('y') unless the op is tagged torch.Tag.out")
    ]


def test_typevar_and_opaque_type_with_typevars_off():
    assert findings("f(t x) -> t", "Library.define")[0][:3] == (3, "error", "typevar")
    assert findings("f(t x) -> t", "text") == []  # parse_schema allows type variables
    assert findings("aten::f(t x) -> t", "cpp") == []  # torch always allows them for aten:: and prim::
    assert findings("f(torch.distributed.device_mesh.DeviceMesh mesh) -> ()", "Library.define") == [
        (
            3,
            "warning",
            "opaque-type",
            "'torch.distributed.device_mesh.DeviceMesh' is accepted by Library.define only if it is registered as an opaque type before the schema is defined",
        )
    ]


def test_duplicate_argument_names():
    # vllm's csrc/torch_bindings.cpp declared `Tensor q_seqlens` twice in one schema: torch registers it
    text = "ns::mla(Tensor q, Tensor q_seqlens, Tensor kv, Tensor q_seqlens, *, int q=0) -> Tensor"
    assert [a.name for a in torch._C.parse_schema(text).arguments] == ["q", "q_seqlens", "kv", "q_seqlens", "q"]
    assert findings(text) == [
        (
            55,
            "error",
            "duplicate-argument",
            "argument name 'q_seqlens' is used twice (arguments 2 and 4): a call by keyword reaches only one of them; "
            "the first is at line 1, column 26",
        ),
        (
            73,
            "error",
            "duplicate-argument",
            "argument name 'q' is used twice (arguments 1 and 5): a call by keyword reaches only one of them; "
            "the first is at line 1, column 16",
        ),
    ]
    assert text[54:63] == text[25:34] == "q_seqlens" and text[72] == text[15] == "q"
    assert findings("ns::ok(Tensor q, Tensor k) -> (Tensor q, Tensor k)") == []  # returns have their own names
