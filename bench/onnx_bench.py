"""ONNX piece by piece against torch.onnx.export of the whole model (``make bench``, section ``onnx``).

A tiny Llama (hidden 32) with 8 and then 32 decoder layers, a prefill with a dynamic batch and length. Ours:
``export_piece_by_piece(classes=LlamaDecoderLayer)`` once, then ``to_onnx`` (every layer one local function:
the identical layers are exported once, then the top graph; the time includes the checker and the onnxruntime
runs of the model and of each piece, which the baseline does not do). Baseline: ``torch.onnx.export(dynamo=True)``
of the whole model, which inlines every layer, then saved. Each is run twice, alternated, and the faster run kept
(exports take seconds: noise only ever adds to them). Targets from issue 22: at most 0.5x at 8 layers and 0.2x at
32. The file sizes are shown beside (weights are the same; ours holds one copy of the layer's graph).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

from _timing import Row, section


def _llama(layers: int) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "llama", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


@section("onnx")
def onnx_rows(args: argparse.Namespace) -> list[Row]:
    import torch

    from piece_by_piece_serialize import export_piece_by_piece

    rows = []
    folder = tempfile.mkdtemp()
    for layers, target in ((8, 0.5), (32, 0.2)):
        model = _llama(layers)
        ids = torch.randint(0, 64, (2, 6))
        batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=128)
        shapes = {"input_ids": {0: batch, 1: seq}}
        export_seconds, result = _timed(
            lambda: export_piece_by_piece(model, (ids,), {"use_cache": False}, dynamic_shapes=shapes, classes="LlamaDecoderLayer")  # noqa: B023
        )
        ours_times, theirs_times = [], []
        ours_path, theirs_path = os.path.join(folder, f"ours{layers}.onnx"), os.path.join(folder, f"theirs{layers}.onnx")
        for _ in range(1 if args.quick else 2):
            seconds, _ = _timed(lambda: result.to_onnx(ours_path))  # noqa: B023
            ours_times.append(seconds)

            def whole() -> None:
                program = torch.onnx.export(model, (ids,), kwargs={"use_cache": False}, dynamic_shapes={**shapes, "use_cache": None}, dynamo=True, verbose=False)  # noqa: B023
                program.save(theirs_path)  # noqa: B023

            seconds, _ = _timed(whole)
            theirs_times.append(seconds)
        ours, theirs = min(ours_times), min(theirs_times)
        note = f"{len(result.report.onnx.functions)} function for {layers} layers; export_piece_by_piece itself {export_seconds:.1f} s"
        rows.append(Row("onnx", f"to_onnx, {layers} layers", ours, "torch.onnx.export (dynamo) of the whole model", theirs, target, note=note))
        rows.append(
            Row("onnx", f"ONNX file size, {layers} layers", os.path.getsize(ours_path), "the whole model's file", os.path.getsize(theirs_path), unit="bytes")
        )
        result.close()
    return rows
