"""Caches of real (tiny) models survive the round trip: decoding on from the rebuilt cache is decoding on.

For each model family and cache kind: a prefill (shorter and longer than the sliding window where there is
one), then ``type_as_str_with_info`` + ``serialize_one`` + ``deserialize_args``; the rebuilt cache has every
attribute of the original (names, order, values; the very same tensors without ``clone``), and three decode
steps from the original and from a cloned rebuild give equal logits, bit for bit, and leave equal caches.
Models are built from config (no download), with eager attention.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import deserialize_args, make_copy, serialize_one, type_as_str_with_info  # noqa: E402

STEPS = 3


def _static(model: Any) -> Any:
    return transformers.StaticCache(config=model.config, max_cache_len=16)


def _fp8(model: Any) -> Any:
    return transformers.QuantizedCache(backend="fp8", config=model.config)


# (family, cache factory or None for the model's own DynamicCache, prefill length, expected spelling)
CASES: list[tuple[str, Callable[[Any], Any] | None, int, str]] = [
    ("llama", None, 7, "DynamicCache_On_2D"),
    ("mistral", None, 3, "DynamicCache_On_2S5"),  # prefill shorter than the window (5)
    ("mistral", None, 7, "DynamicCache_On_2S5"),  # longer: the layers keep 4 states of 7 tokens
    ("gemma2", None, 3, "DynamicCache_On_S5_D"),
    ("gemma2", None, 7, "DynamicCache_On_S5_D"),
    ("gemma3", None, 7, "DynamicCache_On_S5_D_S5"),
    ("qwen3_next", None, 7, "DynamicCache_On_3Aysc4hp_D"),
    ("lfm2", None, 7, "DynamicCache_On_Aysc3p_D_Aysc3p"),
    ("llama", _static, 7, "StaticCache_On_2T16"),
    ("mistral", _static, 3, "StaticCache_On_2V5"),
    ("mistral", _static, 7, "StaticCache_On_2V5"),
    ("gemma2", _static, 7, "StaticCache_On_V5_T16"),
    ("qwen3_next", _static, 7, "StaticCache_On_3Aysc4hp_T16"),
    ("llama", _fp8, 7, "QuantizedCache_On_2F"),
]


def _linear_counts_tokens() -> bool:
    """transformers >= 5.25 gives linear-attention layers a cumulative_length_linear tensor (the "l" parameter)."""
    return "cumulative_length_linear" in vars(transformers.cache_utils.LinearAttentionLayer())


def _here(spelling: str) -> str:
    """The spelling as the installed transformers makes it: the cases are written for 5.24; with 5.25 the
    linear-attention layers gain the "l" parameter (built on the parsed AST, not by editing the string)."""
    import dataclasses

    from piece_by_piece_serialize import parse_type_info

    info = parse_type_info(spelling)
    if not _linear_counts_tokens() or not hasattr(info, "runs"):
        return spelling
    runs = tuple(
        dataclasses.replace(run, layer=dataclasses.replace(run.layer, params=(*run.layer.params, ("l", None))))
        if run.layer.states
        else run
        for run in info.runs
    )
    return str(dataclasses.replace(info, runs=runs))


def _id(case: tuple[str, Any, int, str]) -> str:
    family, factory, n, _ = case
    return f"{family}-{factory.__name__.strip('_') if factory else 'dynamic'}-prefill{n}"


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    return {}


def _model(models: dict[str, Any], family: str) -> Any:
    if family not in models:
        models[family] = tiny.CAUSAL[family]()
    return models[family]


def _round_trip(cache: Any) -> tuple[str, Any, Any]:
    text = type_as_str_with_info(cache)
    flat = serialize_one(cache, "cache", None)
    assert all(isinstance(x, torch.Tensor) for x in flat), "a cache flattens to tensors only"
    (same,) = deserialize_args(list(flat), [text])
    (cloned,) = deserialize_args(list(flat), [text], clone=True)
    return text, same, cloned


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_decoding_on_from_a_rebuilt_cache(models: dict[str, Any], case: tuple[str, Any, int, str]) -> None:
    family, factory, n, spelling = case
    model = _model(models, family)
    _, cache = tiny.prefill(model, n, None if factory is None else factory(model))
    text, same, rebuilt = _round_trip(cache)
    assert text == _here(spelling)
    assert assert_same_state(cache, same, same_tensors=True) > len(cache.layers)  # zero copy, all state
    assert assert_same_state(cache, rebuilt) > len(cache.layers)
    expected = tiny.decode(model, cache, STEPS)
    got = tiny.decode(model, rebuilt, STEPS)
    for i, (a, b) in enumerate(zip(expected, got)):
        assert torch.equal(a, b), f"decode step {i}: logits differ"
    assert_same_state(cache, rebuilt)  # both caches went through the same updates


def test_make_copy_keeps_all_state(models: dict[str, Any]) -> None:
    for family, factory in (("gemma2", None), ("qwen3_next", None), ("mistral", _static), ("llama", _fp8)):
        model = _model(models, family)
        _, cache = tiny.prefill(model, 7, None if factory is None else factory(model))
        copied = make_copy(cache)
        assert_same_state(cache, copied)
        before = {id(x) for x in serialize_one(cache, "c", None) if x.numel()}
        assert before and not before & {id(x) for x in serialize_one(copied, "c", None)}, "make_copy clones every tensor"
        assert torch.equal(tiny.decode(model, cache, 1)[0], tiny.decode(model, copied, 1)[0])


def test_the_comparison_sees_a_lost_count(models: dict[str, Any]) -> None:
    """Negative control: the spelling written before (W) drops cumulative_length, and the decode differs.

    This is the silent wrong answer the library used to give for Mistral, Gemma2 and Gemma3 after a prefill
    longer than the window; the test above would catch it.
    """
    model = _model(models, "mistral")
    _, cache = tiny.prefill(model, 7)
    assert [layer.cumulative_length for layer in cache.layers] == [7, 7]
    flat = [x for layer in cache.layers for x in (layer.keys.clone(), layer.values.clone())]
    (legacy,) = deserialize_args(flat, ["DynamicCache_2W5"])
    assert [layer.cumulative_length for layer in legacy.layers] == [4, 4]
    with pytest.raises(AssertionError, match="cumulative_length"):
        assert_same_state(cache, legacy)
    expected = tiny.decode(model, cache, 1)[0]
    assert not torch.equal(expected, tiny.decode(model, legacy, 1)[0])


@pytest.mark.parametrize("family", ["t5", "whisper"])
def test_encoder_decoder_caches(family: str) -> None:
    model = getattr(tiny, family)()
    _, cache, encoder = tiny.encoder_decoder_prefill(model, 4)
    assert type(cache).__name__ == "EncoderDecoderCache"
    text, same, rebuilt = _round_trip(cache)
    assert text == "EncoderDecoderCache_On_2D__On_2D"
    assert_same_state(cache, same, same_tensors=True)
    assert_same_state(cache, rebuilt)
    expected = tiny.encoder_decoder_decode(model, cache, encoder, STEPS)
    got = tiny.encoder_decoder_decode(model, rebuilt, encoder, STEPS)
    assert all(torch.equal(a, b) for a, b in zip(expected, got))
    assert_same_state(cache, rebuilt)


def test_encoder_decoder_cache_of_static_caches() -> None:
    """Whisper with a StaticCache for self-attention (as its compiled generation uses) and a DynamicCache."""
    model = tiny.whisper()
    cache = transformers.EncoderDecoderCache(
        transformers.StaticCache(config=model.config, max_cache_len=12), transformers.DynamicCache(config=model.config)
    )
    _, cache, encoder = tiny.encoder_decoder_prefill(model, 4, cache)
    text, same, rebuilt = _round_trip(cache)
    assert text == "EncoderDecoderCache__StaticCache_On_2T12__DynamicCache_On_2D"
    assert_same_state(cache, same, same_tensors=True)
    expected = tiny.encoder_decoder_decode(model, cache, encoder, 2)
    got = tiny.encoder_decoder_decode(model, rebuilt, encoder, 2)
    assert all(torch.equal(a, b) for a, b in zip(expected, got))


def test_cache_inside_a_model_output(models: dict[str, Any]) -> None:
    """A whole CausalLMOutputWithPast with a hybrid cache, as a decoder's output travels."""
    model = _model(models, "qwen3_next")
    with torch.no_grad():
        out = model(tiny.ids(5), use_cache=True)
    text = type_as_str_with_info(out)
    flat = serialize_one(out, "out", None)
    (back,) = deserialize_args(list(flat), [text], clone=True)
    assert type(back) is type(out) and torch.equal(back.logits, out.logits)
    assert_same_state(out.cache, back.cache)
    assert torch.equal(tiny.decode(model, out.cache, 1)[0], tiny.decode(model, back.cache, 1)[0])
