"""Weights streamed from a safetensors checkpoint: a model built on ``meta``, exported, saved and converted to ONNX.

A Llama (hidden 256, 4 layers) is saved by transformers' ``save_pretrained`` as a sharded checkpoint (shards and
``model.safetensors.index.json``); the same config is built on the ``meta`` device, exported piece by piece without
weights, saved and converted with ``weights=`` the checkpoint (Note [streamed weights]). A fresh process loads the
archive and the ONNX model and compares both with the model loaded normally (``from_pretrained``) at shapes the
export did not see. A model without values and no checkpoint, and a checkpoint that lacks a weight or holds
another shape, are refused by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

import _tiny_models as tiny  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import CheckpointError  # noqa: E402

VOCAB = 1000


def _checkpoint(directory: Path) -> Any:
    """A real Llama (hidden 256, 4 layers) saved as shards: its config."""
    model = tiny.llama_sized(256, 4, VOCAB)
    model.save_pretrained(directory, max_shard_size="300KB")
    return model.config


def _on_meta(config: Any) -> Any:
    """The model of ``config`` with its parameters on the meta device; the rotary embedding's frequencies, a buffer
    it computes when built and no checkpoint holds, computed on the CPU."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config).eval()
    model.model.rotary_emb = type(model.model.rotary_emb)(config)
    return model


def _export(model: Any) -> Any:
    ids = torch.zeros(2, 6, dtype=torch.long, device="meta")
    batch, seq = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=2, max=128)
    return export_piece_by_piece(model, (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {0: batch, 1: seq}}, classes="LlamaDecoderLayer")


_COMPARE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy, onnxruntime, torch, transformers.modeling_outputs
from transformers import AutoModelForCausalLM
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[2])
session = onnxruntime.InferenceSession(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(sys.argv[4], attn_implementation="eager").eval()
worst, worst_onnx = 0.0, 0.0
for batch, n in ((1, 3), (3, 11), (2, 70)):
    x = torch.randint(0, 1000, (batch, n), generator=torch.Generator().manual_seed(n))
    with torch.no_grad():
        want = model(x, use_cache=False).logits
        worst = max(worst, (loaded(x, use_cache=False).logits - want).abs().max().item())
    got = session.run(None, {"input_ids": x.numpy()})[0]
    worst_onnx = max(worst_onnx, float(numpy.abs(got - want.numpy()).max()))
print(worst, worst_onnx)
"""


def test_a_llama_on_meta_saved_and_converted_with_its_weights_streamed_from_shards_equals_the_model(tmp_path: Path) -> None:
    config = _checkpoint(tmp_path / "checkpoint")
    shards = json.loads((tmp_path / "checkpoint" / "model.safetensors.index.json").read_text())["weight_map"]
    assert len(set(shards.values())) >= 4  # sharded, as transformers writes a large model
    model = _on_meta(config)
    result = _export(model)
    result.save(tmp_path / "llama.pt2", weights=tmp_path / "checkpoint")
    written = result.to_onnx(tmp_path / "llama.onnx", weights=tmp_path / "checkpoint")
    assert all(p.is_meta for p in model.parameters())  # nothing was materialized in the model
    assert written.functions == {"model__layers__0": [f"model.layers.{i}" for i in range(4)]}
    weights = sum(t.numel() * t.element_size() for t in model.parameters())
    assert os.path.getsize(tmp_path / "llama.onnx.data") == weights  # every weight once, outside the model file
    assert "onnx |d| not run" in str(result.report)
    out = subprocess.run(
        [sys.executable, "-c", _COMPARE, str(Path(__file__).resolve().parent.parent), str(tmp_path / "llama.pt2"),
         str(tmp_path / "llama.onnx"), str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    worst, worst_onnx = map(float, out.stdout.split())
    assert worst <= 1e-5 and worst_onnx <= 1e-5, (worst, worst_onnx)


def test_weights_without_values_need_a_checkpoint_that_has_each_of_them(tmp_path: Path) -> None:
    config = _checkpoint(tmp_path / "checkpoint")
    result = _export(_on_meta(config))
    with pytest.raises(ValueError, match=r"^save: the model's weights have no values .* pass weights="):
        result.save(tmp_path / "a.pt2")
    with pytest.raises(ValueError, match=r"^to_onnx: the model's weights have no values .* pass weights="):
        result.to_onnx(tmp_path / "a.onnx")
    with pytest.raises(CheckpointError, match=r"a directory without model\.safetensors\.index\.json or model\.safetensors"):
        result.save(tmp_path / "a.pt2", weights=tmp_path)
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.zeros(VOCAB, 256)}, tmp_path / "one.safetensors")
    with pytest.raises(CheckpointError, match=r"no weight 'model\.layers\.0\.self_attn\.q_proj\.weight' among its 1 weights"):
        result.save(tmp_path / "a.pt2", weights=tmp_path / "one.safetensors")
    save_file({"model.embed_tokens.weight": torch.zeros(VOCAB, 128)}, tmp_path / "other.safetensors")
    with pytest.raises(CheckpointError, match=r"'model\.embed_tokens\.weight' is torch\.float32 \(1000, 128\) where the model has torch\.float32 \(1000, 256\)"):
        result.save(tmp_path / "a.pt2", weights=tmp_path / "other.safetensors")
