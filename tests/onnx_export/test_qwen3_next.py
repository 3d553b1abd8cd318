"""Qwen3-Next (issue 31) through ``to_onnx`` and onnxruntime, equal to eager at sizes the export never saw: a decode
step with the cache in and out, its decoder layers given by ``classes=``. Its gated delta-net runs the chunked rule
on the examples' 2 and 3 new tokens, and eager runs the recurrent one on the single token of the last case. The prefill
across a chunk of 64 (programs by size, each with the rule's 63 steps unrolled: minutes to export and convert) runs
in bench/families.py, automatically and with ``classes=``. onnxruntime is fed the call flattened by the library's
serializer, as in test_onnx.py."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402


@pytest.mark.slow
def test_qwen3_next_decode_step_in_onnxruntime_equals_eager_at_unseen_sizes(tmp_path: Path) -> None:
    model = tiny.qwen3_next(layers=2)  # a delta-net layer, then a full-attention one: the suite's time
    classes = tuple(dict.fromkeys(type(layer) for layer in model.model.layers))
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    result = export_piece_by_piece(model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other, classes=classes)
    assert result.report.passed is True
    assert all(result.pieces[p].program is not None for p in result.report.behind_operators)
    written = result.to_onnx(tmp_path / "qwen3-next.onnx")
    result.close()
    assert written.model_diff <= 1e-4
    # (batch, past positions, new tokens): one new token takes the recurrent rule, none of the examples did
    for batch, past, new in ((1, 6, 2), (4, 11, 3), (2, 30, 1)):
        args, kwargs = (tiny.ids(new, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}
        got, want = run_onnx(tmp_path / "qwen3-next.onnx", args, kwargs), eager_outputs(model, args, kwargs)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
