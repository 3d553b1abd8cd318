"""All four languages run on the engine (``_lalr``) from the generated tables: lark is for building tables and tests.

A fresh process imports the package, decodes a first ``deserialize_args`` call and parses every language (valid and
malformed text, so the error paths run too) without importing lark. The type-info callbacks check what the grammar
cannot say while the engine parses, so a text with a syntax error after a failed check must still report the syntax
error (Note [syntax errors first] in ``type_info/_transform.py``), as when lark parsed the whole text first.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from piece_by_piece_serialize import parse_type_info
from piece_by_piece_serialize.errors import TreeSpecNameError

_FIRST_USE = """
import sys
import piece_by_piece_serialize
loaded = [sorted(m for m in sys.modules if m.split(".")[0] == "lark")]
import torch
from piece_by_piece_serialize import deserialize_args, parse_schema, parse_type_info, tree_spec_from_name
from piece_by_piece_serialize.cli._structure import parse_structure
from piece_by_piece_serialize.type_info._transform import is_cache_name
x = torch.ones(2)
assert len(deserialize_args([x, x, x, x], ["Tensor", "list__2", "dict__1_a"])) == 3
loaded.append(sorted(m for m in sys.modules if m.split(".")[0] == "lark"))
parse_type_info("WithCaches__1_DynamicCache_2D___v1_D_logits_X_cache_X_E")
parse_type_info("EncoderDecoderCache__DynamicCache_On_5S512_D__StaticCache_2T64")
parse_schema("a::b(Tensor x) -> Tensor")
from piece_by_piece_serialize import tree_spec_as_name
import torch.utils._pytree as pytree
spec = pytree.tree_flatten({"a": (x, [x])})[1]
assert tree_spec_from_name(tree_spec_as_name(spec, 2))[1] == spec
parse_structure("((*, *), {'a': *})")
assert is_cache_name("MyCache") and not is_cache_name("Mine")
from piece_by_piece_serialize.sym_expr import parse_sym_expr, read_sym_expr
assert str(read_sym_expr("Mul(Integer(4), Pow(Symbol('s13', positive=True, integer=True), Integer(2)))")) == "4*s13**2"
for bad, parse in [("dict__2_a", parse_type_info), ("DynamicCache_Z", parse_type_info), ("(*", parse_structure),
                   ("a::b(", parse_schema), ("___v1_Q", tree_spec_from_name), ("{'a': *, 'a': *}", parse_structure),
                   ("Pow(Integer(10), Integer(100000000))", parse_sym_expr), ("Add(Integer(1)", parse_sym_expr)]:
    try:
        parse(bad)
    except ValueError:
        pass
    else:
        raise AssertionError(bad)
loaded.append(sorted(m for m in sys.modules if m.split(".")[0] == "lark"))
print(loaded)
"""


def test_first_decode_and_every_language_run_without_lark() -> None:
    out = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[], [], []]", out.stdout + out.stderr


@pytest.mark.parametrize(
    ("text", "msg", "pos"),
    [
        # the cache name is refused as its rule is reduced, but "__" cannot follow a cache at all
        ("EncooderDecoderCache_W128_D__2D", "expected end of input, got '__'", 27),
        # the layer kind 'Z' is refused as its group is reduced, before the parser meets the "__"
        ("DynamicCache_Z_D__", "expected end of input, got '__'", 16),
    ],
    ids=["unknown_cache_then_dunder", "unknown_layer_kind_then_dunder"],
)
def test_a_syntax_error_is_reported_before_an_earlier_failed_check(text: str, msg: str, pos: int) -> None:
    with pytest.raises(TreeSpecNameError) as info:
        parse_type_info(text)
    assert (info.value.msg, info.value.pos, info.value.expected) == (msg, pos, ("end of input",))


def test_without_a_syntax_error_the_first_failed_check_is_reported() -> None:
    with pytest.raises(TreeSpecNameError) as info:
        parse_type_info("DynamicCache_Z_D")
    assert info.value.msg.startswith("unknown layer kind 'Z'; the kinds are D (DynamicLayer), ")
    assert info.value.pos == 13
