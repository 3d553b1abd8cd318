"""TreeSpec names: golden corpus files and the grammar itself.

``tests/corpus/treespec/valid/<case>.name`` sits beside ``<case>.pretty`` (the exact ``pretty_name`` output);
``invalid/<case>.name`` beside ``<case>.error`` (the exact ``str()`` of the ``TreeSpecNameError``). Each file's
last newline is not part of its content. Valid names that mention types of this test package (``corpus_inputs``)
or of torch/transformers are also decoded and re-encoded; two name types that exist nowhere and are only
pretty-printed.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import corpus_inputs  # noqa: F401  (registers the corpus types the golden names mention)
import pytest
from test_treespec_roundtrip import decode_cold

from piece_by_piece_serialize._lalr.grammar import build_parser
from piece_by_piece_serialize.errors import TreeSpecNameError
from piece_by_piece_serialize.treespec_name import pretty_name, tree_spec_as_name, tree_spec_from_name

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "treespec"
VALID = sorted((CORPUS / "valid").glob("*.name"))
INVALID = sorted((CORPUS / "invalid").glob("*.name"))
ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _read(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


def test_corpus_is_not_empty() -> None:
    assert len(VALID) >= 30
    assert len(INVALID) >= 35


def test_grammar_builds_strict() -> None:
    parser = build_parser("treespec_name", parser="lalr", strict=True)
    assert parser.parse("___v1_T_X2_E").data == "start"


def test_grammar_file_opens_with_a_comment() -> None:
    from piece_by_piece_serialize._lalr.grammar import grammar_text

    assert grammar_text("treespec_name").startswith("// TreeSpec names, format v1")


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_pretty(path: Path) -> None:
    name = _read(path)
    assert set(name) <= ALPHABET and name.startswith("___v1_")
    assert pretty_name(name) == _read(path.with_suffix(".pretty"))


@pytest.mark.parametrize("path", [p for p in VALID if "pretty_only" not in p.stem],
                         ids=[p.stem for p in VALID if "pretty_only" not in p.stem])
def test_valid_decodes_to_a_fixed_point(path: Path) -> None:
    name = _read(path)
    n, spec = decode_cold(name)
    assert n == spec.num_leaves
    assert tree_spec_as_name(spec, n) == name


@pytest.mark.parametrize("path", [p for p in VALID if "pretty_only" in p.stem],
                         ids=[p.stem for p in VALID if "pretty_only" in p.stem])
def test_unknown_types_pretty_print_but_do_not_decode(path: Path) -> None:
    with pytest.raises(TreeSpecNameError, match="^unknown "):
        tree_spec_from_name(_read(path))


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_exact_error(path: Path) -> None:
    name = _read(path)
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_from_name(name)
    assert str(info.value) == _read(path.with_suffix(".error"))
    err = info.value
    assert isinstance(err, ValueError)
    assert 0 <= err.pos <= len(name)
    assert err.lineno >= 1 and err.colno >= 1
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.pos == err.pos


def test_every_distinct_message_is_pinned() -> None:
    first_lines = {_read(p.with_suffix(".error")).split(" (line ")[0] for p in INVALID}
    assert len(first_lines) >= 30
