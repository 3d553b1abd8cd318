"""An archive's cost against depth: a decode step of 2, 4 and 8 tiny Llama layers (issue 28).

Each layer's operator carries only its own cache layer (Note [cut calls] in custom_op/_slices.py) and the layers
share one program (Note [renumbered layers] in export/_reuse.py), so the top graph's operator calls take the same
number of tensors at every depth, the archive holds one layer program, and the manifest grows by the same number
of bytes per layer (it grew with the square of the depth when each operator carried the whole cache, and a
64-layer archive was over the loader's limit). The 8-layer archive loads, its operators running one graph, and
computes equal to the model.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)


def _saved(layers: int, path: Path) -> tuple[Any, list[int], dict[str, Any], int]:
    """The model, the number of tensors of each operator call of the top graph, the manifest and its bytes."""
    model = tiny.llama_sized(32, layers)
    _, cache = tiny.prefill(model, 5, batch=2)
    shapes = {"input_ids": {0: BATCH, 1: torch.export.Dim("new", min=1, max=16)}, "cache": {0: BATCH, 2: torch.export.Dim("past", min=1, max=64)}}
    result = export_piece_by_piece(model, (tiny.ids(2, 2),), {"cache": cache}, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
    operators = {f"{result.pieces[p].operator.replace('::', '.')}.default" for p in result.report.behind_operators}
    inputs = [len(n.args[0]) for n in result.program.graph.nodes if n.op == "call_function" and str(n.target) in operators]
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("pbp_manifest.json")]
        data = archive.read(name)
    return model, inputs, json.loads(data), len(data)


def test_a_decode_steps_archive_grows_linearly_with_depth(tmp_path: Path) -> None:
    sizes = {}
    for layers in (2, 4, 8):
        model, inputs, manifest, sizes[layers] = _saved(layers, tmp_path / f"llama{layers}.pt2")
        assert inputs == [7] * layers  # 5 arguments, then the layer's own keys and values: whatever the depth
        assert {op["program"] for op in manifest["operators"]} == {"piece_0"}  # one layer program for all
    per_layer = (sizes[4] - sizes[2]) / 2
    assert per_layer > 0 and abs((sizes[8] - sizes[4]) - 4 * per_layer) <= 0.01 * sizes[8], sizes
    loaded = load_piece_by_piece(tmp_path / "llama8.pt2")
    operators = loaded._finalizer.peek()[2][0]  # type: ignore[index]  # the loaded operators, which it frees
    # the identical layers' operators run one graph, made once (Note [flat graphs] in artifact/_runnable.py)
    assert len(operators) == 8 and len({id(op.runner.__self__) for op in operators}) == 1
    for batch, past, new in ((1, 3, 1), (3, 9, 2)):
        _, ours = tiny.prefill(model, past, batch=batch)
        theirs = copy.deepcopy(ours)
        x = tiny.ids(new, batch, seed=4)
        with torch.no_grad():
            got, want = loaded(x, cache=ours), model(x, cache=theirs)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
        assert_same_state(theirs, ours)
    loaded.close()
