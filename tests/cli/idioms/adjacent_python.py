import torch

lib = torch.library.Library("myops", "FRAGMENT")
lib.define(
    "attn(Tensor q, Tensor k, Tensor v, "  # the query, key and value
    'float scale=1.0, '
    """bool causal=False) -> Tensor"""
)
