"""Property: arbitrary text -- random characters, and registered schemas with random slices cut, doubled or
replaced -- either parses to a schema whose printed form is a fixed point, or raises SchemaError (never another
exception), with a position inside the text."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import parse_schema

REGISTERED = sorted(str(s) for s in torch._C._jit_get_all_schemas())
ALPHABET = st.sampled_from(list("()[]<>{},.:;=*?!|-+#'\"\\ \t\n\r\x0c\x00_aTxj019eE") + ["->", "...", "é", "\u2028"])


def check(text: str) -> None:
    try:
        schema = parse_schema(text)
    except SchemaError as e:
        assert 0 <= e.pos <= len(text)
        assert e.lineno >= 1 and e.colno >= 1
        assert str(e).count("\n") == 2
        return
    printed = str(schema)
    again = parse_schema(printed)
    assert again == schema and str(again) == printed


@given(st.text(max_size=60) | st.lists(ALPHABET, max_size=40).map("".join))
def test_random_text(text: str):
    check(text)


@given(
    st.sampled_from(REGISTERED),
    st.integers(0, 400),
    st.integers(0, 40),
    st.lists(ALPHABET, max_size=4).map("".join),
)
def test_mutated_registered_schemas(text: str, at: int, length: int, insert: str):
    at = min(at, len(text))
    check(text[:at] + insert + text[at + length :])
