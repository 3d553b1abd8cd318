"""docs/serialization.md shows real code and real output: run the example and compare.

The example is the first ``python`` block after the ``serialization-example`` marker; its output is the
``text`` block that follows it. The doctest-like ``>>>`` blocks of the type-info section are checked
against the library too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from piece_by_piece_serialize.errors import TreeSpecNameError
from piece_by_piece_serialize.type_info import parse_type_info, pretty_type_info

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "serialization.md"


def _blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    blocks: list[tuple[str, str]] = []
    lang, body = None, []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if lang is None and line[:3] == "```":
            lang, body = line[3:].strip(), []
        elif lang is not None and line == "```":
            blocks.append((lang, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def test_worked_example_prints_what_the_doc_says() -> None:
    blocks = _blocks()
    code = next(body for lang, body in blocks if lang == "python")
    index = [body for _, body in blocks].index(code)
    expected = blocks[index + 1][1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == expected


def _session(prefix: str) -> tuple[str, str]:
    body = next(body for lang, body in _blocks() if lang == "text" and prefix in body)
    first, rest = body.split("\n", 1)
    return first, rest


def test_pretty_block() -> None:
    first, rest = _session('>>> print(pretty_type_info("DynamicCache_2D_S512"))')
    assert rest == pretty_type_info("DynamicCache_2D_S512")


def test_error_block() -> None:
    _, rest = _session('>>> parse_type_info("dict__2_a")')
    with pytest.raises(TreeSpecNameError) as err:
        parse_type_info("dict__2_a")
    assert rest == f"TreeSpecNameError: {err.value}"


def _example(marker: str) -> tuple[str, str]:
    """The python block after ``marker`` and the text block after it."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(marker)
    blocks = [(lang, body) for lang, body in _blocks() if body in text[start:]]
    code = next(body for lang, body in blocks if lang == "python")
    index = [body for _, body in blocks].index(code)
    return code, blocks[index + 1][1]


def test_registration_example_prints_what_the_doc_says() -> None:
    code, expected = _example("registration-example")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == expected


def test_item_error_block() -> None:
    torch = pytest.importorskip("torch")
    from piece_by_piece_serialize import deserialize_args

    _, rest = _session(">>> deserialize_args([torch.zeros(1, 2, 8, 4)] * 2")
    with pytest.raises(ValueError) as err:
        deserialize_args([torch.zeros(1, 2, 8, 4)] * 2 + [torch.tensor(0)], ["StaticCache_T4"])
    assert rest == f"ValueError: {err.value}"


def test_cache_table_lists_every_kind() -> None:
    """The table of cache spellings and the vocabulary of _cache_kinds.py are one fact: every built-in cache
    name and layer kind letter is in the table, beside its class."""
    from piece_by_piece_serialize.type_info._cache_kinds import cache_kinds, layer_kinds

    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("| spelling | class |") :]
    table = table[: table.index("\n\n")]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    cells = {cell.strip() for row in rows for cell in row}
    for kind in layer_kinds():
        if kind.like is None:
            head = f"`{kind.code}" + ("<n>" if kind.number else "")
            row = next((r for r in rows if r[0].strip().startswith(head + "`")), None)
            assert row is not None, f"layer kind {kind.code} is not in the table"
            assert kind.class_name in row[1], (kind.code, row)
    for cache in cache_kinds():
        if cache.like is None:
            assert any(cache.name in cell for cell in cells), f"cache {cache.name} is not in the table"
