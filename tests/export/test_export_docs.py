"""docs/export.md shows real code and a real report.

Its first block, the one call on a tiny Qwen3-Next, runs here in-process: it asserts the program equals eager at
lengths 3, 11 and 70 itself, and the report it prints must be the one the page shows, times aside. The result is
then checked in detail: exactly the three linear-attention blocks are behind operators, why, and everything
else is in the graph; none has a program of its own, and the archive needs their class. The other blocks run
each in a fresh interpreter, in order, in one folder: the artifact one saves, the next loads in another process,
and prints what the page shows.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from piece_by_piece_serialize.export import PieceStatus  # noqa: E402

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "export.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def _normal(text: str) -> list[str]:
    """Lines with times masked and runs of spaces made one (column widths follow the times)."""
    return [re.sub(r" +", " ", re.sub(r"\d+\.\d+ s\b", "_ s", line)).rstrip() for line in text.strip().splitlines()]


def test_the_qwen3_next_example_prints_the_report_shown_and_cuts_only_the_linear_attention(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs_example__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_blocks("python")[0], str(DOC), "exec"), namespace)  # the page's code, as a reader runs it
    assert _normal(out.getvalue()) == _normal(_blocks("text")[0])
    result, model = namespace["result"], namespace["model"]
    cut = [f"model.layers.{i}.linear_attn" for i in range(3)]
    assert result.report.behind_operators == cut
    for path in cut:
        piece = result.pieces[path]
        assert piece.status is PieceStatus.BEHIND_OPERATOR and type(model.get_submodule(path)) is piece.module_class
        assert piece.failure is not None and piece.failure.kind == "dynamic dimension constraint violated"
        assert piece.failure.detail.startswith("guard ") and "false at seq=" in piece.failure.detail
        assert piece.max_abs_diff == 0 and piece.checked_calls == 2
    in_graph = [p for p, piece in result.pieces.items() if piece.status is PieceStatus.IN_GRAPH]
    assert "model.layers.3" in in_graph and "model.layers.0.mlp" in in_graph and "lm_head" in in_graph
    assert [a.failure is None for a in result.report.attempts] == [False, True]
    nodes = [str(n.target) for n in result.program.graph.nodes if n.op == "call_function" and "linear_attn" in str(n.target)]
    assert len(nodes) == 3
    _the_artifact_needs_the_linear_attention_modules(result, model, tmp_path)


def _the_artifact_needs_the_linear_attention_modules(result: Any, model: Any, tmp_path: Path) -> None:
    """The three pieces have no program of their own (automatic mode exports each piece alone, but not one cut for
    a guard of its own code: alone, from its calls at lengths 6 and 8, its program differs at 65), and the report
    says why; they have programs by size, which the archive carries: it loads without their class, equal to the
    model. Given the class (rebuilt from the stored state, which needs its submodule's class too) or the modules,
    the load is equal again."""
    from piece_by_piece_serialize import ArtifactError, load_piece_by_piece

    cut = result.report.behind_operators
    for path in cut:
        own = result.pieces[path].own_export_failure
        assert result.pieces[path].program is None and own is not None and own.kind == "dynamic dimension constraint violated"
        assert own.message == "not exported alone: the guard that cut it is in its own code"
        assert (result.pieces[path].by_size or "").startswith("3 programs by size")
    assert "- own program: none (dynamic dimension constraint violated: not exported alone" in result.report.to_markdown()
    result.save(tmp_path / "qwen3-next.pt2")
    result.close()
    piece_class = type(model.get_submodule(cut[0]))
    with pytest.raises(ArtifactError, match=r"\(its submodule norm\) is a .*Qwen3NextRMSNormGated: pass that class in implementations="):
        load_piece_by_piece(tmp_path / "qwen3-next.pt2", implementations=[piece_class])
    norm_class = type(model.get_submodule(cut[0]).norm)
    for given in ((), [piece_class, norm_class], {p: model.get_submodule(p) for p in cut}):  # none; classes rebuilt; instances
        loaded = load_piece_by_piece(tmp_path / "qwen3-next.pt2", implementations=given)
        for n in (3, 11, 70):
            x = torch.randint(0, 64, (2, n), generator=torch.Generator().manual_seed(n))
            with torch.no_grad():
                got = loaded(x, attention_mask=torch.ones_like(x), use_cache=False).logits
                want = model(x, attention_mask=torch.ones_like(x), use_cache=False).logits
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        loaded.close()


def test_the_other_blocks_run_each_in_a_fresh_interpreter_in_order(tmp_path: Path) -> None:
    """Each block in its own process, in the page's order, in one folder: the artifact the save block writes is
    loaded by the next block in another process, and what that block prints is the text shown after it."""
    shown = {block.splitlines()[0]: block for block in _blocks("text")}
    for block in _blocks("python")[1:]:
        out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=900, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        if out.stdout.strip():
            first = out.stdout.strip().splitlines()[0]
            assert out.stdout.strip() == shown[first].strip()
