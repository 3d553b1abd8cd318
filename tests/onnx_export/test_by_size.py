"""A piece with programs by size (Note [programs by size], Note [pieces by size]) through to_onnx: a toy that pads
its sequence to chunks of 4 only when it is not a multiple of 4, cut for that guard, exported per domain of sizes;
onnxruntime against eager over a grid of sizes the export did not see, and its refusal, by name, of the sizes no
program's domain holds for."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import _toy_models as toy  # noqa: E402
from _onnx_compare import written  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402

NAMED = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}


def _grid(session: Any, model: torch.nn.Module, message: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The sizes (batch 1 to 3, 1 to 24 tokens) onnxruntime computes equal to eager, and those it refuses by name."""
    equal, refused = [], []
    for batch in (1, 2, 3):
        for seq in range(1, 25):
            x = torch.randn(batch, seq, 8)
            try:
                (got,) = session.run(None, {"x": x.numpy()})
            except Exception as exc:  # onnxruntime's error names the node that refuses
                assert message in str(exc)
                refused.append((batch, seq))
                continue
            with torch.no_grad():
                torch.testing.assert_close(torch.from_numpy(got), model(x), rtol=1e-5, atol=1e-5)
            equal.append((batch, seq))
    return equal, refused


def test_a_piece_by_size_runs_in_onnxruntime_where_a_domain_holds_and_is_refused_by_name_elsewhere(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = toy.Chunked().eval()
    result = export_piece_by_piece(model, (torch.randn(2, 5, 8),), dynamic_shapes=NAMED)
    piece = result.pieces["chunks"]
    assert piece.program is None and piece.passed
    # from the examples' calls (5 tokens, and 7 in the one made from it) and the points of the declared ranges (seq 1,
    # seq 16); no size between the examples' is a multiple of 4, so the domains' edges give none (Note [edges of a domain])
    assert piece.by_size == "3 programs by size (from calls at 2x5x8; 2x1x8; 2x16x8)"
    assert "3 programs by size" in str(result.report)
    path = tmp_path / "chunked.onnx"
    written = result.to_onnx(path)
    assert written.piece_diffs["chunks"] < 1e-6 and written.model_diff < 1e-6
    assert sorted(written.functions) == [f"chunks__size{i}" for i in range(3)]
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    equal, refused = _grid(session, model, "refused: chunks has no program for these input sizes (it has 3 by size")
    # 2, 3 and 4 tokens are the sizes no domain holds for, below the examples' and never seen
    assert refused == [(b, s) for b in (1, 2, 3) for s in (2, 3, 4)] and len(equal) == 63


def test_the_edges_of_the_domains_give_a_program_to_a_size_between_the_examples(tmp_path: Path) -> None:
    # from 3 tokens (and 5, in the example made from it), the guard on the padding changes at 4, between them: the
    # piece gets a program there (Note [edges of a domain]), and every size of the grid computes (4 was refused)
    torch.manual_seed(0)
    model = toy.Chunked().eval()
    result = export_piece_by_piece(model, (torch.randn(2, 3, 8),), dynamic_shapes=NAMED)
    assert result.pieces["chunks"].by_size == "5 programs by size (from calls at 2x3x8; 4x5x8; 2x1x8; 2x16x8; 2x4x8)"
    assert "(a piece has programs by size; 1 of them at the edges of their domains)" in str(result.report)
    written = result.to_onnx(tmp_path / "chunked.onnx")
    assert written.piece_diffs["chunks"] < 1e-6 and written.model_diff < 1e-6
    session = onnxruntime.InferenceSession(str(tmp_path / "chunked.onnx"), providers=["CPUExecutionProvider"])
    equal, refused = _grid(session, model, "refused:")
    assert refused == [] and len(equal) == 72


class _Twice(torch.nn.Module):
    """Two identical pieces that pad to chunks of 4, one after the other."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.first = toy.PadToFour()
        self.second = toy.PadToFour()

    def forward(self, x: object) -> object:
        return self.second(self.first(self.lin(x)) * 0.5)


def test_identical_pieces_by_size_share_their_programs_and_one_function(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = _Twice().eval()
    with caplog.at_level(logging.INFO, logger="piece_by_piece_serialize.export"):
        result = export_piece_by_piece(model, (torch.randn(2, 5, 8),), dynamic_shapes=NAMED)
    assert result.report.behind_operators == ["first", "second"]
    assert "piece second: the programs by size of first" in caplog.text  # checked on its calls, not exported again
    # at the points of the declared ranges, first gets programs for the sizes none holds for, and second takes them
    assert "piece first: a program by size for seq=16" in caplog.text and "piece second: a program by size for" not in caplog.text
    assert result.pieces["first"].by_size == result.pieces["second"].by_size
    written = result.to_onnx(tmp_path / "twice.onnx")
    # one function per program, each called for both pieces; one function by size for both
    assert all(paths == ["first", "second"] for paths in written.functions.values()) and len(written.functions) == 3
    import onnx

    by_size = [f.name for f in onnx.load(str(tmp_path / "twice.onnx"), load_external_data=False).functions if f.name.endswith("__by_size")]
    assert by_size == ["first__by_size"]
    session = onnxruntime.InferenceSession(str(tmp_path / "twice.onnx"), providers=["CPUExecutionProvider"])
    for batch, seq in ((1, 6), (2, 7), (3, 12), (2, 21)):
        x = torch.randn(batch, seq, 8)
        (got,) = session.run(None, {"x": x.numpy()})
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(got), model(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match=r"refused: first \(or one of 1 pieces identical to it\) has no program for these input sizes"):
        session.run(None, {"x": torch.randn(2, 4, 8).numpy()})


def test_the_file_and_the_archive_refuse_the_sizes_the_programs_guards_refuse(tmp_path: Path) -> None:
    """Note [the file's sizes]: the program keeps its guard (rows < 16, from a hint: the export fails its verdict at
    16, and strict=False returns it); the ONNX file computed x * 2 at 16 and 20 rows where eager triples, and now
    refuses them by name; the archive refuses them too (torch runs a loaded program without its guards)."""
    more = torch.export.AdditionalInputs()
    more.add((torch.randn(5, 4),))
    result = export_piece_by_piece(toy.Below16(), (torch.randn(3, 4),), dynamic_shapes=more, strict=False)
    assert result.report.passed is False and any(r.startswith("at x dim 0=16 the program fails") for r in result.report.refused)
    session, loaded = written(result, tmp_path, "below")
    for rows in (2, 4, 15):
        x = torch.ones(rows, 4)
        (got,) = session.run(None, {"x": x.numpy()})
        assert (got == 2).all() and torch.equal(loaded(x), x * 2)
    for rows in (16, 20):
        with pytest.raises(Exception, match=r"refused: these input sizes are outside those the program was exported for"):
            session.run(None, {"x": torch.ones(rows, 4).numpy()})
        with pytest.raises(ValueError, match=rf"the sizes of this call \({rows}x4\) are outside those the program was exported for") as refused:
            loaded(torch.ones(rows, 4))
        # the condition that refuses, with the sizes it read (before: only the sizes of the call)
        assert f"(in0.size(0) <= 15) is false at in0.size(0)={rows} (inputs numbered from 0 as listed)" in str(refused.value)
    loaded.close()
