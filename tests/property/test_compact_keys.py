"""The compact dict-key rule of the type-info language, checked against the grammar's own ``KEY`` terminal.

Three places decide what a key of ``dict__N_k1__k2`` may be: the grammar's ``KEY`` terminal
(``grammars/type_info.lark``, the definition of the language), the node validator ``TensorDictInfo`` and the
writer ``serialize._compact_key``. They are kept apart on purpose (the writer also keeps type-info strings to
``[A-Za-z0-9_]``), so this file pins how they relate: writer ⊂ grammar = validator. Every key the writer spells
compactly is read back by the generated tables as one ``KEY`` token and round-trips; the validator accepts a key
exactly when the terminal matches it whole; and the writer's inclusion is strict. The terminal is the one in the
generated tables (``_lalr.tables.load``), the very pattern the engine runs, not a copy of it.
"""

from __future__ import annotations

import re
import string

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from piece_by_piece_serialize import type_as_str_with_info
from piece_by_piece_serialize._lalr.choice import Token
from piece_by_piece_serialize._lalr.tables import load
from piece_by_piece_serialize.serialize import _compact_key
from piece_by_piece_serialize.type_info import TensorDictInfo, parse_type_info
from piece_by_piece_serialize.type_info._transform import _engine


def _key_terminal() -> re.Pattern[str]:
    """``KEY`` as the generated tables spell it; every contextual scanner that has it must agree."""
    patterns = {regexp for terminals, _, _ in load("type_info")["scanners"] for name, regexp in terminals if name == "KEY"}
    assert len(patterns) == 1, patterns
    return re.compile(patterns.pop())


KEY = _key_terminal()
ASCII_KEY_CHARS = string.ascii_letters + string.digits + "_"

# Keys near the rule's edges (underscores at either end or doubled, keywords of the language, digits) mixed
# with arbitrary text; the writer's rule holds for a good part of the first two.
keys = st.one_of(
    st.text(alphabet=ASCII_KEY_CHARS, min_size=1, max_size=12),
    st.sampled_from(["Tensor", "None", "int", "O", "s", "0", "9", "list", "dict", "DynamicCache", "WithCaches",
                     "EncoderDecoderCache", "a_b", "_a", "a_", "a__b", "x1_2_y", "é", "a-b", "a.b", "a b"]),
    st.text(max_size=8),
)


def _key_tokens(text: str) -> list[Token]:
    """The tokens of the ``key`` rules in the parse of ``text`` by the generated tables (no AST checks)."""
    _, (node,) = _engine("shapes").parse(text)
    rule, children = node
    assert rule == "tensor_dict", node
    found = []
    for child in children:
        if isinstance(child, tuple):
            key_rule, (token,) = child
            assert key_rule == "key", child
            found.append(token)
    return found


@given(st.lists(keys, min_size=1, max_size=4, unique=True))
@example(["input_ids", "attention_mask", "Tensor", "0"])  # always run: the writer spells these compactly
def test_every_key_the_writer_spells_compactly_lexes_as_one_key_token_and_round_trips(drawn: list[str]) -> None:
    compact = [key for key in drawn if _compact_key(key)]
    for key in compact:
        assert KEY.fullmatch(key), key
    if not compact:
        return
    text = type_as_str_with_info({key: torch.zeros(1) for key in compact})
    assert text == f"dict__{len(compact)}_{'__'.join(compact)}"
    tokens = _key_tokens(text)
    assert [(t.type, t.value) for t in tokens] == [("KEY", key) for key in compact]
    assert parse_type_info(text) == TensorDictInfo(tuple(compact))
    assert str(parse_type_info(text)) == text


@given(keys)
def test_the_node_validator_accepts_exactly_the_keys_the_terminal_matches(key: str) -> None:
    try:
        TensorDictInfo((key,))
    except ValueError:
        accepted = False
    else:
        accepted = True
    assert accepted == bool(KEY.fullmatch(key)), key


def test_every_character_alone_is_a_key_for_the_terminal_exactly_when_the_validator_takes_it() -> None:
    # The terminal's \s and the validator's str.isspace() must agree on every code point, not only on the ones
    # hypothesis happens to draw.
    differ = [cp for cp in range(0x110000) if bool(KEY.fullmatch(chr(cp))) != (chr(cp) != "_" and not chr(cp).isspace())]
    assert differ == []


def test_the_writer_is_strictly_narrower_than_the_grammar() -> None:
    # Keys the language reads but the writer spells as a TreeSpec name instead, to keep type-info strings
    # identifier-safe.
    for key in ["é", "a-b", "a.b", "x:y"]:
        assert KEY.fullmatch(key) and not _compact_key(key), key
        assert parse_type_info(f"dict__1_{key}") == TensorDictInfo((key,))
        assert type_as_str_with_info({key: torch.zeros(1)}).startswith("___")
