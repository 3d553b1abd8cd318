"""Property (secondary): text generated from grammars/schema.lark itself.

``hypothesis.extra.lark.from_lark`` draws every terminal independently, so the word-like terminals are
constrained with ``explicit=`` to plausible spellings followed by a blank (two adjacent identifiers would
otherwise fuse into one). For each text: if we accept it, printing is a fixed point and torch accepts it too;
if we reject it (SchemaError only), torch rejects it too -- except the documented deliberate differences.
Nameless schemas (which only ``allow_nameless=True`` accepts, and torch never) are checked for the fixed point.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from piece_by_piece_serialize._lalr.grammar import grammar_text
from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import parse_schema


def _grammar():
    from lark import Lark

    return Lark(grammar_text("schema"), parser="lalr", lexer="basic")


def word(*choices: str):
    return st.sampled_from(choices).map(lambda s: s + " ")


EXPLICIT = {
    "IDENT": word("x", "self", "t", "int", "float", "bool", "str", "Scalar", "SymInt", "ScalarType", "Layout",
                  "Device", "Any", "Storage", "foo", "Mean", "float32", "strided", "a", "b", "ns", "op", "ov",
                  "torch", "classes", "quantized", "Conv2dPackedParamsBase", "Foo"),
    "NUMBER": word("0", "1", "2", "10", "1.5", ".5", "5.", "1e5", "1E5", "2j", "0x10", "2.5", "99999999999"),
    "STRING": word("'a'", '"cpu"', '"cuda:1"', "'\\101'", '"""q"""', "'\\n'", "''"),
    "TENSOR": word("Tensor"), "DICT": word("Dict"), "UNION": word("Union"), "FUTURE": word("Future"),
    "AWAIT": word("Await"), "RREF": word("RRef"), "TORCH_NS": word("__torch__"), "NONE": word("None"),
    "NONETYPE": word("NoneType"), "TRUE": word("True"), "FALSE": word("False"),
    "COMMENT": st.just("# c\n"), "WS": st.sampled_from([" ", "\t", "  "]),  # continuations: test_every_small_layout_agrees_with_torch
}  # fmt: skip

# Deliberate differences (docs/schema.md): we reject, torch accepts.
ACCEPTED_BY_TORCH = (
    "the index must be at most 127",
    "does not fit a 32-bit int",
    "at most 4096 are supported",
    "type nested deeper than",
    "cannot carry an alias annotation",
)


def torch_accepts(text: str) -> bool:
    try:
        torch._C.parse_schema(text)
    except Exception:  # RuntimeError, or ValueError/IndexError from std::stod/stoll
        return False
    return True


@given(from_lark(_grammar(), start="start", explicit=EXPLICIT))
def test_grammar_text_is_canonical_after_one_print_and_agrees_with_torch(text: str):
    try:
        schema = parse_schema(text, allow_nameless=True)
    except SchemaError as e:
        assert 0 <= e.pos <= len(text)
        if not any(rule in e.msg for rule in ACCEPTED_BY_TORCH):
            assert not torch_accepts(text), e.msg
        return
    printed = str(schema)
    again = parse_schema(printed, allow_nameless=True)
    assert again == schema
    assert str(again) == printed
    if schema.name.name:  # torch has no nameless form
        assert torch_accepts(text)
        assert torch_accepts(printed)
