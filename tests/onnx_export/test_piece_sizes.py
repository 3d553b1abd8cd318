"""A piece's own program checked at the sizes of each call (Note [a piece's own sizes] in onnx_export, Note [one
check of the sizes] in artifact): a piece whose module branches on a size, cut with ``classes=``, keeps the guard
of its branch in its program; the top program's guards do not say it. The ONNX file computed the other branch's
sizes with this one, and nothing said so; the file and the loaded archive now refuse them by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import _toy_models as toy  # noqa: E402
from _onnx_compare import written  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece  # noqa: E402

# In a fresh interpreter: the archive loaded, each size's output or the start of its refusal, as JSON
_FRESH = r"""
import json, sys
import torch
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[1])
out = {}
for rows in (2, 4, 15, 16, 20):
    try:
        out[rows] = loaded(torch.arange(rows * 4, dtype=torch.float32).reshape(rows, 4)).tolist()
    except ValueError as exc:
        out[rows] = str(exc).partition(": ")[2][:80]
print(json.dumps(out))
"""


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = toy.Below16()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 1


def test_the_file_and_the_archive_refuse_the_sizes_a_pieces_own_guards_refuse(tmp_path: Path) -> None:
    more = torch.export.AdditionalInputs()
    more.add((torch.randn(5, 4),))
    model = Outer()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=more, classes=[toy.Below16])
    assert result.report.passed and result.pieces["inner"].program is not None  # checked at 1, 2, 4 and 7 rows
    exported = result.module()  # the top program, its piece run by its module: eager's values at every size
    for rows in (2, 4, 15, 16, 20):
        x = torch.randn(rows, 4)
        assert torch.equal(exported(x), model(x))
    session, loaded = written(result, tmp_path, "outer")
    for rows in (2, 4, 15):
        x = torch.randn(rows, 4)
        (got,) = session.run(None, {"x": x.numpy()})
        assert torch.equal(torch.from_numpy(got), model(x)) and torch.equal(loaded(x), model(x))
    for rows in (16, 20):  # the file returned x * 2 + 1 here, where eager gives x * 3 + 1
        with pytest.raises(Exception, match=r"refused: inner was not exported for these input sizes"):
            session.run(None, {"x": torch.ones(rows, 4).numpy()})
        with pytest.raises(ValueError, match=rf"the program of inner was not exported for these input sizes \({rows}x4\)") as refused:
            loaded(torch.ones(rows, 4))
        # the first condition that refuses (before: every condition of the domain, one per weight's size too)
        assert f"its ranges refuse them, (in0.size(0) <= 15) is false at in0.size(0)={rows} (inputs numbered from 0: these)" in str(refused.value)
    loaded.close()
    fresh = subprocess.run([sys.executable, "-c", _FRESH, str(tmp_path / "outer.pt2")], capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    got = json.loads(fresh.stdout.splitlines()[-1])
    for rows in (2, 4, 15):
        assert torch.equal(torch.tensor(got[str(rows)]), model(torch.arange(rows * 4, dtype=torch.float32).reshape(rows, 4)))
    for rows in (16, 20):  # refused by name there too
        assert got[str(rows)].startswith(f"the program of inner was not exported for these input sizes ({rows}x4)")


def test_a_loaded_call_is_checked_by_the_programs_domains_not_by_torchs_own_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [one check of the sizes]: torch's check of a module's inputs, in sympy, was most of a loaded call's time;
    the domains hold the same conditions, and a loaded call runs only them."""
    import torch._export.utils as export_utils

    more = torch.export.AdditionalInputs()
    more.add((torch.randn(5, 4),))
    result = export_piece_by_piece(Outer(), (torch.randn(3, 4),), dynamic_shapes=more, classes=[toy.Below16])
    result.save(tmp_path / "outer.pt2")
    result.close()
    loaded = load_piece_by_piece(tmp_path / "outer.pt2")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch's own check of the inputs ran")

    monkeypatch.setattr(export_utils, "_check_input_constraints_for_graph", refuse)
    x = torch.randn(7, 4)
    assert torch.equal(loaded(x), x * 2 + 1)
    with pytest.raises(ValueError, match="outside those the program was exported for.*: input 0 has 3 dimensions where the program takes 2"):
        loaded(torch.randn(7, 4, 1))  # a rank no condition of sizes would see: the domain checks ranks too
    loaded.close()
