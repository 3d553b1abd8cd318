"""Note [documents as dataclasses]: the loader builds torch's schema dataclasses from a checked program document
itself; what it builds equals what torch's own ``_dict_to_dataclass`` builds from the same document, on every
program of three archives: a tiny Llama's decode step with its decoder layers behind operators (the top program and
the layers' shared one), a piece with programs by size (sizes such as ``4*((s + 3)//4)``), and a program holding
infinite floats (written "Infinity" and "-Infinity")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import _archive, _program  # noqa: E402


class _Clamped(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x.masked_fill(x > 3, float("inf")), min=float("-inf"), max=float("inf")).amax(-1)


def _llama_step() -> tuple[Any, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    model = tiny.llama()
    batch = torch.export.Dim("batch", min=1, max=32)
    shapes = {"input_ids": {0: batch, 1: torch.export.Dim("new", min=1, max=16)}, "cache": {0: batch, 2: torch.export.Dim("past", min=1, max=64)}}
    return model, (tiny.ids(2, 2),), {"cache": tiny.prefill(model, 5, batch=2)[1]}, {"classes": "LlamaDecoderLayer", "dynamic_shapes": shapes}


def _archives(tmp_path: Path) -> list[Path]:
    seq = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
    torch.manual_seed(0)
    cases = [
        (toy.Chunked().eval(), (torch.randn(2, 5, 8),), {}, {"dynamic_shapes": seq}),
        (_Clamped(), (torch.randn(3, 4),), {}, {"dynamic_shapes": ({0: torch.export.Dim("n", max=64)},)}),
        _llama_step(),
    ]
    paths = []
    for i, (model, args, kwargs, options) in enumerate(cases):
        result = export_piece_by_piece(model, args, kwargs, **options)
        paths.append(tmp_path / f"{i}.pt2")
        result.save(paths[-1])
        result.close()
    return paths


def test_the_loaders_dataclasses_are_torchs_on_every_program(tmp_path: Path) -> None:
    from torch._export.serde import schema
    from torch._export.serde.serialize import _dict_to_dataclass

    compared, floats = 0, set()
    for path in _archives(tmp_path):
        with _archive.Archive(str(path)) as archive:
            manifest = archive.manifest()
            names = [manifest.program, *(op.program for op in manifest.operators if op.program)]
            names += [n for op in manifest.operators for n, _ in op.by_size]
            for name in dict.fromkeys(names):
                document = archive.document(f"models/{name}.json")
                ours = _program.as_dataclasses(document)
                assert ours == _dict_to_dataclass(schema.ExportedProgram, document), name
                floats |= {a.arg.value for n in ours.graph_module.graph.nodes for a in n.inputs if a.arg.type == "as_float"}
                compared += 1
    assert compared == 7  # Chunked's top program and its 3 by size, the clamp's, the Llama's top and layer programs
    assert {float("inf"), float("-inf")} <= floats
