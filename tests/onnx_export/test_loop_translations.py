"""Prefills whose pieces loop in Python over their sequence, converted at every length with a translation.

Jamba's Mamba mixer scans its sequence one position at a time, MiniMax's lightning attention one block of positions
at a time, both in Python: torch.export unrolls the loop, so the automatic search cuts the piece and it gets a
program per length (docs/onnx.md, "Programs by size"). The ONNX file then refuses, by name, the lengths no program
holds; with the piece's translation (tests/_translations.py, an ONNX ``Loop``) it takes every length, equal to
eager in onnxruntime, and the archive runs the module at those lengths when its class is given. Outputs are
compared at every stage: eager, the export's own program, the loaded archive, onnxruntime.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import _tiny_models as tiny  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from _translations import jamba_mamba_mixer, minimax_lightning_attention  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)


def _call(batch: int, n: int, padded: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A prefill of ``n`` tokens, the first row's first ``padded`` positions padding (its mask 0 there)."""
    mask = torch.ones(batch, n, dtype=torch.long)
    mask[0, :padded] = 0
    return (tiny.ids(n, batch, 5),), {"attention_mask": mask, "use_cache": False}


TESTS = Path(__file__).resolve().parent.parent
_FRESH = r"""
import json
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/onnx_export"]
from transformers.activations import SiLUActivation
from transformers.models.jamba.modeling_jamba import JambaMambaMixer, JambaRMSNorm
import _tiny_models as tiny
from _onnx_compare import eager_outputs
from test_loop_translations import _call, _max_diff
from piece_by_piece_serialize import load_piece_by_piece
model = tiny.jamba()  # the reference, built as the export's was
loaded = load_piece_by_piece(sys.argv[2], implementations=[JambaMambaMixer, JambaRMSNorm, SiLUActivation])
print(max(_max_diff(eager_outputs(loaded, *_call(*case)), eager_outputs(model, *_call(*case))) for case in json.loads(sys.argv[3])))
"""

# (batch, tokens, padding of the first row): none of these lengths is the example's (6) or a range point's
UNSEEN = ((1, 3, 0), (4, 11, 0), (2, 20, 0), (3, 13, 4))


def _max_diff(got: list[Any], want: list[Any]) -> float:
    assert len(got) == len(want) and all(g.shape == w.shape and g.dtype == w.dtype for g, w in zip(got, want, strict=True))
    return max((g.double() - w.double()).abs().max().item() for g, w in zip(got, want, strict=True))


def _exported(model: Any, path: str, weights: tuple[str, ...], longest: int, classes: Any = None) -> tuple[Any, list[Any]]:
    """The export of the prefill from one example of 6 tokens (up to ``longest``), automatic or with ``classes``,
    its looping piece at ``path`` (programs by size, no program of its own, its weights named in the order a
    translation takes them), and the operators of the pieces of its class."""
    seq = torch.export.Dim("seq", min=2, max=longest)
    args, kwargs = _call(2, 6)
    shapes = {"input_ids": {0: BATCH, 1: seq}, "attention_mask": {0: BATCH, 1: seq}}
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes=classes)
    assert result.report.passed is True and path in result.report.behind_operators
    piece = result.pieces[path]
    assert piece.program is None and (piece.by_size or "").split(" programs by size")[0].isdigit(), piece.by_size
    assert piece.weights[: len(weights)] == weights
    operators = []
    for other in result.report.behind_operators:
        if result.pieces[other].module_class is piece.module_class:
            namespace, _, name = (result.pieces[other].operator or "").partition("::")
            operators.append(getattr(getattr(torch.ops, namespace), name).default)
    return result, operators


def _onnx_at_every_length(result: Any, model: Any, operators: list[Any], translation: Any, folder: Path) -> None:
    """The export's own program at every length (its pieces run their modules where no program holds); then the
    ONNX file: without the translation it refuses a length no program holds, by name; with it (keyed by each of
    ``operators``, or by the pieces' class), every length."""
    import onnxruntime

    program = result.module()
    for case in UNSEEN:
        assert _max_diff(eager_outputs(program, *_call(*case)), eager_outputs(model, *_call(*case))) <= 1e-5
    result.to_onnx(folder / "sized.onnx")
    args, kwargs = _call(4, 11)
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="has no program for these input sizes"):
        run_onnx(folder / "sized.onnx", args, kwargs)
    written = result.to_onnx(folder / "looped.onnx", translations=dict.fromkeys(operators, translation))
    diffs = [_max_diff(run_onnx(folder / "looped.onnx", *_call(*case)), eager_outputs(model, *_call(*case))) for case in UNSEEN]
    assert written.model_diff <= 1e-4 and max(diffs) <= 1e-4, (written.model_diff, diffs)


@pytest.mark.slow
def test_jamba_prefill_converts_at_every_length_with_its_mixers_translation(tmp_path: Path) -> None:
    model = tiny.jamba()
    path = "model.layers.0.mamba"
    result, operators = _exported(model, path, ("A_log", "D", "conv1d.weight", "conv1d.bias", "in_proj.weight"), 128)
    _onnx_at_every_length(result, model, operators, jamba_mamba_mixer, tmp_path)
    # the archive: a length no program holds is refused by name, and computed by the module when its class is given
    result.save(tmp_path / "jamba.pt2")
    loaded = load_piece_by_piece(tmp_path / "jamba.pt2")
    with pytest.raises(ValueError, match=rf"{path} has no program for these input sizes"):
        eager_outputs(loaded, *_call(4, 11))
    loaded.close()
    mixer = model.get_submodule(path)  # rebuilt from its class, which needs its submodules' classes: named at once;
    # with the three, in a fresh process, equal to eager at the unseen sizes
    with pytest.raises(ArtifactError, match=r"needs 2 classes: \S+SiLUActivation \(its submodule act\), \S+JambaRMSNorm \(its submodule dt_layernorm\); pass those classes in implementations="):
        load_piece_by_piece(tmp_path / "jamba.pt2", implementations=[type(mixer)])
    out = subprocess.run([sys.executable, "-c", _FRESH, str(TESTS), str(tmp_path / "jamba.pt2"), json.dumps(UNSEEN)],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.strip().splitlines()[-1]) <= 1e-5


@pytest.mark.slow
def test_jamba_prefill_with_its_mixer_as_classes_converts_the_same_way(tmp_path: Path) -> None:
    # classes= its decoder layers would put the loop inside a whole layer; the mixer alone takes the same translation
    from transformers.models.jamba.modeling_jamba import JambaMambaMixer

    model = tiny.jamba()
    result, _ = _exported(model, "model.layers.0.mamba", ("A_log", "D"), 128, classes=JambaMambaMixer)
    assert result.report.behind_operators == ["model.layers.0.mamba"]
    _onnx_at_every_length(result, model, [JambaMambaMixer], jamba_mamba_mixer, tmp_path)  # keyed by its class


@pytest.mark.slow
def test_minimax_prefill_converts_at_every_length_with_its_lightning_attentions_translation(tmp_path: Path) -> None:
    tiny.register_minimax_cache()
    model = tiny.minimax()  # lightning attention in layers 0 and 2, their decay rates buffers: identical pieces
    path = "model.layers.0.self_attn"
    # up to 24 tokens: each of its programs by size unrolls its blocks, and a longer range costs more to export
    result, operators = _exported(model, path, ("slope_rate", "query_decay", "key_decay", "diagonal_decay", "norm.weight"), 24)
    assert len(operators) == 2  # its layers 0 and 2
    _onnx_at_every_length(result, model, operators, minimax_lightning_attention, tmp_path)
