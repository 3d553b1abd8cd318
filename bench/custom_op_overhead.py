"""The cost of a module behind a custom operator, eager, against the bare module (``make bench``).

One decode step of a whole model with a 7-token DynamicCache (the cache is cropped back after each step, on
both sides), on the demo's tiny Llama (hidden size 32: the fixed cost per call shows the most) and on two
layers of a mid-sized Llama (hidden 1024); and one tiny decoder layer called alone on a 7-token prefill
without a cache. Ours has the layers behind operators (flatten, dispatcher, rebuild, cache write
back); the baseline is the untouched model. No target: the ratio is what a user pays per call, and it
shrinks as the layers get bigger.
"""

from __future__ import annotations

import argparse
import copy
import itertools

from _timing import Row, interleaved, section

_ns = (f"pbpbench{i}" for i in itertools.count())


def _medium_llama() -> object:
    """Two decoder layers of a mid-sized Llama (hidden 1024, 16 heads, 4 key/value heads): a layer costs
    about a millisecond on a CPU core, closer to what the operators wrap in practice."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "llama", vocab_size=128, hidden_size=1024, intermediate_size=2816, num_hidden_layers=2,
        num_attention_heads=16, num_key_value_heads=4, head_dim=64,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def _decode_step(args: argparse.Namespace, label: str, model: object) -> Row:
    import torch

    from piece_by_piece_serialize import replace_with_custom_ops

    # both sides are copies: a deep copy's weights can sit in memory that makes its matrix products slower
    # than the original's (measured: 13% on the hidden-1024 model), which would be charged to the operators
    bare, wrapped = copy.deepcopy(model), copy.deepcopy(model)
    replace_with_custom_ops(wrapped, type(bare.model.layers[0]), next(_ns))
    ids = torch.randint(0, 128, (1, 7), generator=torch.Generator().manual_seed(0))
    token = ids[:, :1]
    with torch.no_grad():
        caches = {name: m(ids, use_cache=True).cache for name, m in (("ours", wrapped), ("bare", bare))}

        def step(model: object, cache: object) -> None:
            model(token, cache=cache)
            cache.crop(-1)  # back to the 7 prefill tokens

        t = interleaved(
            {"ours": lambda: step(wrapped, caches["ours"]), "bare": lambda: step(bare, caches["bare"])},
            repeats=3 if args.quick else 15,
            number=20 if args.quick else 100,
        )
    return Row("custom_op", f"{label} decode step, 2 layers behind custom operators (eager)", t["ours"],
               "the same model, layers not replaced", t["bare"], note="7-token DynamicCache")


@section("custom_op")
def custom_op_overhead(args: argparse.Namespace) -> list[Row]:
    import torch

    from piece_by_piece_serialize.cli._demo import tiny_llama
    from piece_by_piece_serialize import replace_with_custom_ops

    rows: list[Row] = []
    for label, model in (("tiny Llama (hidden 32)", tiny_llama()), ("Llama, hidden 1024", _medium_llama())):
        rows.append(_decode_step(args, label, model))
    model = tiny_llama()
    bare, wrapped = copy.deepcopy(model), copy.deepcopy(model)
    replace_with_custom_ops(wrapped, type(bare.model.layers[0]), next(_ns))
    with torch.no_grad():

        hidden = torch.randn(1, 7, 32)
        position_ids = torch.arange(7)[None]
        embeddings = bare.model.rotary_emb(hidden, position_ids)
        layer, wrapped_layer = bare.model.layers[0], wrapped.model.layers[0]
        t = interleaved(
            {
                "ours": lambda: wrapped_layer(hidden, position_embeddings=embeddings, position_ids=position_ids),
                "bare": lambda: layer(hidden, position_embeddings=embeddings, position_ids=position_ids),
            },
            repeats=3 if args.quick else 15,
            number=20 if args.quick else 100,
        )
        rows.append(Row("custom_op", "one LlamaDecoderLayer call behind its custom operator (eager, no cache)", t["ours"],
                        "the bare layer", t["bare"], note="7 tokens"))
    return rows
