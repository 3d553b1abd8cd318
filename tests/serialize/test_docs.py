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
