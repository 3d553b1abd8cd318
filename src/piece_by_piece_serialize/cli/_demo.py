"""``pbp-serialize demo`` (what ``make demo`` runs): the main job, end to end, on real torch objects.

Part 1 is the job itself: a tiny Llama built from config (transformers, no download, eager attention)
gets its decoder layers replaced by custom operators (:func:`replace_with_custom_ops`); a prefill and
decode steps must give the same logits and the same cache as the untouched model; then
``torch.export.export(strict=False)`` with a dynamic batch and sequence, whose custom-operator call nodes
are printed, must give the same logits as eager at other shapes. Part 2 checks every operator schema
registered in the installed torch with our parser, linter and printer, comparing with torch on each one.
Part 3 encodes the TreeSpec name of the kind of nested input a decoder-only LLM receives and checks that
it decodes to the very same TreeSpec. The exit code is 0 only when all three hold.

Imports: :mod:`._check` (the torch run) and :mod:`._findings`; the library's :mod:`..custom_op` and
:mod:`..treespec_name`, torch and transformers only inside the parts that use them.
"""

from __future__ import annotations

import sys
from typing import Any

from ._check import check_torch
from ._findings import render_text

__all__ = ["custom_op_job", "demo", "llm_input", "tiny_llama"]


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


def _logits_module(model: Any) -> Any:
    """What is exported: token ids to logits, without a cache (a module class made here: torch is imported on use)."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any) -> Any:
            return self.model(input_ids, use_cache=False).logits

    return Logits()


def _ids(batch: int, n: int, seed: int) -> Any:
    import torch

    return torch.randint(0, 128, (batch, n), generator=torch.Generator().manual_seed(seed))


def _same_cache(a: Any, b: Any) -> bool:
    import torch

    return len(a.layers) == len(b.layers) and all(
        torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values) for x, y in zip(a.layers, b.layers, strict=True)
    )


def custom_op_job() -> bool:
    """Part 1: print the job on a tiny Llama; True when eager and exported outputs equal the original's."""
    import copy
    import time

    import torch

    try:
        import transformers
    except ImportError:
        print("transformers is not installed: pip install 'piece-by-piece-serialize[transformers]'")
        return False
    from ..custom_op import replace_with_custom_ops, restore_modules

    model = tiny_llama()
    reference = copy.deepcopy(model)
    layer_class = type(model.model.layers[0])
    print(f"model: {type(model).__name__} (transformers {transformers.__version__}), {len(model.model.layers)} x {layer_class.__name__}")
    paths = replace_with_custom_ops(model, layer_class, "pbp_demo")
    for path in paths:
        print(f"  {path} -> torch.ops.{model.get_submodule(path)._pbp_op.qualname.replace('::', '.')}")

    with torch.no_grad():
        ours = model(_ids(2, 7, 1), use_cache=True)
        theirs = reference(_ids(2, 7, 1), use_cache=True)
        diffs = [(ours.logits - theirs.logits).abs().max().item()]
        for step in range(4):
            token = _ids(2, 1, 10 + step)
            diffs.append((model(token, cache=ours.cache).logits - reference(token, cache=theirs.cache).logits).abs().max().item())
    eager_ok = max(diffs) == 0.0 and _same_cache(ours.cache, theirs.cache)
    print(
        f"eager, batch 2: prefill 7 tokens + 4 decode steps: max |logits - original| = {max(diffs):g}; "
        f"cache ({ours.cache.get_seq_length()} tokens) equal to the original's: {_same_cache(ours.cache, theirs.cache)}"
    )

    with torch.no_grad():  # calibration: the operators learn their output shapes from eager calls of two sizes
        for batch, n in ((2, 5), (3, 9)):
            model(_ids(batch, n, 2), use_cache=False)
    batch_dim, seq_dim = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=200)
    start = time.perf_counter()
    program = torch.export.export(_logits_module(model), (_ids(2, 6, 3),), dynamic_shapes=({0: batch_dim, 1: seq_dim},), strict=False)
    print(f"torch.export.export(strict=False), dynamic batch and sequence: {time.perf_counter() - start:.1f} s; custom-operator nodes:")
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == "pbp_demo"]
    for node in calls:
        tensors, key = node.args
        print(f"  %{node.name} = {node.target}([{len(tensors)} tensors], {key!r})")
    exported = program.module()
    worst = 0.0
    for b, n in ((1, 3), (4, 11), (3, 150)):
        x = _ids(b, n, 4)
        with torch.no_grad():
            worst = max(worst, (exported(x) - reference(x, use_cache=False).logits).abs().max().item())
    export_ok = len(calls) == len(paths) and worst <= 1e-5
    print(f"exported vs the original at (batch, seq) = (1, 3), (4, 11), (3, 150): max |diff| = {worst:g}")
    restore_modules(model)
    return eager_ok and export_ok


def demo(*, quiet: bool = False) -> int:
    """Run the three parts, printing to stdout; return 0 when everything checked out, else 1."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from ..treespec_name import pretty_name, tree_spec_as_name, tree_spec_from_name

    print("== 1. a tiny Llama with its decoder layers behind custom operators")
    job_ok = custom_op_job()

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
