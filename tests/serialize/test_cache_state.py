"""Every class of transformers.cache_utils, in every state its own methods leave it in, round-trips whole.

The state an adapter carries is checked against the classes themselves: each layer and cache class is
driven by transformers (constructors, ``update``, ``update_conv_state``, ``reset``, ``crop``, early
initialization, ...), and for every object so made the adapter must account for every attribute, the
rebuilt object must have the same attributes in the same order with equal values (the very same tensors),
and the adapter must not declare an attribute that no object has. A new attribute in a new transformers
release fails here (and is refused by name at run time), instead of being silently dropped.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any, Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
cu = pytest.importorskip("transformers.cache_utils")

from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import deserialize_args, serialize_one, type_as_str_with_info  # noqa: E402
from piece_by_piece_serialize.serialize import _caches  # noqa: E402

_caches._loaded()


def kv(n: int = 3, d: int = 4, heads: int = 2, batch: int = 1) -> Any:
    return torch.randn(batch, heads, n, d)


# --------------------------------------------------------------------------------------------------
# layers in the states transformers leaves them in


def _dynamic() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.DynamicLayer()
    layer = cu.DynamicLayer()
    layer.update(kv(), kv())
    yield "updated", layer
    layer = cu.DynamicLayer()
    layer.lazy_initialization(kv(0), kv(0))  # early_initialization: a rank-1 empty placeholder
    yield "early-initialized", layer
    layer = cu.DynamicLayer()
    layer.update(kv(), kv())
    layer.crop(-1)
    yield "cropped", layer


def _sliding() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.DynamicSlidingWindowLayer(sliding_window=4)
    for n in (2, 7):
        layer = cu.DynamicSlidingWindowLayer(sliding_window=4)
        layer.update(kv(n), kv(n))
        layer.update(kv(1), kv(1))
        yield f"{n}+1 tokens", layer
    layer = cu.DynamicSlidingWindowLayer(sliding_window=4)
    layer.activate_past_recording()
    layer.update(kv(6), kv(6))
    yield "recording the past", layer
    layer = cu.DynamicSlidingWindowLayer(sliding_window=4)
    layer.update(kv(6), kv(6))
    layer.reset()
    yield "reset", layer


def _indexed() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.DynamicIndexedLayer()
    layer = cu.DynamicIndexedLayer()
    layer.update(kv(), kv())
    yield "keys only", layer
    layer = cu.DynamicIndexedLayer()
    layer.update(kv(), kv())
    layer.update_indexer(torch.randn(1, 3, 4))
    layer.indexer_position_ids = torch.arange(3).view(1, 1, 3)
    yield "indexer and positions", layer


def _static() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.StaticLayer(max_cache_len=8)
    layer = cu.StaticLayer(max_cache_len=8)
    layer.update(kv(3), kv(3))
    layer.update(kv(1), kv(1))
    yield "4 tokens", layer
    layer.reset()
    yield "reset", layer


def _static_sliding() -> Iterator[tuple[str, Any]]:
    for max_len, window in ((8, 4), (4, 8)):
        yield f"fresh max{max_len} window{window}", cu.StaticSlidingWindowLayer(max_cache_len=max_len, sliding_window=window)
        layer = cu.StaticSlidingWindowLayer(max_cache_len=max_len, sliding_window=window)
        for n in (3, 1, 1, 1):
            layer.update(kv(n), kv(n))
        yield f"6 tokens max{max_len} window{window}", layer


def _static_indexed() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.StaticIndexedLayer(max_cache_len=8)
    layer = cu.StaticIndexedLayer(max_cache_len=8)
    layer.update(kv(), kv())
    layer.update_indexer(torch.randn(1, 3, 4))
    yield "indexer", layer


def _fp8() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.Fp8QuantizedLayer()
    layer = cu.Fp8QuantizedLayer()
    layer.update(kv(3), kv(3))
    layer.update(kv(1), kv(1))
    yield "4 tokens", layer
    layer.reset()
    yield "reset", layer


def _linear_updates(layer: Any, conv: bool = True, recurrent: bool = True, state: int = 0) -> None:
    if conv:
        layer.update_conv_state(torch.randn(1, 6, 3), state_idx=state, conv_kernel_size=4)
    if recurrent:
        layer.update_recurrent_state(torch.randn(1, 2, 4, 4), state_idx=state)


def _linear() -> Iterator[tuple[str, Any]]:
    yield "fresh", cu.LinearAttentionLayer()
    layer = cu.LinearAttentionLayer()
    _linear_updates(layer)
    yield "conv and recurrent", layer
    layer = cu.LinearAttentionLayer()
    _linear_updates(layer, recurrent=False)
    _linear_updates(layer, recurrent=False)
    yield "conv only, two steps", layer
    layer = cu.LinearAttentionLayer()
    _linear_updates(layer, conv=False)
    yield "recurrent only", layer
    layer = cu.LinearAttentionLayer(number_of_states=2)
    _linear_updates(layer, state=1)
    yield "second of two states", layer
    layer = cu.LinearAttentionLayer()
    layer.activate_past_recording()
    _linear_updates(layer)
    yield "recording the past", layer
    layer = cu.LinearAttentionLayer()
    _linear_updates(layer)
    layer.reset()
    yield "reset", layer


def _hybrids(cls: type, **kwargs: Any) -> Callable[[], Iterator[tuple[str, Any]]]:
    def make() -> Iterator[tuple[str, Any]]:
        yield "fresh", cls(**kwargs)
        layer = cls(**kwargs)
        layer.update(kv(), kv())
        _linear_updates(layer)
        yield "attention first", layer
        layer = cls(**kwargs)
        _linear_updates(layer)
        layer.update(kv(), kv())
        yield "linear first", layer  # dtype is set: the conv state came before the keys
        layer = cls(**kwargs)
        _linear_updates(layer)
        yield "linear only", layer

    return make


LAYER_STATES: dict[type, Callable[[], Iterator[tuple[str, Any]]]] = {
    cu.DynamicLayer: _dynamic,
    cu.DynamicSlidingWindowLayer: _sliding,
    cu.DynamicIndexedLayer: _indexed,
    cu.StaticLayer: _static,
    cu.StaticSlidingWindowLayer: _static_sliding,
    cu.StaticIndexedLayer: _static_indexed,
    cu.Fp8QuantizedLayer: _fp8,
    cu.LinearAttentionLayer: _linear,
    cu.LinearAttentionAndFullAttentionLayer: _hybrids(cu.LinearAttentionAndFullAttentionLayer),
    cu.LinearAttentionAndSlidingWindowAttentionLayer: _hybrids(cu.LinearAttentionAndSlidingWindowAttentionLayer, sliding_window=4),
    cu.LinearAttentionAndStaticFullAttentionLayer: _hybrids(cu.LinearAttentionAndStaticFullAttentionLayer, max_cache_len=8),
    cu.LinearAttentionAndStaticSlidingWindowAttentionLayer: _hybrids(
        cu.LinearAttentionAndStaticSlidingWindowAttentionLayer, max_cache_len=8, sliding_window=4
    ),
    cu.DummyLayer: lambda: iter([("always", cu.DummyLayer())]),
}

# Classes of cache_utils that are not supported, each with the reason (and a test of its refusal below).
ABSTRACT = {cu.CacheLayerMixin, cu.LinearAttentionCacheLayerMixin, cu.BaseQuantizedLayer, cu.QuantizedLayer}
NOT_A_CACHE = {cu.KVSharingDict}  # a dict of shared key/value tuples, passed between layers, not a cache
# Supported layers whose constructors need a quantization backend (optimum-quanto, hqq): test_cache_quantized.py
# drives them where it is installed, and tests everywhere that they are refused by name without it.
BACKEND_LAYERS = {cu.QuantoQuantizedLayer, cu.HQQQuantizedLayer}


def _layer_cases() -> list[tuple[type, str, Any]]:
    return [(cls, state, layer) for cls, make in LAYER_STATES.items() for state, layer in make()]


LAYER_CASES = _layer_cases()


def _round_trip(cache: Any, clone: bool = False) -> tuple[str, Any]:
    text = type_as_str_with_info(cache)
    (back,) = deserialize_args(list(serialize_one(cache, "cache", None)), [text], clone=clone)
    return text, back


@pytest.mark.parametrize("cls, state, layer", LAYER_CASES, ids=[f"{c.__name__}-{s}" for c, s, _ in LAYER_CASES])
def test_every_layer_state_round_trips(cls: type, state: str, layer: Any) -> None:
    adapter = _caches.LAYERS[cls]
    assert set(vars(layer)) <= adapter.attributes, set(vars(layer)) - adapter.attributes
    cache = cu.Cache(layers=[layer])
    _, back = _round_trip(cache)
    # A layer that holds no tensors after a reset keeps attributes that transformers overwrites before it
    # reads them again (Note [derived attributes]): the rebuilt layer may lack those, and only those.
    missing = set(vars(layer)) - set(vars(back.layers[0]))
    assert not missing or (missing <= {"device", "indexer_dtype", "indexer_device"} and not layer.is_initialized), missing
    expected = {k: v for k, v in vars(layer).items() if k not in missing}
    assert_same_state(expected, vars(back.layers[0]), path=f"{cls.__name__}", same_tensors=True)
    assert type(back.layers[0]) is cls
    _, cloned = _round_trip(cache, clone=True)
    assert type(cloned.layers[0]) is cls


def test_every_declared_attribute_exists_on_some_object() -> None:
    """No adapter carries or derives an attribute that transformers' objects do not have."""
    seen: dict[type, set[str]] = {}
    for cls, _, layer in LAYER_CASES:
        seen.setdefault(cls, set()).update(vars(layer))
    # known from a newer release than the installed one (tests/serialize/test_cache_versions.py)
    newer = set() if "cumulative_length_linear" in vars(cu.LinearAttentionLayer()) else {"cumulative_length_linear"}
    for cls, names in seen.items():
        declared = _caches.LAYERS[cls].attributes - newer
        assert declared == names, (cls.__name__, declared ^ names)


def test_every_class_of_cache_utils_is_covered() -> None:
    classes = {c for _, c in inspect.getmembers(cu, inspect.isclass) if c.__module__ == cu.__name__}
    supported = {c for c in classes if c in _caches.SUPPORTED or c in _caches.LAYERS}
    refused = ABSTRACT | NOT_A_CACHE
    assert classes == supported | refused, f"new or unclassified classes: {sorted(c.__name__ for c in classes - supported - refused)}"
    assert not supported & refused
    caches = {c for c in supported if issubclass(c, cu.Cache)}
    assert len(supported) == 22 and len(caches) == 7, (len(supported), len(caches))
    assert set(LAYER_STATES) | BACKEND_LAYERS == supported - caches  # every supported layer class is driven
    assert cu.SlidingWindowCache is cu.StaticCache  # transformers 5 alias: spelled StaticCache


# --------------------------------------------------------------------------------------------------
# caches


def _filled(cache: Any, n_layers: int = 2) -> Any:
    for i in range(n_layers):
        cache.update(kv(), kv(), i)
    return cache


def _config() -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model(
        "gemma2", num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=4, hidden_size=8, sliding_window=4
    )


def _dflash() -> Any:
    cache = _filled(cu.DFlashCache())
    cache.set_previous_accepted_tokens(3)
    return cache


def _offloading() -> Any:
    cache = cu.DynamicCache(offloading=True, offload_only_non_sliding=True)
    cache.layers = [cu.DynamicLayer(), cu.DynamicSlidingWindowLayer(sliding_window=4)]
    for layer in cache.layers:  # on the CPU an offloading update needs no stream: fill the layers directly
        layer.update(kv(), kv())
    return cache


CACHE_CASES: dict[str, Callable[[], Any]] = {
    "DynamicCache()": lambda: _filled(cu.DynamicCache()),
    "DynamicCache(config)": lambda: _filled(cu.DynamicCache(config=_config())),
    "DynamicCache offloading": _offloading,
    "StaticCache": lambda: _filled(cu.StaticCache(config=_config(), max_cache_len=8)),
    "QuantizedCache fp8": lambda: _filled(cu.QuantizedCache(backend="fp8", config=_config_full())),
    "MtpCache": lambda: _filled(cu.MtpCache()),
    "DFlashCache": _dflash,
    "Cache(layers)": lambda: _filled(cu.Cache(layers=[cu.DynamicLayer(), cu.StaticLayer(max_cache_len=8)])),
    "EncoderDecoderCache": lambda: cu.EncoderDecoderCache(_filled(cu.DynamicCache()), _filled(cu.DynamicCache(), 1)),
    "EncoderDecoderCache static": lambda: cu.EncoderDecoderCache(
        _filled(cu.StaticCache(config=_config(), max_cache_len=8)), _filled(cu.DynamicCache(config=_config()))
    ),
}


def _config_full() -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model("llama", num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=4, hidden_size=8)


@pytest.mark.parametrize("name", CACHE_CASES)
def test_every_cache_class_round_trips(name: str) -> None:
    cache = CACHE_CASES[name]()
    _, back = _round_trip(cache)
    assert assert_same_state(cache, back, same_tensors=True) >= 3
    _, cloned = _round_trip(cache, clone=True)
    assert_same_state(cache, cloned)


def test_a_registered_pytree_cache_is_still_rebuilt_by_the_library() -> None:
    """With transformers' export helper registered (as export users do), nothing goes through its unflatten."""
    code = """
import torch
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.integrations.executorch import register_dynamic_cache_export_support
from piece_by_piece_serialize import deserialize_args, serialize_one, type_as_str_with_info
register_dynamic_cache_export_support()
cache = DynamicCache()
for i in range(2):
    cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), i)
value = {"cache": cache, "ids": torch.ones(1, 3)}
text = type_as_str_with_info(value)
flat = serialize_one(value, "v", None)
(back,) = deserialize_args(list(flat), [text])
layers = back["cache"].layers
print(text[:13], type(back["cache"]).__name__, back["cache"].layer_class_to_replicate is DynamicLayer,
      all(a.keys is b.keys and a.values is b.values for a, b in zip(cache.layers, layers)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["WithCaches__0", "DynamicCache", "True", "True"]


# --------------------------------------------------------------------------------------------------
# refusals: by name, never a partial rebuild


class _Sub(cu.DynamicLayer):
    pass


def test_unregistered_subclass_and_unknown_classes_are_refused() -> None:
    cache = cu.DynamicCache()
    cache.layers = [cu.DynamicLayer(), _Sub()]
    with pytest.raises(TypeError, match=r"layer 1 is a .*_Sub, which is not supported; supported layers are .*DynamicLayer.*register_cache_layer_class"):
        type_as_str_with_info(cache)


@pytest.mark.parametrize(
    "patch, message",
    [
        (lambda c: setattr(c.layers[0], "device", torch.device("meta")), r"layer 0 \(DynamicLayer\): device is meta while its keys are on cpu"),
        (lambda c: setattr(c.layers[1], "cumulative_length", 2.5), r"layer 1 \(DynamicSlidingWindowLayer\): cumulative_length is 2.5"),
        (lambda c: setattr(c.layers[1], "sliding_window", 0), "sliding_window is 0, not a positive int"),
        (lambda c: setattr(c, "layer_class_to_replicate", cu.StaticLayer), "layer_class_to_replicate is 'StaticLayer'; only None and DynamicLayer"),
        (lambda c: setattr(c, "extra", 1), r"DynamicCache has attribute 'extra' that this library does not know how to carry"),
        (lambda c: setattr(c.layers[0], "is_initialized", 1), "is_initialized is 1"),
    ],
)
def test_state_that_cannot_be_carried_is_refused_by_name(patch: Callable[[Any], None], message: str) -> None:
    cache = cu.DynamicCache()
    cache.layers = [cu.DynamicLayer(), cu.DynamicSlidingWindowLayer(sliding_window=4)]
    _filled(cache)
    patch(cache)
    with pytest.raises(TypeError, match=message):
        type_as_str_with_info(cache)
    with pytest.raises(TypeError, match="argument 'past'"):
        serialize_one(cache, "past", None)


def test_encoder_decoder_is_updated_must_agree_with_its_layers() -> None:
    cache = cu.EncoderDecoderCache(_filled(cu.DynamicCache()), _filled(cu.DynamicCache(), 1))
    cache.is_updated[0] = False
    with pytest.raises(TypeError, match=r"is_updated is \{0: False\} but its cross-attention layers say \{0: True\}"):
        type_as_str_with_info(cache)


@pytest.mark.parametrize(
    "items, text, error, message",
    [
        ([kv()] * 3, "DynamicCache_2D", ValueError, "needs 4 items from res[0] but res has only 3"),
        ([kv(), kv(), torch.zeros(3, 1)], "DynamicCache_S4", TypeError, "layer 0 (DynamicSlidingWindowLayer): item cumulative_length must be a count tensor"),
        ([kv(8), kv(8), torch.tensor(0)], "StaticCache_T4", ValueError, "must hold max_cache_len=4 positions"),
        ([kv(4), kv(4, batch=2), torch.tensor(0)], "StaticCache_T4", ValueError, "differ in batch or heads"),
        ([kv(4), kv(4), torch.tensor(0.5)], "StaticCache_T4", ValueError, "item cumulative_length must be a 0-d integer tensor"),
        ([kv(4), kv(4), torch.tensor(0)], "StaticCache_V4", ValueError, "needs 4 items from res[0] but res has only 3"),
        ([torch.zeros(1, 6, 4), 3], "DynamicCache_Asc4h", TypeError, "item recurrent_states[0] must be a tensor, got a int"),
        ([kv(), kv(), torch.zeros(2, 0)], "DFlashCache_D", TypeError, "item _previous_number_of_accepted_tokens must be a count tensor"),
    ],
)
def test_items_that_do_not_fit_name_the_layer_and_item(items: list[Any], text: str, error: type, message: str) -> None:
    for _ in range(2):  # cold and warm (the step compiled on the first call steps aside)
        with pytest.raises(error) as err:
            deserialize_args(items, [text])
        assert message in str(err.value)
