"""One artifact: a piece-by-piece export saved, then loaded in a fresh process, gives the model's outputs.

The fresh process is a real one (``subprocess``): it builds the reference model from the same config and seed,
imports only what the model's own code imports, loads the archive and compares outputs at shapes the export
did not see. Llama has its four layers behind operators (one shared program); Mistral decodes past its sliding
window with its cache in and out; a module with a data-dependent branch needs ``implementations=``. The graph
reads every weight, and the archive is about the size of the weights.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from piece_by_piece_serialize import dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)


def _fresh(code: str, *args: str) -> str:
    """Run ``code`` in a new interpreter (tests/ on its path); its stdout."""
    out = subprocess.run([sys.executable, "-c", code, str(TESTS), *args], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def _unused_weights(program: Any) -> list[str]:
    """Parameters and buffers the graph lifts but no node reads (the export's top program names them under
    ``module.``, the model's own program without)."""
    signature = program.graph_signature
    lifted = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    return sorted(lifted[n.name].removeprefix("module.") for n in program.graph.nodes if n.op == "placeholder" and n.name in lifted and not n.users)


def _assert_weights_read(result: Any, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every weight the pieces compute with is an input of their operator: the only weights no node reads are
    those torch.export of the whole model leaves unread too (a rotary embedding's original_inv_freq)."""
    whole = torch.export.export(model, args, kwargs, strict=False)
    assert _unused_weights(result.program) == _unused_weights(whole)
    behind = [p for p in result.report.behind_operators]
    assert behind and not any(w.startswith(tuple(p + "." for p in behind)) for w in _unused_weights(result.program))


_LOAD_LLAMA = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch, transformers.modeling_outputs  # what the model's code imports; the loader imports nothing
import _tiny_models as tiny
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[2])
model = tiny.llama_sized(int(sys.argv[3]), 4, int(sys.argv[4]))
worst = 0.0
for batch, n in ((1, 3), (3, 11), (2, 70)):
    x = tiny.ids(n, batch, seed=5)
    with torch.no_grad():
        worst = max(worst, (loaded(x, use_cache=False).logits - model(x, use_cache=False).logits).abs().max().item())
print(worst)
"""


@pytest.mark.parametrize("hidden", [32, 256], ids=["tiny", "weights-heavy"])
def test_llama_with_its_layers_behind_operators_loads_in_a_fresh_process(hidden: int, tmp_path: Path) -> None:
    vocab = tiny.VOCAB if hidden == 32 else 1000
    model = tiny.llama_sized(hidden, 4, vocab)
    ids = tiny.ids(6, 2)
    result = export_piece_by_piece(
        model, (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}}, classes=type(model.model.layers[0])
    )
    _assert_weights_read(result, model, (ids,), {"use_cache": False})
    path = tmp_path / "llama.pt2"
    result.save(path)
    names = zipfile.ZipFile(path).namelist()
    assert sum(n.endswith(".json") and "/models/" in n for n in names) == 2  # the top program and one shared layer program
    weights = sum(t.numel() * t.element_size() for t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.values())
    if hidden == 256:
        assert os.path.getsize(path) <= 1.5 * weights, (os.path.getsize(path), weights)
    assert float(_fresh(_LOAD_LLAMA, str(path), str(hidden), str(vocab))) <= 1e-5


_LOAD_MISTRAL = r"""
import copy, sys
sys.path.insert(0, sys.argv[1])
import torch, transformers.modeling_outputs
import _tiny_models as tiny
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[2])
model = tiny.mistral()
worst = 0.0
for batch, past, new in ((1, 5, 2), (3, 9, 3), (2, 12, 4)):  # a window of 5: every step decodes past it, as the examples did
    _, ours = tiny.prefill(model, past, batch=batch)
    theirs = copy.deepcopy(ours)
    x = tiny.ids(new, batch, seed=9)
    with torch.no_grad():
        got = loaded(x, cache=ours, use_cache=True)
        want = model(x, cache=theirs, use_cache=True)
    assert got.cache is ours and ours.get_seq_length() == theirs.get_seq_length()
    worst = max(worst, (got.logits - want.logits).abs().max().item())
    for a, b in zip(ours.layers, theirs.layers):
        worst = max(worst, (a.keys - b.keys).abs().max().item(), (a.values - b.values).abs().max().item())
print(worst)
"""


def test_mistral_decodes_past_its_window_with_its_cache_after_a_fresh_load(tmp_path: Path) -> None:
    model = tiny.mistral()
    _, cache = tiny.prefill(model, 6, batch=2)
    _, other = tiny.prefill(model, 8, batch=3)
    # the batch and the new tokens differ in each example: torch.export takes equal unnamed dimensions for one
    # past the window the keys keep 4 positions and the layer counts what it has seen: two examples say which
    # dimensions move (the count's), where one spec for every tensor of the cache would not fit
    shapes = dynamic_shapes_from_examples(model, [((tiny.ids(3, 2),), {"cache": cache}), ((tiny.ids(2, 3),), {"cache": other})])
    assert shapes["cache"][:3] == [{0: torch.export.Dim.DYNAMIC}, {0: torch.export.Dim.DYNAMIC}, {0: torch.export.Dim.DYNAMIC}]
    with pytest.raises(ValueError, match="given for all its tensors does not fit its tensor 2"):
        export_piece_by_piece(model, (tiny.ids(2, 2),), {"cache": cache}, dynamic_shapes={"cache": {0: BATCH, 2: SEQ}})
    result = export_piece_by_piece(
        model, (tiny.ids(3, 2),), {"cache": cache, "use_cache": True}, dynamic_shapes=shapes, classes=type(model.model.layers[0])
    )
    _assert_weights_read(result, model, (tiny.ids(2, 2),), {"use_cache": False})
    path = tmp_path / "mistral.pt2"
    result.save(path)
    assert float(_fresh(_LOAD_MISTRAL, str(path))) <= 1e-5
