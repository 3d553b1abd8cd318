"""Every grammar in grammars/ builds as an LALR parser with ``strict=True``.

Run-time parsers are built without strict mode (see ``_grammar.build_parser``), so this test is where a
new shift/reduce or reduce/reduce conflict, or two terminals that can match the same text, fails loudly.
"""

from __future__ import annotations

import pytest

from piece_by_piece_serialize._lalr.grammar import build_parser, grammar_dir

GRAMMARS = sorted(p.stem for p in grammar_dir().glob("*.lark"))


def test_grammar_folder_is_not_empty() -> None:
    assert {"schema", "treespec_name", "type_info"} <= set(GRAMMARS)


@pytest.mark.parametrize("name", GRAMMARS)
def test_grammar_builds_strict(name: str) -> None:
    parser = build_parser(name, strict=True)
    assert parser.options.parser == "lalr"
    assert parser.terminals, f"{name}: no terminals"
