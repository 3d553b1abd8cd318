"""The walk stays linear: work counted, never timed (timings are in docs/cli.md, measured by hand).

Two deterministic measures. (1) The characters the C++ scanner's `str.find` calls look at, counted through
a `str` subclass: a fresh `find` per literal for a character the rest of the file does not hold would
rescan the whole file each time (quadratic; a 100,000-schema file never finished), so the count must stay
a small multiple of the file's length. (2) Python function calls made by `schema check` on one file of
each kind with 200, 400 and 600 schemas: equal steps of input must cost equal steps of calls.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from piece_by_piece_serialize.cli.sources import read_source
from piece_by_piece_serialize.cli import run


class CountingText(str):
    """A str whose find() adds up how many characters each call looked at."""

    scanned = 0

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo = 0 if start is None else start
        hi = len(self) if end is None else min(end, len(self))
        found = str.find(self, sub, lo, hi)
        CountingText.scanned += max(0, (found + len(sub) if found >= 0 else hi) - lo)
        return found


def cpp_file(n: int) -> str:
    # no apostrophe and no '/' anywhere after the first line: the characters a naive scan looks ahead for
    body = "".join(f'  m.def("op{i}(Tensor x, int y=1) -> Tensor");\n' for i in range(n))
    return "TORCH_LIBRARY(myops, m) {\n" + body + "}\n"


@pytest.mark.parametrize("n", [1000, 4000])
def test_cpp_scan_looks_at_each_character_a_bounded_number_of_times(n):
    text = CountingText(cpp_file(n))
    CountingText.scanned = 0
    source = read_source("ops.cpp", text, "cpp")
    assert len(source.sites) == n
    # three look-ahead characters, five callee names, the line index: each a pass over the text at most
    assert CountingText.scanned <= 12 * len(text), CountingText.scanned / len(text)


def count_calls(fn: Callable[[], Any]) -> int:
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


SOURCES = {
    "ops.cpp": lambda n: cpp_file(n),
    "ops.py": lambda n: "import torch\nlib = torch.library.Library('myops', 'DEF')\n"
    + "".join(f"lib.define('op{i}(Tensor x, int y=1) -> Tensor')  # pbp: ignore[misread-number]\n" for i in range(n)),
    "native.yaml": lambda n: "".join(f"- func: op{i}(Tensor self, int y=1) -> Tensor\n  variants: function\n" for i in range(n)),
    "ops.schema": lambda n: "".join(f"myops::op{i}(Tensor x, int y=1) -> Tensor\n" for i in range(n)),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_check_calls_grow_linearly(tmp_path, capsys, name):
    counts = []
    for n in (200, 400, 600):
        path = tmp_path / f"{n}" / name
        path.parent.mkdir()
        path.write_text(SOURCES[name](n), encoding="utf-8")
        run(["schema", "check", "--quiet", str(path)])  # warm: the parser's tables load on the first parse
        counts.append(count_calls(lambda: run(["schema", "check", "--quiet", str(path)])))
    capsys.readouterr()
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    assert abs(second - first) <= 0.05 * first, counts
