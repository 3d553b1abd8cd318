"""Gemma3n end to end: its decoder layers share keys and values through a KVSharingDict that the model makes
per forward call and the last layers of each attention type read (Note [shared arguments] in
serialize/_kv_sharing.py). Behind custom operators, what a layer stores in it is written back into the caller's
dict, so the layers after it read it: eager prefill and decode steps equal the model (logits and cache),
``generate`` gives the same tokens, and ``torch.export`` gives one call node per layer and the model's logits at
other shapes."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import replace_with_custom_ops, restore_modules  # noqa: E402


@pytest.fixture()
def models():
    model = tiny.gemma3n()
    reference = copy.deepcopy(model)
    from transformers.models.gemma3n.modeling_gemma3n import Gemma3nTextDecoderLayer

    paths = replace_with_custom_ops(model, Gemma3nTextDecoderLayer, f"pbp_gemma3n_{id(model)}")
    yield model, reference, paths
    restore_modules(model)


def test_the_layers_share_keys_and_values(models) -> None:
    model, _, paths = models
    attention = [layer.self_attn for layer in model.model.layers]
    assert [(a.store_full_length_kv, a.is_kv_shared_layer) for a in attention] == [(True, False), (True, False), (False, True), (False, True)]
    assert paths == [f"model.layers.{i}" for i in range(4)]


def test_eager_prefill_and_decode_equal_the_model(models) -> None:
    model, reference, _ = models
    for batch in (1, 2):
        got_logits, got_cache = tiny.prefill(model, 7, batch=batch)
        want_logits, want_cache = tiny.prefill(reference, 7, batch=batch)
        assert torch.equal(got_logits, want_logits)
        assert_same_state(want_cache, got_cache)
        for got, want in zip(tiny.decode(model, got_cache, 4, batch), tiny.decode(reference, want_cache, 4, batch), strict=True):
            assert torch.equal(got, want)
        assert_same_state(want_cache, got_cache)


def test_generate_gives_the_same_tokens(models) -> None:
    model, reference, _ = models
    tiny.assert_same_generation(model, reference)


def test_export_with_dynamic_batch_and_sequence(models) -> None:
    model, reference, _ = models
    with torch.no_grad():  # calibration: eager calls of other sizes teach the operators their output shapes
        for batch, n in ((2, 5), (3, 9)):
            model(tiny.ids(n, batch), use_cache=False)
    dims = {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=128)}
    program = torch.export.export(tiny.Logits(model), (tiny.ids(6, 2),), dynamic_shapes=(dims,), strict=False)
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace.startswith("pbp_gemma3n_")]
    assert len(calls) == 4
    for batch, n in ((1, 3), (4, 11)):
        x = tiny.ids(n, batch, seed=5)
        with torch.no_grad():
            torch.testing.assert_close(program.module()(x), tiny.Logits(reference)(x), rtol=0, atol=1e-5)
