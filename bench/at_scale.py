"""Export at real sizes, one measurement per child process: time and peak memory (issue 28).

Not part of ``make bench`` (minutes, and gigabytes for the memory rows); run by hand, one row at a time:

    python bench/at_scale.py meta70b --layers 80 --side ours     # export_piece_by_piece under meta
    python bench/at_scale.py meta70b --layers 80 --side whole    # torch.export.export whole under meta
    python bench/at_scale.py memory --hidden 2048 --layers 16 --dtype bfloat16   # export + save + to_onnx
    python bench/at_scale.py memory --hidden 2048 --layers 16 --dtype bfloat16 --side whole   # torch.export whole

``meta70b``: a Llama with the shapes of Llama-3-70B (hidden 8192, intermediate 28672, 64 heads, 8 key-value heads,
vocabulary 128256) built on the ``meta`` device, its decode step (a ``DynamicCache`` of 5 positions, dynamic
batch, new tokens and past) exported piece by piece with ``classes="LlamaDecoderLayer"`` or whole with
``torch.export``; no weight is ever materialized. ``memory``: a Llama-shaped model with real weights exported piece
by piece, saved and converted to ONNX; its peak resident memory over the bytes of its weights. Each row runs in a
fresh child process, whose peak resident set size (``ru_maxrss``) is the row's memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

_LLAMA_70B = dict(hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_key_value_heads=8, vocab_size=128256)


def _llama(layers: int, device: str, dtype: Any, **sizes: Any) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("llama", num_hidden_layers=layers, **sizes)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()


def _decode_step(model: Any, device: str, past: int = 5, batch: int = 2, new: int = 3) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """A decode step's example call and dynamic shapes: new tokens on a ``DynamicCache`` of ``past`` positions."""
    import torch
    from transformers import DynamicCache

    cfg = model.config
    head = cfg.hidden_size // cfg.num_attention_heads
    dtype = next(model.parameters()).dtype
    cache = DynamicCache(config=cfg)
    for i in range(cfg.num_hidden_layers):
        kv = [torch.randn(batch, cfg.num_key_value_heads, past, head, dtype=dtype, device=device) for _ in range(2)]
        cache.update(*kv, i)
    ids = torch.randint(0, cfg.vocab_size, (batch, new), device=device)
    b, s, p = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=1, max=128), torch.export.Dim("past", min=1, max=4096)
    return (ids,), {"cache": cache, "use_cache": True}, {"input_ids": {0: b, 1: s}, "cache": {0: b, 2: p}}


def meta70b(layers: int, side: str) -> dict[str, Any]:
    import torch

    from piece_by_piece_serialize import export_piece_by_piece

    model = _llama(layers, "meta", torch.bfloat16, **_LLAMA_70B)
    args, kwargs, shapes = _decode_step(model, "meta")
    start = time.perf_counter()
    if side == "ours":
        result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
        programs = len({id(p.program) for p in result.pieces.values() if p.program is not None})
        extra = {"pieces": len(result.report.behind_operators), "distinct programs": programs}
    else:
        # transformers 5 registers no pytree node for its caches, so torch.export cannot take the call as it is:
        # the whole model is exported through the library's flat call, as the automatic mode's first attempt does
        # (Llama exports whole at once, no piece), which is torch.export of the whole model and shape checks
        result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes)
        extra = {"pieces": len(result.report.behind_operators), "attempts": len(result.report.attempts)}
    return {"seconds": round(time.perf_counter() - start, 1), **extra}


def memory(hidden: int, layers: int, dtype_name: str, side: str = "ours") -> dict[str, Any]:
    import torch

    from piece_by_piece_serialize import export_piece_by_piece

    if side == "whole":
        return _memory_whole(hidden, layers, getattr(torch, dtype_name))
    dtype = getattr(torch, dtype_name)
    imports = _peak()
    model = _llama(layers, "cpu", dtype, hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=max(1, hidden // 64),
                   num_key_value_heads=max(1, hidden // 256), vocab_size=32000)  # fmt: skip
    weights = sum(t.numel() * t.element_size() for t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.values())
    before = _peak()
    args, kwargs, shapes = _decode_step(model, "cpu")
    stages = {}
    start = time.perf_counter()
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
    stages["export"] = _peak()
    with tempfile.TemporaryDirectory() as tmp:
        result.save(os.path.join(tmp, "model.pt2"))
        stages["save"] = _peak()
        result.to_onnx(os.path.join(tmp, "model.onnx"))
        stages["to_onnx"] = _peak()
    return {
        "weights MB": round(weights / 2**20), "after imports MB": round(imports / 2**20), "after building MB": round(before / 2**20),
        **{f"peak after {k} MB": round(v / 2**20) for k, v in stages.items()},
        "peak / weights": round(stages["to_onnx"] / weights, 2),
        "(peak - imports) / weights": round((stages["to_onnx"] - imports) / weights, 2), "seconds": round(time.perf_counter() - start, 1),
    }


def _memory_whole(hidden: int, layers: int, dtype: Any) -> dict[str, Any]:
    """The baseline of the memory row: ``torch.export.export`` of the same decode step, whole (its cache registered
    with pytree as transformers offers it), in a process of its own."""
    import copy

    import torch
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    imports = _peak()
    model = _llama(layers, "cpu", dtype, hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=max(1, hidden // 64),
                   num_key_value_heads=max(1, hidden // 256), vocab_size=32000)  # fmt: skip
    weights = sum(t.numel() * t.element_size() for t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.values())
    before = _peak()
    register_dynamic_cache_export_support()
    args, kwargs, shapes = _decode_step(model, "cpu")
    spec = {"input_ids": shapes["input_ids"], "cache": [[shapes["cache"]] * layers] * 2, "use_cache": None}
    start = time.perf_counter()
    torch.export.export(model, args, copy.deepcopy(kwargs), dynamic_shapes=spec, strict=False)
    peak = _peak()
    return {
        "weights MB": round(weights / 2**20), "after imports MB": round(imports / 2**20), "after building MB": round(before / 2**20),
        "peak after torch.export MB": round(peak / 2**20), "peak / weights": round(peak / weights, 2),
        "(peak - imports) / weights": round((peak - imports) / weights, 2), "seconds": round(time.perf_counter() - start, 1),
    }


def _peak() -> int:
    """This process's peak resident set size, in bytes (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="what", required=True)
    m = sub.add_parser("meta70b")
    m.add_argument("--layers", type=int, default=80)
    m.add_argument("--side", choices=["ours", "whole"], default="ours")
    r = sub.add_parser("memory")
    r.add_argument("--hidden", type=int, default=2048)
    r.add_argument("--layers", type=int, default=16)
    r.add_argument("--dtype", default="bfloat16")
    r.add_argument("--side", choices=["ours", "whole"], default="ours", help="ours: export + save + to_onnx; whole: torch.export")
    ns = parser.parse_args(argv)
    if not ns.child:  # a fresh process per row: its peak memory is the row's alone
        out = subprocess.run([sys.executable, __file__, "--child", *(argv if argv is not None else sys.argv[1:])], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            return out.returncode
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["peak RSS MB"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        print(json.dumps(row))
        return 0
    row = meta70b(ns.layers, ns.side) if ns.what == "meta70b" else memory(ns.hidden, ns.layers, ns.dtype, ns.side)
    print(json.dumps({"row": ns.what, **{k: v for k, v in vars(ns).items() if k not in ("what", "child")}, **row}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
