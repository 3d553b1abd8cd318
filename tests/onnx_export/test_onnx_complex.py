"""Pieces that compute in complex numbers through to_onnx (Note [complex as real]): a toy rotation, and a tiny
Llama 4 text model whose rotary embedding multiplies queries and keys by complex frequencies, which its layers
take as a complex input; onnxruntime against eager at shapes the export did not see."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import ExportMismatchError  # noqa: E402
from piece_by_piece_serialize.onnx_export import OnnxExportError  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)


def _max_diff(got: list[Any], want: list[Any]) -> float:
    assert len(got) == len(want)
    assert all(g.shape == w.shape for g, w in zip(got, want, strict=True))
    return max(((g.double() - w.double()).abs().max().item() for g, w in zip(got, want, strict=True) if w.numel()), default=0.0)


class _Rotation(torch.nn.Module):
    """Pairs of features as complex numbers, turned by angles a layer computes, scaled, conjugate-free."""

    def __init__(self) -> None:
        super().__init__()
        self.angles = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        turn = torch.polar(torch.ones_like(self.angles(x)), self.angles(x)) * 0.5
        return torch.view_as_real(z * turn.unsqueeze(1)[:, 0]).flatten(-2) + x


def test_a_rotation_in_complex_numbers_equals_eager(tmp_path: Path) -> None:
    model = _Rotation().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 8),), dynamic_shapes=({0: BATCH},))
    assert any(n.target == torch.ops.aten.polar.default for n in result.program.graph.nodes)
    written = result.to_onnx(tmp_path / "rotation.onnx")
    assert written.model_diff <= 1e-5
    x = torch.randn(11, 8)
    assert _max_diff(run_onnx(tmp_path / "rotation.onnx", (x,), {}), eager_outputs(model, (x,), {})) <= 1e-5


def test_llama4_layers_given_complex_rotary_frequencies(tmp_path: Path) -> None:
    model = tiny.llama4()
    x = tiny.ids(6, 2)
    shapes = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ}}
    result = export_piece_by_piece(model, (x,), {"attention_mask": torch.ones_like(x), "use_cache": False}, dynamic_shapes=shapes, classes="Llama4TextDecoderLayer")
    layer = result.pieces["model.layers.0"].program
    assert any(n.op == "placeholder" and n.meta["val"].dtype == torch.complex64 for n in layer.graph.nodes)
    # the top program's real copy rewrites its graph and shares its weights, which it held twice through to_onnx (a
    # 4-layer Llama 4 text model of 578 MB of weights: to_onnx's peak 1738 -> 1160 MB)
    from piece_by_piece_serialize.onnx_export._complex import as_real

    top = as_real(result.program, "the top program")
    assert top is not result.program and top.graph is not result.program.graph
    assert result.program.state_dict and all(top.state_dict[k] is w for k, w in result.program.state_dict.items())
    written = result.to_onnx(tmp_path / "llama4.onnx")
    # each layer checked on its recorded calls, its complex frequencies fed as their real view
    assert written.model_diff <= 1e-4 and max(written.piece_diffs.values()) <= 1e-4 and len(written.piece_diffs) == 2
    for batch, n in ((1, 3), (3, 20)):  # 20: past the attention chunk of 16
        kwargs = {"attention_mask": torch.ones(batch, n, dtype=torch.long), "use_cache": False}
        ids = tiny.ids(n, batch, seed=5)
        assert _max_diff(run_onnx(tmp_path / "llama4.onnx", (ids,), kwargs), eager_outputs(model, (ids,), kwargs)) <= 1e-4


def _llama4_step(model: Any, strict: bool = True) -> Any:
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    return export_piece_by_piece(
        model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other, classes="Llama4TextDecoderLayer", strict=strict
    )


def test_a_llama4_decode_step_whose_program_guards_the_count_of_positions_fails_past_the_guard() -> None:
    # The model's own code (its chunked attention's mask) guards the cache's count of positions at <= 15, where the
    # declared range (Dim.DYNAMIC, from the two examples) has no end: a cache of 30 positions, which eager takes,
    # the program refuses. The range checks sample up to twice the example (13) and passed; they now also check one
    # past the program's own end (16), the count alone past the keys a chunk keeps (15), and the verdict fails there.
    model = tiny.llama4()
    with pytest.raises(ExportMismatchError, match=r"\(model\) at past\.layers\.0\.cumulative_length dim 0=16 \(the dimensions that move with it at 15\) the program fails where eager runs: .*Guard failed") as caught:
        _llama4_step(model)
    program = caught.value.result.module()
    x, cache = tiny.ids(1, 2, 9), tiny.prefill(model, 30, batch=2)[1]
    with torch.no_grad():
        model(x, cache=tiny.prefill(model, 30, batch=2)[1])  # eager takes it
    with pytest.raises(Exception, match="Guard failed"):
        program(x, cache=cache)


def test_a_llama4_decode_step_whose_layer_programs_hold_less_than_the_declared_range_refuses_those_sizes_by_name(tmp_path: Path) -> None:
    # A layer keeps at most one attention chunk (16) of keys: its program, exported from caches of 6 and 8 positions,
    # holds up to 12 (written without its guards, it returned 18 positions at 14 past and 4 new where eager keeps
    # 15). Its guards say so: the layer gets programs by size, one more from the point of the declared range where
    # the first fails (Note [programs by size]). The program of the model calls the layers eagerly but guards the
    # count of positions at 15 (the test above), its verdict FAIL. The ONNX file computes where the programs' domains
    # hold, equal to eager, and refuses by name where the top program's does not (Note [the file's sizes]): never
    # the wrong cache it once returned.
    model = tiny.llama4()
    result = _llama4_step(model, strict=False)
    assert result.report.failed == ["(model)"]
    for i in range(2):
        piece = result.pieces[f"model.layers.{i}"]
        assert piece.program is None and (piece.by_size or "").startswith("2 programs by size")
    written = result.to_onnx(tmp_path / "llama4.onnx")
    assert max(written.piece_diffs.values()) <= 1e-4
    for batch, past, n in ((1, 6, 3), (2, 11, 2)):
        args, kwargs = (tiny.ids(n, batch, 9),), {"cache": tiny.prefill(model, past, batch=batch)[1]}
        assert _max_diff(run_onnx(tmp_path / "llama4.onnx", args, kwargs), eager_outputs(model, args, kwargs)) <= 1e-4
    args, kwargs = (tiny.ids(4, 2, 9),), {"cache": tiny.prefill(model, 30, batch=2)[1]}
    # the layers' function runs before the main graph's check, and refuses first
    with pytest.raises(Exception, match=r"refused: model\.layers\.0 \(or one of 1 pieces identical to it\) has no program for these input sizes"):
        run_onnx(tmp_path / "llama4.onnx", args, kwargs)
