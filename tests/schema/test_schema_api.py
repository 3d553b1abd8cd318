"""Public API of the schema module: names, caching, options, errors, limits, import hygiene, the grammar."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import piece_by_piece_serialize as pbp
from piece_by_piece_serialize._lalr.grammar import build_parser
from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import (
    _NAMES_MAX,
    MAX_TYPE_DEPTH,
    AliasInfo,
    Argument,
    BaseType,
    FunctionSchema,
    IntValue,
    ListType,
    OperatorName,
    OptionalType,
    Return,
    TypeVar,
    _names,
    extract_names_from_schema,
    parse_operator_name,
    parse_schema,
)


def test_grammar_builds_in_strict_mode():
    parser = build_parser("schema", strict=True, lexer="basic")
    assert parser.parse("f(int x) -> ()").data == "named_schema"


def test_public_names_at_top_level():
    assert pbp.parse_schema is parse_schema
    assert pbp.extract_names_from_schema is extract_names_from_schema
    assert pbp.FunctionSchema is FunctionSchema
    assert issubclass(pbp.SchemaError, ValueError)


@pytest.mark.parametrize(
    "text, names",
    [
        ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", ["self", "other", "alpha"]),
        ("((Tensor x, Tensor y) -> Tensor)", ["x", "y"]),
        ("(Tensor x, Tensor y) -> Tensor", ["x", "y"]),
        ("f(Tensor[] x, Tensor(a!) y, int[2] z, Dict(str, Tensor) d, Future(t) fu) -> ()", ["x", "y", "z", "d", "fu"]),
        ("f(int x=1, *, Tensor(a!) out) -> Tensor(a!) result", ["x", "out"]),
        ("f(int q, int[] x=[1, 2], str s='a b') -> (int y, int z)", ["q", "x", "s"]),
        ("f() -> ()", []),
        ("f(...) -> ...", []),
    ],
)
def test_extract_names(text, names):
    assert extract_names_from_schema(text) == names


def test_extract_names_cache_is_bounded_and_returns_fresh_lists():
    text = "cache_probe::f(Tensor a, Tensor b) -> ()"
    first = extract_names_from_schema(text)
    first.append("mutated")
    assert _names[text] == ("a", "b")
    assert extract_names_from_schema(text) == ["a", "b"]
    assert extract_names_from_schema(text) is not extract_names_from_schema(text)
    for i in range(_NAMES_MAX + 10):
        extract_names_from_schema(f"cache_probe::g{i}(Tensor x{i}) -> ()")
    assert len(_names) == _NAMES_MAX == 8192
    assert text not in _names  # the oldest entries went first
    assert _names["cache_probe::g8201(Tensor x8201) -> ()"] == ("x8201",)
    assert extract_names_from_schema(text) == ["a", "b"]  # parsed again after eviction


def test_extract_names_raises_schema_error():
    with pytest.raises(SchemaError):
        extract_names_from_schema("f(Tensor x -> Tensor")
    with pytest.raises(TypeError):
        extract_names_from_schema(["not", "a", "string"])  # type: ignore[arg-type]


def test_nameless_forms_are_opt_in():
    with pytest.raises(SchemaError):
        parse_schema("(Tensor x) -> Tensor")
    schema = parse_schema("((Tensor x) -> Tensor)", allow_nameless=True)
    assert schema.name == OperatorName("", "") and str(schema) == "(Tensor x) -> Tensor"


def test_bare_operator_name():
    with pytest.raises(SchemaError) as info:
        parse_schema("aten::add.Tensor")
    assert info.value.pos == len("aten::add.Tensor")
    assert parse_operator_name("aten::add.Tensor") == OperatorName("aten", "add", "Tensor")
    assert str(parse_operator_name(" ns :: op ")) == "ns::op"
    with pytest.raises(SchemaError) as info:
        parse_operator_name("ns::op() -> ()")
    assert info.value.msg == "expected only an operator name, got a whole schema"


def test_typevars_option_and_torchs_aten_prefix_rule():
    assert parse_schema("f(t x) -> t").arguments[0].type == TypeVar("t")
    with pytest.raises(SchemaError) as info:
        parse_schema("ns::f(int a, t x) -> t", allow_typevars=False)
    assert info.value.msg == "unknown type 't' (type variables are not allowed here)"
    assert info.value.pos == len("ns::f(int a, ")
    # torch always allows type variables when the text starts with "aten::" or "prim::" ...
    assert str(parse_schema("aten::f(t x) -> t", allow_typevars=False)) == "aten::f(t x) -> t"
    assert str(parse_schema("prim::f(t x) -> t", allow_typevars=False)) == "prim::f(t x) -> t"
    # ... by a plain prefix test, which a leading blank defeats
    with pytest.raises(SchemaError):
        parse_schema(" aten::f(t x) -> t", allow_typevars=False)
    with pytest.raises(SchemaError):
        parse_schema("aten ::f(t x) -> t", allow_typevars=False)


def test_ast_shape():
    schema = parse_schema("ns::f.ov(Tensor(a!) self, int[2]? size=None, *, Scalar alpha=1) -> Tensor(a!) out")
    assert schema.name == OperatorName("ns", "f", "ov")
    self_, size, alpha = schema.arguments
    assert self_ == Argument("self", BaseType("Tensor", AliasInfo(("a",), ("a",), True)))
    assert self_.is_write and not self_.is_out
    assert size.type == OptionalType(ListType(BaseType("int"), 2))
    assert alpha.kwarg_only and alpha.default == IntValue(1)
    assert schema.returns == (Return(BaseType("Tensor", AliasInfo(("a",), ("a",), True)), "out"),)


def test_alias_sets_keep_written_order_and_compare_as_sets():
    ab = parse_schema("f(Tensor(a|b) x) -> ()")
    ba = parse_schema("f(Tensor(b|a) x) -> ()")
    assert ab == ba and hash(ab) == hash(ba)
    assert str(ab) == "f(Tensor(a|b) x) -> ()" and str(ba) == "f(Tensor(b|a) x) -> ()"


def test_fresh_alias_sets_are_distinct():
    schema = parse_schema("f(Tensor! x, Tensor! y) -> Tensor!")
    sets = [a.type.alias.before for a in schema.arguments] + [schema.returns[0].type.alias.before]
    assert sets == [("$0",), ("$1",), ("$2",)]
    assert schema.arguments[0] != Argument("x", BaseType("Tensor", AliasInfo(("$1",), (), True)))


def test_schema_error_fields_and_caret():
    text = "f(int x,\n  int in) -> ()"
    with pytest.raises(SchemaError) as info:
        parse_schema(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.pos, err.lineno, err.colno) == (15, 2, 7)
    assert err.text == text
    assert err.expected == ("'!'", "'('", "'.'", "'?'", "'['", "a name")
    assert str(err) == (
        "expected a name, '(', '[', '.', '?' or '!' after 'int', got reserved word 'in' (line 2, column 7)\n"
        "    int in) -> ()\n"
        "        ^"
    )
    again = pickle.loads(pickle.dumps(err))
    assert (again.msg, again.pos, again.expected, str(again)) == (err.msg, err.pos, err.expected, str(err))


def test_end_of_input_is_reported_at_the_end():
    with pytest.raises(SchemaError) as info:
        parse_schema("f(int x")
    assert info.value.pos == 7 and info.value.msg.endswith("got end of input")


def test_non_string_input():
    with pytest.raises(TypeError):
        parse_schema(b"f() -> ()")  # type: ignore[arg-type]


HOSTILE = [
    "", " ", "\n", "(", ")", "->", "f", "f(", "f()", "f() ->", "f() -> (", "f(*", "f(...", "f(int x=",
    "f(int x=[", "f(int x=[1,", "f(Tensor(", "f(Tensor(a", "f(Tensor(a!", "f(Tensor(a ->", "f(Dict(",
    "f(str s='", 'f(str s="""', "f(str s='\\", "\x00", "\ud800", "f(int x) -> int\x0c", "f\\", "#", "# type:",
    "f(int x=0x) -> ()", "f(int x=1e) -> ()", "f(float x=0x1p) -> ()", "f(int[999999999999999999999] x) -> ()",
    "f(int x=99999999999999999999999999999999) -> ()", "f(float x=1e99999999999) -> ()",
    "f(float x=1e-99999999999) -> ()", "f(float x=0e99999999999) -> ()",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_raises_only_schema_error(text):
    try:
        schema = parse_schema(text)
    except SchemaError as e:
        assert 0 <= e.pos <= len(text)
        assert str(e)
    else:
        assert parse_schema(str(schema)) == schema


def test_deep_nesting_is_a_schema_error():
    for depth in (MAX_TYPE_DEPTH + 1, 10_000, 30_000):
        for text in (
            "f(" + "(" * depth + "int" + ")" * depth + " x) -> ()",
            "f(Tensor" + "[]" * depth + " x) -> ()",
            "f(" + "Dict(str, " * depth + "int" + ")" * depth + " x) -> ()",
            "f(" + "Future(" * depth + "int" + ")" * depth + " x) -> ()",
            "f() -> " + "Await(" * depth + "int" + ")" * depth,
        ):
            with pytest.raises(SchemaError) as info:
                parse_schema(text)
            assert info.value.msg == f"type nested deeper than {MAX_TYPE_DEPTH} levels"
    at_limit = "f(" + "(" * (MAX_TYPE_DEPTH - 1) + "int" + ")" * (MAX_TYPE_DEPTH - 1) + " x) -> ()"
    schema = parse_schema(at_limit)
    assert parse_schema(str(schema)) == schema and hash(schema) == hash(parse_schema(at_limit))


def test_constructing_a_too_deep_ast_fails_early():
    t = BaseType("int")
    for _ in range(MAX_TYPE_DEPTH - 1):
        t = ListType(t)
    with pytest.raises(ValueError, match="nested deeper"):
        ListType(t)


def test_flat_unions_and_optionals_do_not_nest():
    # Union(str, Union(str, ...)) flattens and T?? collapses, as in torch: no depth limit applies.
    text = "f(" + "Union(str, " * 5000 + "int" + ")" * 5000 + " x, Tensor" + "?" * 50_000 + " y) -> ()"
    assert str(parse_schema(text)) == "f(Union(int, str) x, Tensor? y) -> ()"


def test_long_inputs():
    n = 20_000
    many = "f(" + ", ".join(f"int a{i}" for i in range(n)) + ") -> ()"
    assert len(parse_schema(many).arguments) == n
    wide_alias = "f(Tensor(" + "|".join(f"a{i}" for i in range(n)) + ") x) -> ()"
    assert len(parse_schema(wide_alias).arguments[0].type.alias.before) == n
    long_default = "f(int[] x=[" + ", ".join("7" for _ in range(n)) + "]) -> ()"
    assert parse_schema(long_default).arguments[0].default.value == (7,) * n
    with pytest.raises(SchemaError):
        parse_schema("f(" + "(" * 100_000)


def test_import_does_not_load_torch_or_lark():
    # Parsing runs the generated tables (piece_by_piece_serialize/_tables): lark is needed only to regenerate them.
    code = (
        "import sys, piece_by_piece_serialize, piece_by_piece_serialize.schema as s\n"
        "assert 'torch' not in sys.modules and 'lark' not in sys.modules, sorted(sys.modules)\n"
        "s.parse_schema('f(int x) -> ()')\n"
        "s.parse_schema('f(int x,\\n int y) -> ()')\n"
        "for t in ('f(int x -> ()', 'f(int x) -> ()\\nx', 'f(in\\xe9 x) -> ()'):\n"
        "    try:\n"
        "        s.parse_schema(t)\n"
        "    except s.SchemaError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError(t)\n"
        "assert 'lark' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_ast_rejects_values_the_language_cannot_write():
    from piece_by_piece_serialize.schema import ComplexValue, FloatValue

    for make, message in (
        (lambda: FloatValue(float("inf")), "a float default must be finite, got inf"),
        (lambda: FloatValue(float("nan")), "a float default must be finite, got nan"),
        (lambda: ComplexValue(float("-inf")), "a complex default must be finite, got -infj"),
        (lambda: IntValue(2**63), "an int default must fit in 64 bits, got 9223372036854775808"),
    ):
        with pytest.raises(ValueError) as info:
            make()
        assert str(info.value) == message
