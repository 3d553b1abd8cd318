"""Tiny mixture-of-experts models of transformers 5, built from config (no download, eager attention).

Each family computes its experts through transformers' ``grouped_mm`` experts, which under ``torch.export`` call
the custom operator ``transformers::grouped_mm_fallback``: four experts, two per token, so that a short prompt
leaves some expert without a token. Two layers; a family whose first layer is dense (DeepSeek-V3, GLM-4-MoE)
has one dense and one mixture layer. Used by the ONNX tests and bench/families.py. LongCat-Flash
(:func:`longcat_flash`) is apart: its experts loop over the experts chosen, in Python, a branch on the data.
"""

from __future__ import annotations

from typing import Any

import _tiny_models as tiny

FAMILIES: dict[str, dict[str, Any]] = {
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=16),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "phimoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=5, layer_types=["sliding_attention", "full_attention"]),
    "deepseek_v3": dict(
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1,
        n_group=1, topk_group=1, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
        num_key_value_heads=4,  # multi-head latent attention: as many key-value heads as heads
    ),
    "glm4_moe": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
    "granitemoehybrid": dict(
        num_local_experts=4, num_experts_per_tok=2, layer_types=["mamba", "attention"], mamba_n_heads=4, mamba_d_head=16,
        mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=4,
    ),
    "minimax": dict(num_local_experts=4, num_experts_per_tok=2, block_size=4, layer_types=["linear_attention", "full_attention"]),
}


def moe(family: str) -> Any:
    """The tiny model of ``family`` (a key of :data:`FAMILIES`)."""
    return tiny._causal(tiny.config(family, **FAMILIES[family]))


def longcat_flash() -> Any:
    """A tiny LongCat-Flash: one decoder layer (two attention sublayers, two cache layers), its experts four
    routed and two zero (identity) experts, two per token, chosen in a Python loop over the experts hit."""
    return tiny._causal(tiny.config(
        "longcat_flash", num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
        v_head_dim=8, n_routed_experts=4, moe_topk=2, zero_expert_num=2, expert_ffn_hidden_size=16,
    ))  # fmt: skip
