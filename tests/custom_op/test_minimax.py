"""MiniMax end to end: its decoder layers (lightning attention and full attention in turn) behind custom
operators, with MiniMaxCache, a DynamicCache plus a list of linear states, registered with
``register_cache_class(lists={"linear_cache": list})``: eager prefill and decode steps equal the model and leave
the caller's cache in the same state, ``generate`` gives the same tokens, and ``torch.export`` with a dynamic
batch and sequence gives one call node per layer and the model's logits at other shapes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import replace_with_custom_ops, restore_modules  # noqa: E402


@pytest.fixture()
def models() -> tuple[Any, Any, list[str]]:
    tiny.register_minimax_cache()
    model = tiny.minimax()
    reference = copy.deepcopy(model)
    from transformers.models.minimax.modeling_minimax import MiniMaxDecoderLayer

    paths = replace_with_custom_ops(model, MiniMaxDecoderLayer, "pbp_minimax_" + str(id(model)))
    yield model, reference, paths
    restore_modules(model)


def test_eager_prefill_decode_and_cache_state(models) -> None:
    model, reference, paths = models
    assert paths == [f"model.layers.{i}" for i in range(4)]
    for batch in (1, 2):
        got_logits, got_cache = tiny.prefill(model, 7, batch=batch)
        want_logits, want_cache = tiny.prefill(reference, 7, batch=batch)
        assert type(got_cache).__name__ == "MiniMaxCache" and len(got_cache.linear_cache) == 3
        assert torch.equal(got_logits, want_logits)
        assert_same_state(want_cache, got_cache)
        for got, want in zip(tiny.decode(model, got_cache, 4, batch), tiny.decode(reference, want_cache, 4, batch), strict=True):
            assert torch.equal(got, want)
        assert_same_state(want_cache, got_cache)
        assert got_cache.layers[1].keys.shape[-2] == 11  # layer 0 is linear: its length is in linear_cache


def test_generate_gives_the_same_tokens(models) -> None:
    model, reference, _ = models
    tiny.assert_same_generation(model, reference)


class _LogitsAndState(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any) -> Any:
        out = self.model(input_ids, use_cache=True)
        return out.logits, out.cache.linear_cache[0], out.cache.layers[1].keys


def test_export_with_dynamic_batch_and_sequence(models) -> None:
    model, reference, paths = models
    with torch.no_grad():  # calibration: eager calls of other sizes teach the operators their output shapes
        for batch, n in ((2, 5), (3, 9)):
            model(tiny.ids(n, batch), use_cache=True)
    dims = {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=128)}
    program = torch.export.export(_LogitsAndState(model), (tiny.ids(6, 2),), dynamic_shapes=(dims,), strict=False)
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace.startswith("pbp_minimax_")]
    assert len(calls) == len(paths) == 4
    for batch, n in ((1, 3), (4, 11)):
        x = tiny.ids(n, batch, seed=5)
        with torch.no_grad():
            want = _LogitsAndState(reference)(x)
            got = program.module()(x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=0, atol=1e-5)
