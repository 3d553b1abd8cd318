"""Jamba's decode step with ``classes=`` its decoder layers, end to end: its Mamba layer's export alone is refused
(its reference scan loops over the sequence), so it gets programs by size; the archive loads in a fresh process
without ``implementations=`` and the ONNX file runs in onnxruntime, both equal to eager, cache in and out, at sizes
the export never saw (before stop 39: the ONNX conversion refused the layer, and the load needed its classes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

import _tiny_models as tiny  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
# (batch, past positions, new tokens) the export never saw: its examples are (2, 6, 3) and (3, 8, 2)
UNSEEN = ((4, 11, 3), (1, 6, 2), (2, 30, 1))

_LOAD = r"""
import json
import sys
sys.path.insert(0, sys.argv[1])
import torch
import _tiny_models as tiny
from _onnx_compare import eager_outputs
from piece_by_piece_serialize import load_piece_by_piece
model = tiny.jamba()  # the reference, built as the export's was; it imports the classes the archive names
loaded = load_piece_by_piece(sys.argv[2])  # no implementations=: every piece has its programs
worst = 0.0
for batch, past, new in json.loads(sys.argv[3]):
    args, kwargs = (tiny.ids(new, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}
    got, want = eager_outputs(loaded, args, kwargs), eager_outputs(model, args, kwargs)
    assert len(got) == len(want) and all(g.shape == w.shape and g.dtype == w.dtype for g, w in zip(got, want))
    worst = max(worst, *((g.double() - w.double()).abs().max().item() for g, w in zip(got, want) if w.numel()))
print(worst)
"""


@pytest.mark.slow
def test_jamba_step_with_classes_loads_fresh_and_runs_in_onnxruntime_equal_to_eager(tmp_path: Path) -> None:
    model = tiny.jamba()
    classes = tuple(dict.fromkeys(type(layer) for layer in model.model.layers))
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    result = export_piece_by_piece(model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other, classes=classes)
    assert result.report.passed is True
    mamba = result.pieces["model.layers.0"]
    # a program per number of new tokens: the examples' 3 and 2, and 1, the low end of the range
    assert mamba.program is None and (mamba.by_size or "").startswith("3 programs by size")
    assert result.pieces["model.layers.1"].program is not None
    result.save(tmp_path / "jamba-step.pt2")
    result.to_onnx(tmp_path / "jamba-step.onnx")
    result.close()
    out = subprocess.run([sys.executable, "-c", _LOAD, str(TESTS), str(tmp_path / "jamba-step.pt2"), json.dumps(UNSEEN)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    assert float(out.stdout.split()[-1]) <= 1e-5
    for batch, past, new in UNSEEN:
        args, kwargs = (tiny.ids(new, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}
        got, want = run_onnx(tmp_path / "jamba-step.onnx", args, kwargs), eager_outputs(model, args, kwargs)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, (batch, past, new)
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
