"""A piece with programs by size (Note [programs by size]) saved, then loaded in a fresh process: the archive carries
its programs, the load runs the one whose domain holds without the piece's class, refuses by name the sizes no
domain holds for, and runs the piece's module there once its class is given."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent

_LOAD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[2])  # no implementations=: its programs by size compute it
torch.manual_seed(0)
import _toy_models as toy  # the reference model only, built as the export's was
model = toy.Chunked().eval()
equal, refused = 0, []
for batch in (1, 2, 3):
    for seq in range(1, 25):
        x = torch.randn(batch, seq, 8)
        try:
            got = loaded(x)
        except ValueError as exc:
            assert "chunks has no program for these input sizes" in str(exc) and "implementations=" in str(exc), exc
            refused.append((batch, seq))
            continue
        with torch.no_grad():
            assert torch.equal(got, model(x)), (batch, seq)
        equal += 1
loaded.close()
given = load_piece_by_piece(sys.argv[2], implementations=[toy.PadToFour])
x = torch.randn(2, 4, 8)
with torch.no_grad():
    assert torch.equal(given(x), model(x))  # the module, rebuilt from its class, where no domain holds
print(equal, refused)
"""


def test_programs_by_size_load_in_a_fresh_process_without_the_pieces_class(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = toy.Chunked().eval()
    named = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
    result = export_piece_by_piece(model, (torch.randn(2, 5, 8),), dynamic_shapes=named)
    path = tmp_path / "chunked.pt2"
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        (manifest,) = [n for n in archive.namelist() if n.endswith("pbp_manifest.json")]
        (operator,) = json.loads(archive.read(manifest))["operators"]
    assert operator["program"] is None and len(operator["by_size"]) == 3 and operator["program_key"] is not None
    out = subprocess.run([sys.executable, "-c", _LOAD, str(TESTS), str(path)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    # the sizes onnxruntime computes in tests/onnx_export/test_by_size.py, bit for bit here: all but 2, 3 and 4 tokens
    assert out.stdout.split("\n")[0] == "63 " + str([(b, s) for b in (1, 2, 3) for s in (2, 3, 4)])


def test_each_program_reads_as_torchs_deserializer_reads_it_with_each_expression_processed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [each expression once]: the programs of a piece that pads to chunks of 4 (sizes such as
    ``4*((s + 3)//4)`` on most nodes), each expression processed once, are those torch's deserializer reads as it is:
    the same graph, the same sizes on every node, the same range constraints."""
    import contextlib

    from piece_by_piece_serialize.artifact import _archive

    torch.manual_seed(0)
    named = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
    result = export_piece_by_piece(toy.Chunked().eval(), (torch.randn(2, 5, 8),), dynamic_shapes=named)
    result.save(tmp_path / "chunked.pt2")
    result.close()

    def programs() -> list[tuple[str, dict[str, str], list[tuple[str, str]]]]:
        with _archive.Archive(str(tmp_path / "chunked.pt2")) as archive:
            manifest = archive.manifest()
            names = [n for op in manifest.operators for n, _ in op.by_size]  # the top program calls the piece's operator, not registered here
            read = [archive.program(name) for name in names]
        return [
            (str(p.graph), {str(k): str(v) for k, v in p.range_constraints.items()}, [(n.name, str(n.meta.get("val"))) for n in p.graph.nodes])
            for p in read
        ]

    once = programs()
    monkeypatch.setattr(_archive, "_each_expression_once", contextlib.nullcontext)
    assert len(once) == 3 and once == programs()
    assert any("//4" in val or "// 4" in val for _, _, nodes in once for _, val in nodes)  # the chunks' sizes are there
