"""The hot path's shortcuts build exactly what the general route builds, and refuse nothing it accepts.

``deserialize_args`` compiles a step per type-info string (Note [deserialization steps] in serialize/_rebuild.py), and
caches are flattened and rebuilt inline for their common layers (Note [fast layers] in _caches.py). These
tests pin that both shortcuts are invisible: the objects are the same down to ``vars()`` (names, order,
values) as those transformers itself fills and as the general route builds, every value the general route
accepts is still accepted (tensor subclasses, packed groups, ``clone=True``), errors are the same on a cold
and a warm call, and the step cache stays bounded.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
cache_utils = pytest.importorskip("transformers.cache_utils")

from _pbp_compare import assert_same  # noqa: E402

from piece_by_piece_serialize.serialize import _rebuild as serialize  # noqa: E402  # the steps and the parse cache live there
from piece_by_piece_serialize.serialize import _caches  # noqa: E402
from piece_by_piece_serialize.serialize import (  # noqa: E402
    deserialize_args,
    serialize_args,
    serialize_one,
    type_as_str_with_info,
)


def t(*shape: int) -> Any:
    return torch.randn(shape or (2, 3))


def _dynamic(n_layers: int = 3) -> Any:
    cache = cache_utils.DynamicCache()
    for i in range(n_layers):
        cache.update(t(1, 2, 3, 4), t(1, 2, 3, 4), i)
    return cache


def _hybrid() -> Any:
    cache = cache_utils.DynamicCache()
    cache.layers = [
        cache_utils.DynamicLayer(),
        cache_utils.DynamicSlidingWindowLayer(sliding_window=4),
        cache_utils.DynamicLayer(),
        cache_utils.DynamicLayer(),  # stays empty
    ]
    for i in range(3):
        cache.update(t(1, 2, 2, 4), t(1, 2, 2, 4), i)
    return cache


def _encoder_decoder() -> Any:
    cross = cache_utils.DynamicCache()
    cross.layers = [cache_utils.DynamicSlidingWindowLayer(sliding_window=3)]
    cross.update(t(1, 2, 2, 4), t(1, 2, 2, 4), 0)
    return cache_utils.EncoderDecoderCache(_dynamic(2), cross)


def _static() -> Any:
    cache = cache_utils.Cache(
        layers=[
            cache_utils.StaticLayer(max_cache_len=6),
            cache_utils.StaticSlidingWindowLayer(max_cache_len=6, sliding_window=3),
            cache_utils.StaticSlidingWindowLayer(max_cache_len=2, sliding_window=4),
            cache_utils.StaticLayer(max_cache_len=6),  # stays empty
        ]
    )
    for step in range(2):
        for i in range(3):
            cache.update(t(1, 2, 2, 4), t(1, 2, 2, 4), i)
    return cache


def _linear() -> Any:
    cache = cache_utils.DynamicCache()
    cache.layers = [cache_utils.LinearAttentionLayer(), cache_utils.DynamicLayer(), cache_utils.LinearAttentionLayer(number_of_states=2)]
    cache.layers[0].update_conv_state(t(1, 6, 3), conv_kernel_size=4)
    cache.layers[0].update_recurrent_state(t(1, 2, 4, 4))
    cache.layers[1].update(t(1, 2, 3, 4), t(1, 2, 3, 4))
    cache.layers[2].update_recurrent_state(t(1, 2, 4, 4), state_idx=1)
    cache.layer_class_to_replicate = None
    return cache


CACHES = {"dynamic": _dynamic, "hybrid": _hybrid, "encoder_decoder": _encoder_decoder, "static": _static, "linear": _linear}
N_LAYERS = {"dynamic": 3, "hybrid": 4, "encoder_decoder": 3, "static": 4, "linear": 3}


def _parts(cache: Any) -> list[Any]:
    if type(cache) is cache_utils.EncoderDecoderCache:
        return [cache.self_attention_cache, cache.cross_attention_cache]
    return [cache]


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)
    return type(a) is type(b) and a == b


def _assert_same_vars(expected: Any, got: Any, tensors_identical: bool = True) -> int:
    """Same attribute names in the same order and equal values on the cache, its parts and every layer.

    Returns the number of layers compared.
    """
    assert type(got) is type(expected)
    n = 0
    if type(expected) is cache_utils.EncoderDecoderCache:
        assert list(vars(got)) == list(vars(expected))
        assert got.is_updated == expected.is_updated
    for old, new in zip(_parts(expected), _parts(got), strict=True):
        assert list(vars(new)) == list(vars(old))
        assert new.layer_class_to_replicate is old.layer_class_to_replicate
        assert new.offloading is old.offloading
        assert len(new.layers) == len(old.layers)
        for old_layer, new_layer in zip(old.layers, new.layers):
            assert type(new_layer) is type(old_layer)
            assert list(vars(new_layer)) == list(vars(old_layer)), (vars(old_layer), vars(new_layer))
            for name, value in vars(old_layer).items():
                other = getattr(new_layer, name)
                if name in ("keys", "values") and tensors_identical:
                    assert other is value, name
                else:
                    assert _same_value(value, other), (name, value, other)
            n += 1
    return n


@pytest.mark.parametrize("kind", CACHES)
def test_rebuilt_cache_is_what_transformers_itself_filled(kind: str) -> None:
    cache = CACHES[kind]()
    text = type_as_str_with_info(cache)
    flat = serialize_one(cache, "past", None)
    serialize._STEPS.pop(text, None)
    for _ in range(2):  # cold (parse, compile the step) and warm (the step)
        (back,) = deserialize_args(list(flat), [text])
        assert _assert_same_vars(cache, back) == N_LAYERS[kind]
    assert text in serialize._STEPS


class _NoSteps(dict):  # type: ignore[type-arg]
    """A step cache that never holds anything: every argument takes the general route."""

    def get(self, key: Any, default: Any = None) -> Any:
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _values() -> dict[str, Any]:
    a, b = t(), t(4)
    return {
        "tensor": a,
        "none": None,
        "bool": True,
        "int": 7,
        "float": 2.5,
        "list": [a, b],
        "dict": {"x": a, "y": b},
        "tree": {"x": (a, 3), "y": [None, b]},
        "dynamic": _dynamic(2),
        "hybrid": _hybrid(),
        "encoder_decoder": _encoder_decoder(),
        "with_caches": [a, _dynamic(1)],
        "static": _static(),
        "linear": _linear(),
    }


def test_steps_and_the_general_route_build_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    values = _values()
    args = tuple(values.values())
    types = [type_as_str_with_info(v) for v in args]
    flat = serialize_args(args, None, None)
    fast = deserialize_args(flat, types)
    fast_again = deserialize_args(flat, types)  # every string has its step now
    assert all(tt in serialize._STEPS for tt in types)
    monkeypatch.setattr(serialize, "_STEPS", _NoSteps())
    general = deserialize_args(flat, types)
    assert len(fast) == len(general) == len(values) == 14
    n_tensors = 0
    for name, want, got_fast, got_again, got_general in zip(values, args, fast, fast_again, general):
        for got in (got_fast, got_again):
            n_tensors += assert_same(got_general, got, same_objects=True, path=name)
            if name in CACHES:
                _assert_same_vars(got_general, got)
        assert_same(want, got_general, same_objects=True, path=name)
    assert n_tensors == 2 * (1 + 2 + 2 + 2 + 4 + 6 + 6 + 3 + 6 + 5)


def test_tensor_subclasses_take_the_general_route() -> None:
    # Parameters (and FakeTensors under torch.export) are tensors, but not exactly torch.Tensor: the steps
    # step aside and the general route accepts them, as before.
    kv = [torch.nn.Parameter(t(1, 2, 3, 4)) for _ in range(4)]
    for _ in range(2):
        (cache,) = deserialize_args(kv, ["DynamicCache_2D"])
        assert [x for layer in cache.layers for x in (layer.keys, layer.values)] == kv
        assert all(layer.device == kv[0].device for layer in cache.layers)
        p = torch.nn.Parameter(t())
        assert deserialize_args([p, [p, p]], ["Tensor", "list__2"])[0] is p
        out = deserialize_args([p, p], ["dict__2_a__b"])[0]
        assert out["a"] is p and out["b"] is p


def test_packed_groups_and_clone_after_a_warm_step() -> None:
    k = [t(1, 2, 3, 4) for _ in range(4)]
    text = "DynamicCache_2D"
    deserialize_args(k, [text])  # warm
    (packed,) = deserialize_args([k], [text])  # the group comes as one list (Tensor[] output)
    assert [x for layer in packed.layers for x in (layer.keys, layer.values)] == k
    (cloned,) = deserialize_args(k, [text], clone=True)
    assert assert_same(packed, cloned) == 4
    assert all(layer.keys is not x for layer, x in zip(cloned.layers, k[0::2]))
    a = t()
    deserialize_args([a, a], ["list__2"])
    assert deserialize_args([[a, a]], ["list__2"])[0] == [a, a]


@pytest.mark.parametrize(
    "res, text, error, message",
    [
        ([torch.zeros(1)] * 6, "DynamicCache_2D_W4", ValueError, "layer 0 (DynamicLayer): item keys has shape (1,)"),
        ([torch.zeros(2, 3)] * 3 + [torch.zeros(3)], "DynamicCache_2D", ValueError, "layer 1 (DynamicLayer): item values has shape (3,)"),
        (
            [torch.zeros(2, 3)] * 2 + [torch.zeros(())] * 2,
            "EncoderDecoderCache_D__D",
            ValueError,
            "cross_attention_cache layer 0 (DynamicLayer): item keys has shape ()",
        ),
        ([torch.zeros(2, 3)] * 3 + [1, torch.zeros(2, 3)], "DynamicCache_2D", TypeError, "item values must be a tensor, got a int"),
        ([torch.zeros(2, 3)] * 2 + [1.5], "DynamicCache_S4", TypeError, "item cumulative_length must be a count tensor torch.empty((n, 0)) carrying the count n, got a float"),
        (
            [torch.zeros(1, 2, 3, 4)] * 2 + [torch.zeros(())],
            "StaticCache_T8",
            ValueError,
            "keys (1, 2, 3, 4) and values (1, 2, 3, 4) must hold max_cache_len=8 positions",
        ),
        ([torch.zeros(2, 3)] * 3, "DynamicCache_2D", ValueError, "needs 4 items from res[0] but res has only 3"),
        ([True], "int", TypeError, "expects a Python int but res[0] is a bool"),
        ([1], "float", TypeError, "expects a Python float but res[0] is a int"),
        ([torch.zeros(1)], "None", TypeError, "'None' but res[0] is a Tensor"),
        ([None], "Tensor", TypeError, "'Tensor' but res[0] is a NoneType"),
        ([torch.zeros(1), 3], "list__2", TypeError, "expects tensors only, got a int"),
        ([torch.zeros(1), [torch.zeros(1)], torch.zeros(1)], "___v1_T_X3_E", TypeError, "item 1 of its 3 items is a list"),
    ],
)
def test_errors_are_the_same_cold_and_warm(res: list[Any], text: str, error: type, message: str) -> None:
    serialize._STEPS.pop(text, None)
    messages = []
    for _ in range(2):  # cold: parsed and compiled on this call; warm: its step steps aside
        with pytest.raises(error) as err:
            deserialize_args(res, [text])
        messages.append(str(err.value))
    assert text in serialize._STEPS
    assert messages[0] == messages[1]
    assert message in messages[0]


def test_a_layer_with_unknown_state_is_refused_by_name() -> None:
    """A transformers release that adds an attribute to a layer: refused, naming it, on every route."""
    cache = _hybrid()
    cache.layers[0].new_attribute = 0
    cache.layers[1].other_state = 1
    out = [t()]
    assert _caches.flatten_into(cache, out) is False and len(out) == 1
    with pytest.raises(TypeError, match="layer 0 .DynamicLayer. has attribute 'new_attribute' that this library does not know"):
        type_as_str_with_info(cache)
    with pytest.raises(TypeError, match="argument 'past'.*'new_attribute'"):
        serialize_args((t(),), {"past": cache}, None, ["x", "past"])
    del cache.layers[0].new_attribute
    with pytest.raises(TypeError, match="layer 1 .DynamicSlidingWindowLayer. has attribute 'other_state'"):
        serialize_one(cache, "past", None)


def test_step_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialize, "_STEPS", {})
    monkeypatch.setattr(serialize, "_STEPS_MAX", 3)
    a = t()
    for n in range(1, 8):
        assert deserialize_args([a] * n, [f"list__{n}"])[0] == [a] * n
        assert len(serialize._STEPS) <= 3
    assert "list__7" in serialize._STEPS
    long_key = "k" * 2000  # longer than the parse cache keeps: neither parsed into it nor stepped
    assert deserialize_args([a], [f"dict__1_{long_key}"])[0] == {long_key: a}
    assert f"dict__1_{long_key}" not in serialize._STEPS


class _UnknownLayer:
    pass


def test_serialize_args_flattens_caches_in_place_or_not_at_all() -> None:
    good = _dynamic(2)
    flat = serialize_args((t(), good), None, None)
    assert len(flat) == 5 and flat[1] is good.layers[0].keys and flat[4] is good.layers[1].values
    bad = _dynamic(2)
    bad.layers.append(_UnknownLayer())
    out = [t()]
    assert _caches.flatten_into(bad, out) is False and len(out) == 1  # nothing appended
    with pytest.raises(TypeError, match="positional argument 1.*layer 2 is a .*_UnknownLayer"):
        serialize_args((t(), bad), None, None)
    with pytest.raises(TypeError, match="argument 'past'.*layer 2 is a .*_UnknownLayer"):
        serialize_args((t(),), {"past": bad}, None, ["x", "past"])
    flat = serialize_args((t(),), {"past": good}, None, ["x", "past"])[0]
    assert len(flat) == 5 and flat[1] is good.layers[0].keys


# The compiled builders against the general route, item by item:
# "DynamicCache_2D" takes the one-loop builder of plain decoder caches, "DynamicCache_D_S4_D" the per-layer
# makers (its D layers through _cache_fast._dynamic).
_PAIRS = {
    "cpu": lambda: (t(1, 2, 3, 4), t(1, 2, 3, 4)),
    "cpu:0": lambda: (torch.zeros(1, 2, 3, 4, device="cpu:0"), torch.zeros(1, 2, 3, 4, device=torch.device("cpu", 0))),
    "meta": lambda: (torch.empty(1, 2, 3, 4, device="meta"), torch.empty(1, 2, 3, 4, device="meta")),
    "meta keys, cpu values": lambda: (torch.empty(1, 2, 3, 4, device="meta"), t(1, 2, 3, 4)),
    "non-contiguous": lambda: (t(1, 2, 4, 3).transpose(2, 3), t(2, 1, 3, 4)[:1]),
    "2-D": lambda: (t(2, 3), t(3, 2)),
    "sparse": lambda: (t(2, 3).to_sparse(), t(2, 3).to_sparse()),
    "int64": lambda: (torch.ones(1, 2, 3, 4, dtype=torch.long), torch.ones(1, 2, 3, 4, dtype=torch.long)),
}
_REFUSED = {
    "1-D keys": lambda: (t(4), t(1, 2, 3, 4)),
    "1-D values": lambda: (t(1, 2, 3, 4), t(4)),
    "0-D keys": lambda: (torch.zeros(()), t(1, 2, 3, 4)),
    "meta 1-D values": lambda: (torch.empty(1, 2, 3, 4, device="meta"), torch.empty(3, device="meta")),
    "a Parameter": lambda: (torch.nn.Parameter(t(1, 2, 3, 4)), t(1, 2, 3, 4)),
    "an int": lambda: (t(1, 2, 3, 4), 3),
}


def _fast_and_general(text: str, items: list[Any]) -> tuple[Any, Any]:
    info = serialize._parse_cached(text)
    fast = _caches.builder(info)(items)
    try:
        general = _caches.rebuild(info, items)
    except (TypeError, ValueError) as e:
        general = e
    return fast, general


def _sliding_items(keys: Any, values: Any) -> list[Any]:
    return [keys, values, keys, values, torch.empty((5, 0)), keys, values]


@pytest.mark.parametrize("text", ["DynamicCache_2D", "DynamicCache_D_S4_D"])
@pytest.mark.parametrize("case", _PAIRS)
def test_compiled_builders_build_what_the_adapters_build(text: str, case: str) -> None:
    keys, values = _PAIRS[case]()
    items = [keys, values, keys, values] if text == "DynamicCache_2D" else _sliding_items(keys, values)
    fast, general = _fast_and_general(text, items)
    assert fast is not None and not isinstance(general, Exception), general
    assert list(vars(fast)) == list(vars(general))
    assert len(fast.layers) == len(general.layers) == (2 if text == "DynamicCache_2D" else 3)
    for want, got in zip(general.layers, fast.layers, strict=True):
        assert type(got) is type(want) and list(vars(got)) == list(vars(want))
        for name, value in vars(want).items():
            other = getattr(got, name)
            if isinstance(value, torch.Tensor):  # a meta tensor has no values to compare (_same_value's torch.equal)
                assert other is value or (
                    type(other) is type(value) and (other.dtype, other.device, other.shape) == (value.dtype, value.device, value.shape)
                    and (value.is_meta or torch.equal(other, value))
                ), name
            else:
                assert type(other) is type(value) and other == value, (name, value, other)
    for layer in (fast.layers[0], fast.layers[-1]):
        assert type(layer.device) is torch.device and layer.device == keys.device
        assert str(layer.device) == str(keys.device) and layer.device.index == keys.device.index


@pytest.mark.parametrize("text", ["DynamicCache_2D", "DynamicCache_D_S4_D"])
@pytest.mark.parametrize("case", _REFUSED)
@pytest.mark.parametrize("layer", [0, 1])
def test_compiled_builders_leave_what_the_adapters_refuse_or_check(text: str, case: str, layer: int) -> None:
    good = [t(1, 2, 3, 4), t(1, 2, 3, 4)]
    pair = list(_REFUSED[case]())
    if text == "DynamicCache_2D":
        items = good + pair if layer else pair + good
    else:
        items = _sliding_items(*good) if layer else _sliding_items(*pair)
        if layer:
            items[-2:] = pair
    fast, general = _fast_and_general(text, items)
    assert fast is None  # the general route: it raises, or accepts the subclass
    if case == "a Parameter":
        index = layer if text == "DynamicCache_2D" else 2 * layer  # the first or the last D layer
        assert type(general.layers[index].keys) is torch.nn.Parameter
    else:
        assert isinstance(general, (TypeError, ValueError)), general


@pytest.mark.parametrize("device", ["cpu", "cpu:0", "meta"])
def test_static_maker_carries_the_device_the_adapter_gives(device: str) -> None:
    keys, values = torch.zeros(1, 2, 6, 4, device=device), torch.zeros(1, 2, 6, 4, device=device)
    fast, general = _fast_and_general("StaticCache_On_T6", [keys, values, torch.tensor(2)])
    assert fast is not None and not isinstance(general, Exception), general
    assert list(vars(fast.layers[0])) == list(vars(general.layers[0]))
    assert fast.layers[0].device == general.layers[0].device == keys.device
    assert fast.layers[0].keys is keys and fast.layers[0].cumulative_length is general.layers[0].cumulative_length
