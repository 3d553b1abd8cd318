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


def test_record_calls_gives_each_layer_inputs_that_export_it_alone_with_dynamic_shapes():
    from piece_by_piece_serialize import dynamic_shapes_from_examples, record_calls

    model = tiny.llama_sized(32, 2)
    runs = [record_calls(model, (tiny.ids(n, batch=b),), {"use_cache": False}, classes="LlamaDecoderLayer") for n, b in ((6, 2), (9, 3))]
    assert [list(r) for r in runs] == [["model.layers.0", "model.layers.1"]] * 2
    layer = model.model.layers[1]
    calls = [r["model.layers.1"][0] for r in runs]
    assert all(isinstance(c.output, torch.Tensor) and c.output.shape[1] == n for c, n in zip(calls, (6, 9), strict=True))
    shapes = dynamic_shapes_from_examples(layer, [(c.args, c.kwargs) for c in calls])
    program = torch.export.export(layer, calls[0].args, calls[0].kwargs, dynamic_shapes=shapes, strict=False)
    third = record_calls(model, (tiny.ids(13, batch=4),), {"use_cache": False}, paths="model.layers.1")["model.layers.1"][0]
    with torch.no_grad():
        torch.testing.assert_close(program.module()(*third.args, **third.kwargs), third.output, rtol=0, atol=1e-6)
        torch.testing.assert_close(layer(*third.args, **third.kwargs), third.output, rtol=0, atol=0)


def test_record_calls_leaves_a_cache_as_it_was_and_records_it_as_each_layer_received_it():
    from piece_by_piece_serialize import record_calls

    model = tiny.llama_sized(32, 3)
    _, cache = tiny.prefill(model, 5)
    keys = [layer.keys.clone() for layer in cache.layers]
    calls = record_calls(model, (tiny.ids(1, seed=4),), {"cache": cache}, paths=["model.layers.0", "model.layers.2"])
    assert [layer.keys.shape[-2] for layer in cache.layers] == [5, 5, 5]  # the caller's cache did not grow
    assert all(torch.equal(a.keys, b) for a, b in zip(cache.layers, keys, strict=True))
    (seen,) = [v for v in calls["model.layers.2"][0].kwargs.values() if isinstance(v, transformers.DynamicCache)]
    assert [layer.keys.shape[-2] for layer in seen.layers] == [6, 6, 5]  # layers 0 and 1 ran before layer 2


def test_record_calls_refuses_what_names_no_submodule():
    from piece_by_piece_serialize import record_calls

    model = tiny.llama_sized(32, 1)
    x = tiny.ids(4)
    with pytest.raises(ValueError, match="not both, not neither"):
        record_calls(model, (x,))
    with pytest.raises(ValueError, match="not both, not neither"):
        record_calls(model, (x,), classes="LlamaDecoderLayer", paths="model.layers.0")
    with pytest.raises(ValueError, match=r"'model\.layers\.7' names no submodule of the LlamaForCausalLM"):
        record_calls(model, (x,), paths="model.layers.7")
    with pytest.raises(ValueError, match="record_calls"):
        record_calls(model, (x,), classes="MistralDecoderLayer")
    with pytest.raises(TypeError, match="args must be a tuple"):
        record_calls(model, x, paths="model.layers.0")


def test_a_static_cache_changed_in_place_is_recorded_as_each_layer_received_it():
    from piece_by_piece_serialize import record_calls

    model = tiny.llama_sized(32, 3)
    cache = transformers.StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad():
        model(tiny.ids(5), cache=cache, use_cache=True)
    calls = record_calls(model, (tiny.ids(1, seed=4),), {"cache": cache, "cache_position": torch.tensor([5])},
                         classes="LlamaDecoderLayer")  # fmt: skip
    written = []  # per call, which layers hold the new token at position 5 when the layer receives the cache
    for i in range(3):
        (seen,) = [v for v in calls[f"model.layers.{i}"][0].kwargs.values() if isinstance(v, transformers.StaticCache)]
        written.append([bool(layer.keys[:, :, 5].abs().sum() > 0) for layer in seen.layers])
    assert written == [[False, False, False], [True, False, False], [True, True, False]]
    assert all(layer.keys[:, :, 5].abs().sum() == 0 for layer in cache.layers)  # the caller's cache as it was
