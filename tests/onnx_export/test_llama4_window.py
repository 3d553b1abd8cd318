"""Llama 4's decode step (issue 31) past its attention chunk, exported automatically, saved and loaded, and through
``to_onnx`` and onnxruntime, equal to eager at sizes the export never saw. Its sliding cache keeps at most 15 keys
and counts every position; the chunked mask branches on whether the count reached the chunk (16). With an example
past the chunk the automatic search cuts ``model`` (Llama4TextModel), which gets a program on each side of the
branch (programs by size), and the cache's keys come back capped at 15 (a learned shape rule, Note [learned
shapes]). The points of the declared ranges, moved from every example, give it a program for more than one new token
past the chunk and one for a call that crosses it (Note [points of every example]); the points at the edges of its
domains one for calls ending one short of the chunk and two for one token after 13 and 14 past (Note [edges of a
domain]): every call of those sizes computes, in the loaded archive, a fresh process and onnxruntime alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece  # noqa: E402


TESTS = Path(__file__).resolve().parent.parent
# the archive in a fresh interpreter: the largest difference from eager over the calls, or the error a call raised
_FRESH = r"""
import json
import sys
sys.path.insert(0, sys.argv[1])
import _tiny_models as tiny
from _onnx_compare import eager_outputs
from piece_by_piece_serialize import load_piece_by_piece
model = tiny.llama4()
loaded = load_piece_by_piece(sys.argv[2])
for batch, past, new in json.loads(sys.argv[3]):
    args, kwargs = (tiny.ids(new, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}
    try:
        got = eager_outputs(loaded, args, kwargs)
    except ValueError as exc:
        print(json.dumps(str(exc)))
        continue
    want = eager_outputs(model, args, kwargs)
    assert [g.shape for g in got] == [w.shape for w in want] and [g.dtype for g in got] == [w.dtype for w in want]
    print(json.dumps(max((g.double() - w.double()).abs().max().item() for g, w in zip(got, want) if w.numel())))
"""


def _close(got: list[object], want: list[object]) -> None:
    assert [tuple(t.shape) for t in got] == [tuple(t.shape) for t in want]  # type: ignore[attr-defined]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_llama4_decode_step_past_its_chunk_exports_loads_and_converts(tmp_path: Path) -> None:
    model = tiny.llama4()
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    other.add((tiny.ids(1, 2),), {"cache": tiny.prefill(model, 20, batch=2)[1]})  # past the chunk: 15 keys, count 20
    result = export_piece_by_piece(model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other)
    assert result.report.passed is True and result.report.behind_operators == ["model"]
    # the examples give a program below the chunk and one past it for a new token; the points of the declared ranges
    # moved from every example give one past it for more than one, and one crossing it (Note [points of every example]);
    # the points at the edges of their domains three more (Note [edges of a domain])
    assert "7 programs by size" in (result.pieces["model"].by_size or "")
    assert "moved from every example (a piece has programs by size; 3 of them at the edges of their domains)" in str(result.report)
    result.save(tmp_path / "llama4.pt2")
    result.to_onnx(tmp_path / "llama4.onnx")
    # (batch, past positions, new tokens): below the chunk, crossing it within the call, 30 past it (the count 31
    # where keys stay 15), and 2 and 4 new tokens past it, which no example took; 15 positions after the call, one
    # short of the chunk (12 + 3, 10 + 5, 14 + 1), and one token after 13 past, sides of branches only the edges of
    # the domains reach (each was refused by name before)
    cases = ((1, 6, 2), (4, 11, 3), (1, 14, 3), (2, 30, 1), (3, 40, 2), (2, 20, 4), (2, 12, 3), (1, 10, 5), (2, 14, 1), (3, 13, 1))
    unseen = [((tiny.ids(new, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}) for batch, past, new in cases]
    wanted = [eager_outputs(model, args, kwargs) for args, kwargs in unseen]
    for (args, kwargs), want in zip(unseen, wanted, strict=True):  # the export's own runnable program
        _close(eager_outputs(result.module(), args, kwargs), want)
    result.close()
    loaded = load_piece_by_piece(tmp_path / "llama4.pt2")
    try:
        for (args, kwargs), want in zip(unseen, wanted, strict=True):  # a copy of the call each time: the cache is used again
            _close(eager_outputs(loaded, args, kwargs), want)
            _close(run_onnx(tmp_path / "llama4.onnx", args, kwargs), want)
    finally:
        loaded.close()
    # the same calls, the archive loaded in a fresh process
    out = subprocess.run([sys.executable, "-c", _FRESH, str(TESTS), str(tmp_path / "llama4.pt2"), json.dumps(cases)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    diffs = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(diffs) == len(cases) and all(isinstance(d, float) and d <= 1e-4 for d in diffs), diffs


@pytest.mark.slow
def test_with_its_decoder_layers_as_classes_the_refusal_names_the_module_to_add() -> None:
    """With ``classes=`` the decoder layers: the mask's branch on the count is in Llama4TextModel's own forward, in the
    program, which refuses the example past the chunk by its guard. The error names that module, the guard and the
    line; adding the module to the classes, as it says, gives an export that passes (Note [guards on a hint])."""
    from transformers.models.llama4.modeling_llama4 import Llama4TextDecoderLayer, Llama4TextModel

    from piece_by_piece_serialize.export import ExportMismatchError

    model = tiny.llama4()
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    other.add((tiny.ids(1, 2),), {"cache": tiny.prefill(model, 20, batch=2)[1]})
    args, kwargs = (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}
    with pytest.raises(ExportMismatchError) as failed:
        export_piece_by_piece(model, args, kwargs, dynamic_shapes=other, classes=Llama4TextDecoderLayer)
    first = str(failed.value).splitlines()[0]
    assert "as model (Llama4TextModel), not behind an operator with classes=(Llama4TextDecoderLayer)" in first
    assert " in get_mask_sizes; " in first and first.endswith("add Llama4TextModel to classes, or pass classes=None to find the cut automatically")
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=other, classes=(Llama4TextDecoderLayer, Llama4TextModel))
    assert result.report.passed is True and result.report.behind_operators == ["model"]
    x, cache = (tiny.ids(1, 2, 9),), {"cache": tiny.prefill(model, 30, batch=2)[1]}
    torch.testing.assert_close(eager_outputs(result.module(), x, cache), eager_outputs(model, x, cache), rtol=0, atol=1e-5)
    result.close()
