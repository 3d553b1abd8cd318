"""docs/custom_op.md shows real code: every ``python`` block runs on its own, in a fresh interpreter (each
block imports what it uses), and the graph node it shows is the one the tutorial's export gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "custom_op.md"


def _blocks(lang: str) -> list[str]:
    blocks, current, inside = [], [], None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if inside is None and line[:3] == "```":
            inside, current = line[3:].strip(), []
        elif inside is not None and line == "```":
            if inside == lang:
                blocks.append("\n".join(current))
            inside = None
        elif inside is not None:
            current.append(line)
    return blocks


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_block_runs_on_its_own(index: int) -> None:
    code = _blocks("python")[index]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]


def test_the_graph_node_shown_is_the_real_one() -> None:
    tutorial = _blocks("python")[0]
    probe = tutorial + (
        "\nnode = next(n for n in program.graph.nodes if n.name == 'model__layers__0')"
        "\nprint(f'%{node.name} = {node.target}([{len(node.args[0])} tensors],')"
        "\nprint(f'    {node.args[1]!r})')"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    shown = next(block for block in _blocks("") if block.startswith("%model__layers__0"))
    assert out.stdout.strip() == shown.replace('"', "'").strip() or out.stdout.strip() == shown.strip()
