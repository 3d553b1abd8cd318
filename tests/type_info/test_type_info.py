"""The type-info language: golden corpus, canonical fixed point, legacy spellings, grammar strictness.

Corpus files live in ``tests/corpus/type_info/``: ``valid/<case>.ti`` beside ``<case>.canonical`` and
``<case>.pretty``; ``invalid/<case>.ti`` beside ``<case>.error`` (the exact ``str()`` of the error).
Each file's last newline is not part of its content.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from piece_by_piece_serialize._lalr.grammar import build_parser
from piece_by_piece_serialize.errors import TreeSpecNameError
from piece_by_piece_serialize.type_info import (
    MAX_CACHE_LAYERS,
    CacheInfo,
    EncoderDecoderCacheInfo,
    LayerInfo,
    LayerRun,
    NoneInfo,
    ScalarInfo,
    TensorDictInfo,
    TensorInfo,
    TensorListInfo,
    parse_type_info,
    pretty_type_info,
)

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "type_info"
VALID = sorted((CORPUS / "valid").glob("*.ti"))
INVALID = sorted((CORPUS / "invalid").glob("*.ti"))


def _read(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


def test_corpus_is_not_empty() -> None:
    assert len(VALID) >= 20
    assert len(INVALID) >= 20


def test_grammar_builds_strict() -> None:
    parser = build_parser("type_info", parser="lalr", strict=True)
    assert parser.parse("Tensor") is not None


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_canonical(path: Path) -> None:
    text = _read(path)
    info = parse_type_info(text)
    canonical = _read(path.with_suffix(".canonical"))
    assert str(info) == canonical
    # fixed point: the canonical spelling parses to the same AST and prints itself
    again = parse_type_info(canonical)
    assert again == info
    assert str(again) == canonical


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_pretty(path: Path) -> None:
    assert pretty_type_info(_read(path)) == _read(path.with_suffix(".pretty"))


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_message(path: Path) -> None:
    text = _read(path)
    with pytest.raises(TreeSpecNameError) as info:
        parse_type_info(text)
    assert str(info.value) == _read(path.with_suffix(".error"))
    assert isinstance(info.value, ValueError)
    assert 0 <= info.value.pos <= len(text)


def test_error_pickles() -> None:
    with pytest.raises(TreeSpecNameError) as info:
        parse_type_info("dict__2_a")
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.msg, again.pos, again.lineno, again.colno) == (
        info.value.msg,
        info.value.pos,
        info.value.lineno,
        info.value.colno,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tensor", TensorInfo()),
        ("None", NoneInfo()),
        ("bool", ScalarInfo("bool")),
        ("int", ScalarInfo("int")),
        ("float", ScalarInfo("float")),
        ("list__3", TensorListInfo(3)),
        ("dict__2_da__dm", TensorDictInfo(("da", "dm"))),
        ("DynamicCache__4", CacheInfo.of_layers([LayerInfo(), LayerInfo()])),
    ],
    ids=lambda v: str(v),
)
def test_legacy_strings_keep_their_meaning(text: str, expected: object) -> None:
    """Every spelling the original module wrote for a value it handled correctly still parses."""
    assert parse_type_info(text) == expected


def test_legacy_cache_and_new_spelling_are_one_ast() -> None:
    assert parse_type_info("DynamicCache__6") == parse_type_info("DynamicCache_3D")
    assert str(parse_type_info("DynamicCache__6")) == "DynamicCache_3D"


@pytest.mark.parametrize(
    "info",
    [
        CacheInfo(),
        CacheInfo.of_layers([LayerInfo("W", True, 512), LayerInfo("W", True, 512), LayerInfo(), LayerInfo("W", False, 512)]),
        EncoderDecoderCacheInfo(CacheInfo.of_layers([LayerInfo()] * 4), CacheInfo()),
        TensorDictInfo(("input_ids", "attention_mask", "a1")),
        TensorListInfo(0),
    ],
    ids=str,
)
def test_printer_round_trip(info: object) -> None:
    assert parse_type_info(str(info)) == info


def test_counts() -> None:
    assert parse_type_info("DynamicCache_2D_w4_W4").n_items == 6
    assert parse_type_info("EncoderDecoderCache_2D__3D").n_items == 10
    assert parse_type_info("dict__3_a__b__c").n_items == 3
    assert parse_type_info("None").n_items == 1


def test_layer_limit_is_checked_before_allocating() -> None:
    text = f"DynamicCache_{MAX_CACHE_LAYERS}D_D"
    with pytest.raises(TreeSpecNameError, match="at most MAX_CACHE_LAYERS"):
        parse_type_info(text)
    info = parse_type_info(f"DynamicCache_{MAX_CACHE_LAYERS}D")
    assert isinstance(info, CacheInfo)
    assert info.n_layers == len(info.layers) == MAX_CACHE_LAYERS
    assert info.runs == (LayerRun(MAX_CACHE_LAYERS, LayerInfo()),)


def test_cache_ast_is_run_length_canonical() -> None:
    layers = [LayerInfo(), LayerInfo(), LayerInfo("W", True, 8), LayerInfo("W", True, 8), LayerInfo("W", False, 8), LayerInfo()]
    info = CacheInfo.of_layers(layers)
    assert info.layers == tuple(layers)
    assert [run.count for run in info.runs] == [2, 2, 1, 1]
    assert parse_type_info("DynamicCache_D_D_W8_1W8_w8_D") == info
    with pytest.raises(ValueError, match="not canonical"):
        CacheInfo("DynamicCache", (LayerRun(1, LayerInfo()), LayerRun(1, LayerInfo())))
    with pytest.raises(ValueError, match="not canonical"):
        CacheInfo("DynamicCache", (LayerRun(0, LayerInfo()),))


def test_non_string_is_type_error() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        parse_type_info(3)  # type: ignore[arg-type]


def test_length_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from piece_by_piece_serialize import type_info

    monkeypatch.setattr(type_info, "MAX_TYPE_INFO_LENGTH", 2000)
    text = "dict__1_" + "k" * 3000
    with pytest.raises(TreeSpecNameError, match="too long .3008 characters, the limit is MAX_TYPE_INFO_LENGTH=2000"):
        parse_type_info(text)


def test_long_strings_are_not_cached() -> None:
    from piece_by_piece_serialize import type_info

    before = type_info._parse_small.cache_info().currsize
    long_key = "k" * 5000
    assert parse_type_info(f"dict__1_{long_key}") == TensorDictInfo((long_key,))
    assert type_info._parse_small.cache_info().currsize == before


@pytest.mark.parametrize(
    "build",
    [
        lambda: TensorDictInfo(()),
        lambda: TensorDictInfo(("a", "a")),
        lambda: TensorDictInfo(("a__b",)),
        lambda: TensorDictInfo(("_a",)),
        lambda: TensorDictInfo(("a b",)),
        lambda: TensorDictInfo((1,)),  # type: ignore[arg-type]
        lambda: TensorListInfo(-1),
        lambda: LayerInfo("S", True, 0),
        lambda: ScalarInfo("str"),
    ],
)
def test_ast_refuses_nodes_the_printer_cannot_spell(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


def test_importing_type_info_imports_neither_lark_nor_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import piece_by_piece_serialize.type_info as ti\n"
        "import piece_by_piece_serialize.serialize\n"
        "print(sorted(m for m in ('lark', 'torch', 'transformers') if m in sys.modules))\n"
        "ti.parse_type_info('DynamicCache_2D')\n"
        "print(sorted(m for m in ('lark', 'torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "[]"], out.stdout + out.stderr
