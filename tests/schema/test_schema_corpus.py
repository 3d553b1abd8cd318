"""The schema corpus: ``tests/corpus/schema/valid/<case>.schema`` beside its canonical form ``<case>.canonical``,
``invalid/<case>.schema`` beside the exact ``str()`` of its SchemaError ``<case>.error``.

Every case is also checked against torch's own parser: valid cases must be accepted by
``torch._C.parse_schema`` and so must our canonical form (which must mean the same schema to torch), invalid
cases must be rejected by torch too -- except the documented deliberate differences, recognised by rule below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import parse_schema, torch_class_exists

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "schema"
VALID = sorted(CORPUS.glob("valid/*.schema"))
INVALID = sorted(CORPUS.glob("invalid/*.schema"))


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def expected(path: Path, suffix: str) -> str:
    return read(path.with_suffix(suffix))[:-1]  # the files end with one newline


def test_corpus_is_not_empty():
    assert len(VALID) >= 60
    assert len(INVALID) >= 100
    for path in VALID:
        assert path.with_suffix(".canonical").is_file(), path
    for path in INVALID:
        assert path.with_suffix(".error").is_file(), path


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_case(path: Path):
    text = read(path)
    canonical = expected(path, ".canonical")
    schema = parse_schema(text)
    assert str(schema) == canonical
    # canonical is a fixed point
    again = parse_schema(canonical)
    assert again == schema
    assert str(again) == canonical
    # torch accepts the input, and reads our canonical text as the same schema
    theirs = torch._C.parse_schema(text)
    assert torch._C.parse_schema(canonical) == theirs or _fresh_numbering_differs(text)
    assert [a.name for a in theirs.arguments] == list(schema.argument_names)
    assert [r.name or None for r in theirs.returns] == [r.name for r in schema.returns]


def _fresh_numbering_differs(text: str) -> bool:
    # torch numbers '!' shorthands $0, $1, ... counting also those it then drops (inside tuples, Dict, Future),
    # so the same written schema can number its sets differently; equality then fails on the names only.
    return "!" in text


# Deliberate differences (docs/schema.md): inputs torch accepts but we reject, recognised by our message.
ACCEPTED_BY_TORCH = (
    "the index must be at most 127",  # torch wraps the device index to int8 and prints cuda:-128
    "does not fit a 32-bit int",  # torch wraps int[N] to a negative size it cannot print back
    "at most 4096 are supported",  # int[N] x=v allocates N copies
    "cannot carry an alias annotation",  # Union(tuple, None)(a): torch annotates the optional tuple
)
# Inputs torch cannot be asked about: its recursive parser overflows the C stack near 5,000 levels; ours stops
# at 100 with a SchemaError (the corpus cases nest 150 deep, which torch does parse).
TORCH_ACCEPTS_DEEP = "type nested deeper than"


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_case(path: Path):
    text = read(path)
    with pytest.raises(SchemaError) as info:
        parse_schema(text)
    assert str(info.value) == expected(path, ".error")
    message = info.value.msg
    try:
        torch._C.parse_schema(text)
    except Exception:  # torch raises RuntimeError, ValueError or IndexError (stod/stoll) on bad input
        torch_accepts = False
    else:
        torch_accepts = True
    if any(rule in message for rule in ACCEPTED_BY_TORCH) or TORCH_ACCEPTS_DEEP in message:
        assert torch_accepts, "documented as accepted by torch; update docs/schema.md if torch changed"
    else:
        assert not torch_accepts


def test_registered_class_check_is_opt_in():
    text = "f(__torch__.torch.classes.nowhere.Nothing x) -> ()"
    assert str(parse_schema(text)) == "f(__torch__.torch.classes.nowhere.Nothing x) -> ()"
    with pytest.raises(SchemaError) as info:
        parse_schema(text, class_exists=torch_class_exists)
    assert info.value.msg == "unknown custom class type 'nowhere.Nothing' (register it with torch::class_ first)"
    assert info.value.pos == 2
    with pytest.raises(RuntimeError):
        torch._C.parse_schema(text)
    known = "f(__torch__.torch.classes.quantized.Conv2dPackedParamsBase p) -> ()"
    assert str(parse_schema(known, class_exists=torch_class_exists)) == known
