"""export_piece_by_piece of models without weights: built on the ``meta`` device or under ``FakeTensorMode``.

A Llama with the shapes of Llama-3-70B (two of its 80 layers) is built on ``meta`` and its decode step exported
with ``classes=`` and automatically, in seconds, without a weight ever materialized; the programs' input and output
shapes are those of the model. Every comparison with eager that needs values is reported as not run, in the
report's text, Markdown and dict (Note [exports without values]); shapes and dtypes are still checked.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402

# Llama-3-70B's sizes; two layers instead of 80
SIZES_70B = dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8, vocab_size=128256)
HEAD = 8192 // 64


def _llama(device: str, layers: int = 2, **sizes: Any) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("llama", num_hidden_layers=layers, **sizes)
    cfg._attn_implementation = "eager"
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()


def _decode_step(model: Any) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """Three new tokens on a DynamicCache of five positions, batch 2, on the model's device."""
    from transformers import DynamicCache

    cfg = model.config
    head = cfg.hidden_size // cfg.num_attention_heads
    device = next(model.parameters()).device
    cache = DynamicCache(config=cfg)
    for i in range(cfg.num_hidden_layers):
        cache.update(*(torch.zeros(2, cfg.num_key_value_heads, 5, head, dtype=torch.bfloat16, device=device) for _ in range(2)), i)
    batch, seq, past = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=1, max=128), torch.export.Dim("past", min=1, max=4096)
    ids = torch.zeros(2, 3, dtype=torch.long, device=device)
    return (ids,), {"cache": cache, "use_cache": True}, {"input_ids": {0: batch, 1: seq}, "cache": {0: batch, 2: past}}


def _shapes(program: Any, op: str) -> list[tuple[Any, ...]]:
    """The shapes of a program's placeholders (``op="placeholder"``) or outputs (``op="output"``), symbols as text."""
    nodes = [n for n in program.graph.nodes if n.op == op]
    values = [n.meta["val"] for n in nodes] if op == "placeholder" else [a.meta["val"] for a in nodes[0].args[0]]
    return [tuple(str(d) for d in v.shape) for v in values]


@pytest.mark.parametrize("classes", ["LlamaDecoderLayer", None], ids=["classes", "automatic"])
def test_a_70b_shaped_llama_on_meta_exports_piece_by_piece_without_its_weights(classes: Any) -> None:
    model = _llama("meta", **SIZES_70B)
    args, kwargs, shapes = _decode_step(model)
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes=classes)
    assert all(t.is_meta for t in [*model.parameters(), *model.buffers()])  # nothing materialized, the model untouched
    # the top program: the ids and the four cache tensors in, the logits, the output's cache and the cache after out
    batch, seq, past = _shapes(result.program, "placeholder")[-5][0], _shapes(result.program, "placeholder")[-5][1], _shapes(result.program, "placeholder")[-4][2]
    assert _shapes(result.program, "placeholder")[-5:] == [(batch, seq), *[(batch, "8", past, str(HEAD))] * 4]
    grown = (batch, "8", f"{past} + {seq}", str(HEAD))
    assert _shapes(result.program, "output") == [(batch, seq, "128256"), *[grown] * 8]
    report = result.report
    assert report.values_not_compared == "the model's weights are on the meta device: no values to compare"
    assert report.root.max_abs_diff is None and report.to_dict()["values_not_compared"] == report.values_not_compared
    assert "max |diff| against eager not run (shapes and dtypes checked)" in str(report)
    assert "not run: the model's weights are on the meta device" in report.to_markdown()
    if classes is None:  # Llama exports whole
        assert result.pieces == {} and len(report.attempts) == 1
        return
    assert report.behind_operators == ["model.layers.0", "model.layers.1"]
    for path in report.behind_operators:
        piece = report.pieces[path]
        assert piece.max_abs_diff is None and piece.checked_calls == 2  # a call per example, its shapes checked
        # its own program: the layer's nine weights, then the hidden states, mask, rotary cos and sin, positions, cache
        inputs = _shapes(piece.program, "placeholder")
        assert inputs[:9] == [("8192", "8192"), ("1024", "8192"), ("1024", "8192"), ("8192", "8192"), ("28672", "8192"),
                              ("28672", "8192"), ("8192", "28672"), ("8192",), ("8192",)]  # fmt: skip
        hidden = inputs[9]
        assert hidden[2] == "8192" and _shapes(piece.program, "output")[0] == hidden
    # identical layers traced once under meta too: the second takes the first's program (its own cache layer)
    assert report.pieces["model.layers.1"].program is report.pieces["model.layers.0"].program
    lines = [line for line in str(report).splitlines() if "layers.0-1" in line]
    assert len(lines) == 1 and "not run" in lines[0]
    assert "values not run (the model's weights are on the meta device" in report.to_markdown()
    # without values its checks would repeat the first's exactly: it takes them (Note [identical pieces without values])
    assert report.notes[-1] == (
        "1 piece identical to model.layers.0 (model.layers.1) took its checks: without values a check compares shapes "
        "and dtypes, and their recorded calls have its shapes and dtypes in and out"
    )


def test_identical_layers_with_values_are_each_checked() -> None:
    sizes = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    model = _llama("cpu", layers=3, **sizes)
    args, kwargs, shapes = _decode_step(model)
    report = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes="LlamaDecoderLayer").report
    assert not any("took its checks" in note for note in report.notes)
    # each layer's own weights, each compared: a difference of its own (0.0, not None), on a call per example
    for path in report.behind_operators:
        assert report.pieces[path].max_abs_diff is not None and report.pieces[path].checked_calls == 2
        assert report.pieces[path].outputs  # its outputs' comparisons are its own, kept by name


def test_a_llama_built_under_fake_tensor_mode_exports_with_its_checks_of_values_reported_not_run() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    sizes = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = _llama("cpu", **sizes)
        args, kwargs, shapes = _decode_step(model)
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
    report = result.report
    assert report.values_not_compared == "the model's weights are fake tensors (FakeTensorMode): no values to compare"
    assert [report.pieces[p].max_abs_diff for p in report.behind_operators] == [None, None]
    assert _shapes(result.program, "output")[0][2] == "100"
