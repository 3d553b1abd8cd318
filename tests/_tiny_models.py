"""Tiny transformers models built from config (no download, eager attention) and their caches.

One builder per model family the cache tests cover; each returns a model in eval mode whose forward takes
``cache=`` and returns ``.cache`` (transformers 5). Sizes are the smallest that keep every code path (a
sliding window shorter than the prefill, linear-attention heads, a mixture of experts with two experts).
Also used by the custom-operator tests and the benchmarks.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

VOCAB = 64
_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=128,
)


def config(model_type: str, **overrides: Any) -> Any:
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(model_type, **{**_COMMON, **overrides})
    cfg._attn_implementation = "eager"
    return cfg


def _causal(cfg: Any) -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


def llama() -> Any:
    return _causal(config("llama"))


def llama_sized(hidden: int, layers: int, vocab: int = VOCAB) -> Any:
    """A Llama of another size: the artifact tests weigh an archive against weights that outweigh its programs."""
    return _causal(config("llama", num_hidden_layers=layers, hidden_size=hidden, intermediate_size=2 * hidden, vocab_size=vocab, head_dim=hidden // 4))


def jamba() -> Any:
    """Jamba: a Mamba mixer in layer 0 (its module holds the config), attention in layer 1; the reference PyTorch
    Mamba path (``use_mamba_kernels=False``: no CUDA kernels)."""
    return _causal(config(
        "jamba", num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2,
        attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False,
    ))  # fmt: skip


def mistral(sliding_window: int = 5) -> Any:
    return _causal(config("mistral", sliding_window=sliding_window))


def gemma2(sliding_window: int = 5) -> Any:
    return _causal(config("gemma2", sliding_window=sliding_window))


def gemma3(sliding_window: int = 5) -> Any:
    return _causal(
        config(
            "gemma3_text",
            sliding_window=sliding_window,
            num_hidden_layers=3,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        )
    )


def qwen3_next(layers: int = 4) -> Any:
    """Qwen3-Next: ``layers - 1`` gated delta-net (linear attention) layers, then a full-attention one."""
    return _causal(
        config(
            "qwen3_next",
            num_hidden_layers=layers,
            layer_types=["linear_attention"] * (layers - 1) + ["full_attention"],
            linear_num_value_heads=2,
            linear_num_key_heads=2,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            num_experts=2,
            num_experts_per_tok=1,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
        )
    )


def llama4() -> Any:
    """Llama 4 text: its rotary embedding computes in complex numbers, its attention keeps one chunk of 16 keys."""
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    cfg = Llama4TextConfig(**_COMMON, intermediate_size_mlp=64, num_local_experts=2, num_experts_per_tok=1, attention_chunk_size=16)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return Llama4ForCausalLM(cfg).eval()


def lfm2() -> Any:
    return _causal(config("lfm2", num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"]))


CAUSAL: dict[str, Callable[[], Any]] = {
    "llama": llama,
    "mistral": mistral,
    "gemma2": gemma2,
    "gemma3": gemma3,
    "qwen3_next": qwen3_next,
    "lfm2": lfm2,
}


def t5() -> Any:
    from transformers import AutoConfig, T5ForConditionalGeneration

    cfg = AutoConfig.for_model(
        "t5", vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return T5ForConditionalGeneration(cfg).eval()


def whisper() -> Any:
    from transformers import AutoConfig, WhisperForConditionalGeneration

    cfg = AutoConfig.for_model(
        "whisper", vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=16,
        max_target_positions=32, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return WhisperForConditionalGeneration(cfg).eval()


def ids(n: int, batch: int = 1, seed: int = 1) -> Any:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (batch, n), generator=g)


def prefill(model: Any, n: int, cache: Any = None, batch: int = 1) -> tuple[Any, Any]:
    """(logits, cache) after a prefill of ``n`` tokens (with ``cache`` if given, else the model's own)."""
    kwargs = {} if cache is None else {"cache": cache}
    with torch.no_grad():
        out = model(ids(n, batch), use_cache=True, **kwargs)
    return out.logits, out.cache


def decode(model: Any, cache: Any, steps: int, batch: int = 1, seed: int = 7) -> list[Any]:
    """The logits of ``steps`` one-token decode steps on ``cache`` (updated in place)."""
    out = []
    for i in range(steps):
        with torch.no_grad():
            step = model(ids(1, batch, seed + i), cache=cache, use_cache=True)
        out.append(step.logits)
    return out


def encoder_decoder_prefill(model: Any, n: int, cache: Any = None) -> tuple[Any, Any, Any]:
    """(logits, cache, encoder outputs) of a T5 or Whisper model after a decoder prefill of ``n`` tokens."""
    kwargs = {} if cache is None else {"cache": cache}
    with torch.no_grad():
        if model.config.model_type == "whisper":
            g = torch.Generator().manual_seed(3)
            features = torch.randn(1, model.config.num_mel_bins, 2 * model.config.max_source_positions, generator=g)
            encoder = model.get_encoder()(features)
        else:
            encoder = model.get_encoder()(input_ids=ids(6, seed=3))
        out = model(encoder_outputs=encoder, decoder_input_ids=ids(n), use_cache=True, **kwargs)
    return out.logits, out.cache, encoder


def encoder_decoder_decode(model: Any, cache: Any, encoder: Any, steps: int, seed: int = 7) -> list[Any]:
    out = []
    for i in range(steps):
        with torch.no_grad():
            step = model(encoder_outputs=encoder, decoder_input_ids=ids(1, seed=seed + i), cache=cache, use_cache=True)
        out.append(step.logits)
    return out


def minimax() -> Any:
    """Lightning (linear) attention and full attention layers in turn, with its own cache class, MiniMaxCache,
    which keeps one entry per linear layer in a list (``[]`` for the attention layers)."""
    cfg = config("minimax", num_hidden_layers=4, num_local_experts=2, num_experts_per_tok=1, block_size=4,
                 layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])
    return _causal(cfg)


def register_minimax_cache() -> Any:
    """MiniMaxCache registered with the serializer (once per process): a DynamicCache plus its list."""
    from transformers import DynamicCache
    from transformers.models.minimax.modeling_minimax import MiniMaxCache

    from piece_by_piece_serialize import register_cache_class
    from piece_by_piece_serialize.type_info import cache_kind

    if cache_kind("MiniMaxCache") is None:
        register_cache_class(MiniMaxCache, like=DynamicCache, lists={"linear_cache": list})
    return MiniMaxCache


def gemma3n() -> Any:
    """The text model of Gemma3n: its last layers of each attention type reuse the keys and values of the layers
    before them through a KVSharingDict (``num_kv_shared_layers=2``); altup and laurel blocks, per-layer inputs."""
    from transformers import Gemma3nForCausalLM, Gemma3nTextConfig

    cfg = Gemma3nTextConfig(
        **{**_COMMON, "num_hidden_layers": 4},
        vocab_size_per_layer_input=VOCAB,
        hidden_size_per_layer_input=8,
        sliding_window=5,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        num_kv_shared_layers=2,
        laurel_rank=4,
        altup_num_inputs=2,
        activation_sparsity_pattern=[0.0] * 4,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return Gemma3nForCausalLM(cfg).eval()


class Logits(torch.nn.Module):
    """What the custom-operator tests export: input ids to logits, no cache."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any) -> Any:
        return self.model(input_ids, use_cache=False).logits


def assert_same_generation(model: Any, reference: Any) -> None:
    """Greedy ``generate`` of 6 tokens after a 5-token prompt of batch 2: the same tokens from both models."""
    x = ids(5, 2)
    mask = torch.ones_like(x)
    with torch.no_grad():
        want = reference.generate(x, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
        got = model.generate(x, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert want.shape == (2, 11) and torch.equal(got, want)
