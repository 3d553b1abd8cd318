"""docs/onnx.md shows real code: its blocks run each in a fresh interpreter, in the page's order, in one folder
(the second opens the model the first wrote), and what each prints is the text shown after it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "onnx.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_the_blocks_run_in_order_and_print_what_the_page_shows(tmp_path: Path) -> None:
    shown = {block.splitlines()[0]: block for block in _blocks("text")}
    python = _blocks("python")
    assert len(python) == 4
    for i, block in enumerate(python):
        script = tmp_path / f"block_{i}.py"  # a file, not -c: onnxscript reads a @script function's source
        script.write_text(block, encoding="utf-8")
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "Skipping constant folding" not in out.stderr  # the optimizer's notes on what it leaves are not shown
        printed = out.stdout.strip()
        assert printed == shown[printed.splitlines()[0]].strip()
