"""The structure-description language of `name encode` (grammars/structure.lark): parsed, never evaluated."""

from __future__ import annotations

import collections

import pytest

from piece_by_piece_serialize._lalr.grammar import build_parser
from piece_by_piece_serialize.cli._structure import LEAF, MAX_DEPTH, parse_structure
from piece_by_piece_serialize.errors import TreeSpecNameError

VALID = [
    ("*", LEAF),
    ("(*)", LEAF),
    ("()", ()),
    ("(*,)", (LEAF,)),
    ("(*, *)", (LEAF, LEAF)),
    ("(*, *,)", (LEAF, LEAF)),
    ("[]", []),
    ("[*, [*]]", [LEAF, [LEAF]]),
    ("((*, *), {'a': *})", ((LEAF, LEAF), {"a": LEAF})),
    ('{"x y": *, 0: *, -7: [*], None: (), True: {}}', {"x y": LEAF, 0: LEAF, -7: [LEAF], None: (), True: {}}),
    ("{'it\\'s': *, '\\u00e9': *}", {"it's": LEAF, "\u00e9": LEAF}),
    ("OrderedDict({'b': *, 'a': *})", collections.OrderedDict([("b", LEAF), ("a", LEAF)])),
    ("OrderedDict()", collections.OrderedDict()),
    (" [ *\n, * ] ", [LEAF, LEAF]),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[t for t, _ in VALID])
def test_valid(text, expected):
    got = parse_structure(text)
    assert got == expected
    assert type(got) is type(expected)


INVALID = [
    ("", "expected '(', '*', 'OrderedDict', '[' or '{', got end of input", 0),
    ("(*, *", "expected ')' or ',', got end of input", 5),
    ("(*,,)", "expected '(', ')', '*', 'OrderedDict', '[' or '{', got ','", 3),
    ("{'a' *}", "expected ':', got '*'", 5),
    ("{1: *, 1: *}", "duplicate dict key 1", 7),
    ("{1: *, True: *}", "duplicate dict key True", 7),
    ("__import__('os')", "expected '(', '*', 'OrderedDict', '[' or '{', got '_'", 0),
    ("[1]", "expected '(', '*', 'OrderedDict', '[', ']' or '{', got '1'", 1),
    # escapes Python refuses: the position of the key, never a bare ValueError or KeyError
    ("{'\\u0e9': *}", "invalid escape sequence in string key", 1),
    ("{'ok': *, 'a\\x4': *}", "invalid escape sequence in string key", 10),
    ("{'\\N{NO SUCH NAME}': *}", "invalid escape sequence in string key", 1),
]


@pytest.mark.parametrize(("text", "message", "pos"), INVALID, ids=[t or "<empty>" for t, _, _ in INVALID])
def test_invalid(text, message, pos):
    with pytest.raises(TreeSpecNameError) as info:
        parse_structure(text)
    assert info.value.msg == message
    assert info.value.pos == pos


def test_depth_is_bounded_without_recursion_error():
    assert parse_structure("[" * MAX_DEPTH + "*" + "]" * MAX_DEPTH) is not None
    deep = "[" * 10_000 + "*" + "]" * 10_000
    with pytest.raises(TreeSpecNameError) as info:
        parse_structure(deep)
    assert info.value.msg == f"structure nested deeper than {MAX_DEPTH} levels"


def test_grammar_builds_strict():
    assert build_parser("structure", strict=True) is not None
