"""``pbp-serialize demo`` (what ``make demo`` runs): the main job, end to end, on real torch objects.

Part 1 checks every operator schema registered in the installed torch with our parser, linter and
printer, comparing with torch on each one, and prints the summary. Part 2 builds the kind of nested
input a decoder-only LLM receives (token ids, attention mask, position ids, a per-layer key/value list
and a nested dict of image inputs), encodes its TreeSpec name, prints the name and its tree, and checks
that the name decodes to the very same TreeSpec and rebuilds an equal input. The exit code is 0 only
when both parts hold.
"""

from __future__ import annotations

import sys
from typing import Any

from ._check import check_torch, render_text

__all__ = ["demo", "llm_input"]


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


def demo(*, quiet: bool = False) -> int:
    """Run both parts, printing to stdout; return 0 when everything checked out, else 1."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from .treespec_name import pretty_name, tree_spec_as_name, tree_spec_from_name

    print(f"== 1. schema check over every operator schema registered in torch {torch.__version__}")

    def show(finding: Any) -> None:
        if finding.severity == "error":
            print(render_text(finding))

    summary = check_torch(quiet=quiet, emit=show)
    for line in summary.lines():
        print(line)
    schemas_ok = summary.errors == 0 and summary.parsed + summary.torch_rejects_own == summary.total

    print()
    print("== 2. the TreeSpec name of a realistic LLM input")
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
    same_value = tree_flatten(rebuilt)[1] == spec and all(a is b for a, b in zip(tree_flatten(rebuilt)[0], leaves))
    print(f"decoded spec equal: {same_spec}; rebuilt input equal: {same_value}")
    ok = schemas_ok and same_spec and same_value
    print()
    print("demo: OK" if ok else "demo: FAILED")
    sys.stdout.flush()
    return 0 if ok else 1
