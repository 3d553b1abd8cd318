"""``pbp-serialize demo`` (what ``make demo`` runs): the main job, end to end, on real torch objects.

Part 1 is the job itself: a tiny Llama built from config (transformers, no download, eager attention) is
exported piece by piece in one call (:func:`export_piece_by_piece`, its decoder layers behind operators, a decode
step with its cache in and out, a dynamic batch and length); the report is printed, the runnable module must
give the model's logits and cache at other shapes, and the artifact saved from it must do the same once loaded
in a fresh process. Part 2 checks every operator schema
registered in the installed torch with our parser, linter and printer, comparing with torch on each one.
Part 3 encodes the TreeSpec name of the kind of nested input a decoder-only LLM receives and checks that
it decodes to the very same TreeSpec. The exit code is 0 only when all three hold.

Imports: :mod:`._check` (the torch run) and :mod:`._findings`; the library's :mod:`..export` and
:mod:`..treespec_name`, torch and transformers only inside the parts that use them.
"""

from __future__ import annotations

import sys
from typing import Any

from ._check import check_torch
from ._findings import render_text

__all__ = ["export_job", "demo", "llm_input", "tiny_llama"]


def llm_input(batch: int = 2, seq: int = 16, layers: int = 2, heads: int = 4, head_dim: int = 8) -> dict[str, Any]:
    """A realistic LLM forward input: ids, mask, positions, a per-layer (key, value) list, image inputs."""
    import torch

    generator = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(0, 32000, (batch, seq), generator=generator),
        "attention_mask": torch.ones(batch, seq, dtype=torch.int64),
        "position_ids": torch.arange(seq).expand(batch, seq),
        "past_key_values": [
            (torch.randn(batch, heads, seq, head_dim, generator=generator), torch.randn(batch, heads, seq, head_dim, generator=generator))
            for _ in range(layers)
        ],
        "images": {
            "pixel_values": torch.randn(batch, 3, 32, 32, generator=generator),
            "image_sizes": [torch.tensor([32, 32]) for _ in range(batch)],
        },
    }


def _describe(value: Any) -> str:
    """A one-line shape description of the input, for the demo's output."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_describe(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def tiny_llama() -> Any:
    """A two-layer Llama built from config (random weights, eager attention, no download)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "llama", vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]  # from_config has no annotations
    return model.train(False)  # inference mode (what nn.Module.eval does), spelled so no reader mistakes it for eval()


def _ids(batch: int, n: int, seed: int) -> Any:
    import torch

    return torch.randint(0, 128, (batch, n), generator=torch.Generator().manual_seed(seed))


def export_job(folder: str) -> bool:
    """Part 1: the one call on a tiny Llama, its report, the runnable module against the model; then the
    artifact saved in ``folder`` and loaded in a fresh process. True when every output equals the model's."""
    import copy
    import os

    import torch

    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install 'piece-by-piece-serialize[transformers]'")
        return False
    from ..export import export_piece_by_piece

    model = tiny_llama()
    layer = type(model.model.layers[0]).__name__
    print(f"model: {type(model).__name__} (transformers {transformers.__version__}), {len(model.model.layers)} x {layer}")
    dims = {name: torch.export.Dim(name, min=1, max=200) for name in ("batch", "new", "past")}
    _, cache = _prefill(model, 5)
    shapes = {"input_ids": {0: dims["batch"], 1: dims["new"]}, "cache": {0: dims["batch"], 2: dims["past"]}}
    result = export_piece_by_piece(
        model, (_ids(2, 3, 3),), {"cache": cache}, dynamic_shapes=shapes,
        classes=layer,
    )  # fmt: skip
    print(f"export_piece_by_piece(model, (input_ids,), {{'cache': cache}}, dynamic_shapes=..., classes={layer!r}):")
    for line in str(result.report).splitlines():
        print(f"  {line}")
    runnable = result.module()
    worst = 0.0
    for b, past, new in ((1, 4, 2), (4, 11, 7), (3, 150, 30)):
        _, ours = _prefill(model, past, b)
        theirs = copy.deepcopy(ours)
        x = _ids(b, new, 4)
        with torch.no_grad():
            got, want = runnable(x, cache=ours), model(x, cache=theirs)
        worst = max(worst, (got.logits - want.logits).abs().max().item(), 0.0 if _same_cache(ours, theirs) else float("inf"))
    print(f"the program against the model, decode steps at (batch, past, new) = (1, 4, 2), (4, 11, 7), (3, 150, 30): max |diff| = {worst:g}")
    path = os.path.join(folder, "tiny-llama.pt2")
    result.save(path)
    weights = sum(t.numel() * t.element_size() for t in {**dict(model.named_parameters()), **dict(model.named_buffers())}.values())
    print(f"saved {path}: {os.path.getsize(path):,} bytes for {weights:,} bytes of weights")
    fresh = _load_in_a_fresh_process(path)
    print(f"loaded in a fresh process: {fresh}")
    return worst <= 1e-5 and fresh.endswith("max |diff| = 0")


# What the fresh process runs: load the artifact, compare with the model built from the same seed.
_FRESH = """
import copy, sys, time
import torch, transformers.modeling_outputs
from piece_by_piece_serialize import load_piece_by_piece
from piece_by_piece_serialize.cli._demo import _ids, _prefill, _same_cache, tiny_llama
start = time.perf_counter()
loaded = load_piece_by_piece(sys.argv[1])
seconds = time.perf_counter() - start
model = tiny_llama()
worst = 0.0
for b, past, new in ((2, 9, 4), (1, 60, 3)):
    _, ours = _prefill(model, past, b)
    theirs = copy.deepcopy(ours)
    with torch.no_grad():
        got, want = loaded(_ids(b, new, 8), cache=ours), model(_ids(b, new, 8), cache=theirs)
    worst = max(worst, (got.logits - want.logits).abs().max().item(), 0.0 if _same_cache(ours, theirs) else float("inf"))
print(f"{len(loaded.manifest.operators)} operators, load {seconds:.2f} s; two decode steps against the model: max |diff| = {worst:g}")
"""


def _load_in_a_fresh_process(path: str) -> str:
    import subprocess

    out = subprocess.run([sys.executable, "-c", _FRESH, path], capture_output=True, text=True, timeout=600)
    return out.stdout.strip() if out.returncode == 0 else f"FAILED: {out.stderr.strip()[-2000:]}"


def _prefill(model: Any, n: int, batch: int = 2) -> tuple[Any, Any]:
    import torch

    with torch.no_grad():
        out = model(_ids(batch, n, 1), use_cache=True)
    return out.logits, out.cache


def _same_cache(a: Any, b: Any) -> bool:
    import torch

    return len(a.layers) == len(b.layers) and all(
        torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values) for x, y in zip(a.layers, b.layers, strict=True)
    )


def demo(*, quiet: bool = False) -> int:
    """Run the three parts, printing to stdout; return 0 when everything checked out, else 1."""
    import tempfile

    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from ..treespec_name import pretty_name, tree_spec_as_name, tree_spec_from_name

    print("== 1. a tiny Llama exported piece by piece, saved as one artifact, loaded in a fresh process")
    with tempfile.TemporaryDirectory() as folder:
        job_ok = export_job(folder)

    print()
    print(f"== 2. schema check over every operator schema registered in torch {torch.__version__}")

    def show(finding: Any) -> None:
        if finding.severity == "error":
            print(render_text(finding))

    summary = check_torch(quiet=quiet, emit=show)
    for line in summary.lines():
        print(line)
    # what part 2 shows is that our parser agrees with torch's; lint errors in torch's own schemas (one argument
    # name declared twice) are printed, but they are torch's to fix
    schemas_ok = summary.disagreements == 0 and summary.parsed + summary.torch_rejects_own == summary.total

    print()
    print("== 3. the TreeSpec name of a realistic LLM input")
    inputs = llm_input()
    print(f"input: {_describe(inputs)}")
    leaves, spec = tree_flatten(inputs)
    name = tree_spec_as_name(spec, len(leaves))
    print(f"leaves: {len(leaves)}")
    print(f"name ({len(name)} characters): {name}")
    print("tree:")
    for line in pretty_name(name).splitlines():
        print(f"  {line}")
    n, decoded = tree_spec_from_name(name)
    rebuilt = tree_unflatten(leaves, decoded)
    same_spec = n == len(leaves) and decoded == spec
    same_value = tree_flatten(rebuilt)[1] == spec and all(a is b for a, b in zip(tree_flatten(rebuilt)[0], leaves, strict=True))
    print(f"decoded spec equal: {same_spec}; rebuilt input equal: {same_value}")
    ok = job_ok and schemas_ok and same_spec and same_value
    print()
    print("demo: OK" if ok else "demo: FAILED")
    sys.stdout.flush()
    return 0 if ok else 1
