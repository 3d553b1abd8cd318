"""The eager run that records each piece's calls (export/_record.py): a decode step of a tiny Llama whose every
layer receives the whole cache is recorded exactly, in about two copies of the cache, not one per layer
(Note [shared copies])."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from piece_by_piece_serialize import make_copy  # noqa: E402
from piece_by_piece_serialize.export._record import module_paths, run_recording  # noqa: E402

LAYERS = 8


def _storage_bytes(values: list) -> int:
    seen: dict[int, int] = {}

    def walk(x: object) -> None:
        if isinstance(x, torch.Tensor):
            seen[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, transformers.DynamicCache):
            walk([[layer.keys, layer.values] for layer in x.layers])

    walk(values)
    return sum(seen.values())


def test_a_decode_step_is_recorded_exactly_in_two_copies_of_its_cache():
    model = tiny.llama_sized(32, LAYERS)
    _, cache = tiny.prefill(model, 40)
    token = tiny.ids(1, seed=3)
    after = make_copy(cache)
    with torch.no_grad():
        model(token, cache=after)  # what each layer's call leaves in the cache
    watched = {f"model.layers.{i}": layer for i, layer in enumerate(model.model.layers)}
    recording = run_recording(lambda t, c: model(t, cache=c), (token, cache), module_paths(model), watched)

    kept = []
    for i in range(LAYERS):
        (call,) = recording.calls[f"model.layers.{i}"]
        (before,) = [v for v in call.kwargs.values() if isinstance(v, transformers.DynamicCache)]
        (behind,) = call.caches_after
        for j in range(LAYERS):  # layers already called hold the new token, the others not yet
            want = after.layers[j] if j < i else cache.layers[j]
            torch.testing.assert_close(before.layers[j].keys, want.keys, rtol=0, atol=0)
            torch.testing.assert_close(before.layers[j].values, want.values, rtol=0, atol=0)
            want = after.layers[j] if j <= i else cache.layers[j]
            torch.testing.assert_close(behind.layers[j].keys, want.keys, rtol=0, atol=0)
            assert before.layers[j].keys is not cache.layers[j].keys  # copies, never the caller's tensors
        kept += [call.args, call.kwargs, call.output, call.caches_after]
    cache_bytes = _storage_bytes([cache])
    # the prefill's layers once, the grown layers once, and each layer's small hidden states and masks
    assert cache_bytes * 2 < _storage_bytes(kept) < cache_bytes * 2.5
