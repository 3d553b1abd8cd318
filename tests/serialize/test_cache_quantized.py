"""The group-wise quantized layers (QuantoQuantizedLayer, HQQQuantizedLayer) round-trip whole, or are refused.

Their quantized states are objects of a backend (optimum-quanto's tensor subclass, hqq's tensor and metadata
dict), taken apart into plain tensors and rebuilt (Note [quantized states] in _cache_quantized.py). Where a
backend is installed (``pip install piece-by-piece-serialize[quantized]``; the test extra leaves them out,
see docs), each layer is driven by transformers into every state its methods leave (prefill, residual
tokens, flushes into the quantized states, deferred beam reorderings, reset, every ``nbits``, both axes,
half precision) and must come back with every attribute, the backend objects included; a tiny Llama with a
``QuantizedCache`` decodes on from the rebuilt cache with logits equal bit for bit. Without a backend, a
spelling of its layer kind is refused with a message that names the class and the package to install; that
refusal is tested everywhere (the import is made to fail where the backend is installed).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
cu = pytest.importorskip("transformers.cache_utils")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import (  # noqa: E402
    deserialize_args,
    make_copy,
    serialize_one,
    type_as_str_with_info,
)
from piece_by_piece_serialize.serialize import _cache_quantized, _caches  # noqa: E402
from piece_by_piece_serialize.type_info import parse_type_info  # noqa: E402

_caches._loaded()

HAVE = {
    "quanto": not isinstance(_cache_quantized._quanto(), _cache_quantized._Missing),
    "hqq": not isinstance(_cache_quantized._hqq(), _cache_quantized._Missing),
}
CLASSES = {"quanto": cu.QuantoQuantizedLayer, "hqq": cu.HQQQuantizedLayer}
CODES = {"quanto": "Q", "hqq": "H"}
PACKAGES = {"quanto": "optimum-quanto", "hqq": "hqq"}
OTHER_AXIS = {"quanto": -1, "hqq": 1}


def _backends(*names: str) -> list[Any]:
    return [pytest.param(b, marks=pytest.mark.skipif(not HAVE[b], reason=f"{PACKAGES[b]} is not installed")) for b in names]


BACKENDS = _backends("quanto", "hqq")


def kv(n: int, batch: int = 1, dtype: Any = torch.float32) -> Any:
    return torch.randn(batch, 2, n, 8, dtype=dtype)


# --------------------------------------------------------------------------------------------------
# comparing layers whose states are backend objects


def _plain(value: Any) -> Any:
    """``value`` with every quanto tensor subclass replaced by what it holds (its class, size, stride, dtype,
    device, requires_grad and instance attributes), so that assert_same_state compares all of it and requires
    the very same plain tensors inside."""
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
        return {
            "class": type(value),
            "size": tuple(value.size()),
            "stride": tuple(value.stride()),
            "dtype": value.dtype,
            "device": value.device,
            "requires_grad": value.requires_grad,
            "vars": {k: _plain(v) for k, v in vars(value).items()},
        }
    if type(value) is tuple:
        return tuple(_plain(v) for v in value)
    if type(value) is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value


def assert_same_layer(expected: Any, got: Any, same_tensors: bool = True) -> None:
    assert type(got) is type(expected)
    state = vars(expected)
    if not expected.is_initialized:  # a reset layer keeps the device transformers overwrites before reading it
        state = {k: v for k, v in state.items() if k != "device"}
    assert list(vars(got)) == list(state), (list(vars(got)), list(state))
    assert_same_state({k: _plain(v) for k, v in state.items()}, {k: _plain(v) for k, v in vars(got).items()}, type(got).__name__, same_tensors)
    for name in ("qtype", "quantizer"):  # the very objects transformers' constructor takes from the backend
        if name in state:
            assert getattr(got, name) is state[name]


def _round_trip(cache: Any, clone: bool = False) -> tuple[str, list[Any], Any]:
    text = type_as_str_with_info(cache)
    flat = list(serialize_one(cache, "cache", None))
    assert all(type(x) is torch.Tensor for x in flat), [type(x).__name__ for x in flat]
    (back,) = deserialize_args(list(flat), [text], clone=clone)
    return text, flat, back


# --------------------------------------------------------------------------------------------------
# every state of a layer


def _states(backend: str) -> Iterator[tuple[str, Any]]:
    cls = CLASSES[backend]
    other = OTHER_AXIS[backend]
    base = dict(nbits=4, q_group_size=16, residual_length=2)

    def layer(**kwargs: Any) -> Any:
        return cls(**{**base, **kwargs})

    yield "fresh", layer()
    x = layer()
    x.update(kv(5), kv(5))
    yield "prefill (quantized, empty residual)", x
    x = layer()
    x.update(kv(5), kv(5))
    x.update(kv(1), kv(1))
    yield "one residual token", x
    x.update(kv(1), kv(1))
    yield "flushed into the quantized states", x
    x = layer(residual_length=0)
    x.update(kv(3), kv(3))
    x.update(kv(1), kv(1))
    yield "residual_length 0 (every step flushes)", x
    x = layer()
    x.update(kv(4, batch=2), kv(4, batch=2))
    x.reorder_cache(torch.tensor([1, 0]))
    yield "beam reordering deferred", x
    x = layer(residual_length=3)
    x.update(kv(4, batch=2), kv(4, batch=2))
    x.update(kv(1, batch=2), kv(1, batch=2))
    x.reorder_cache(torch.tensor([1, 1]))
    x.reorder_cache(torch.tensor([1, 0]))
    yield "two reorderings composed, residual reordered", x
    x.update(kv(1, batch=2), kv(1, batch=2))
    yield "reordering still deferred after an update", x
    x.update(kv(1, batch=2), kv(1, batch=2))
    yield "reordering baked in by a flush", x
    x.reset()
    yield "reset", x
    for nbits in _cache_quantized._QUANTO_NBITS if backend == "quanto" else _cache_quantized._HQQ_NBITS:
        x = layer(nbits=nbits, q_group_size=8)
        x.update(kv(4), kv(4))
        x.update(kv(1), kv(1))
        yield f"nbits {nbits}", x
    group = 2 if backend == "quanto" else 8  # quanto groups along the other axis: 2 per (batch, head, token)
    for axes in ((other, 0), (0, other), (other, other)):
        x = layer(axis_key=axes[0], axis_value=axes[1], q_group_size=group)
        x.update(kv(4), kv(4))
        x.update(kv(1), kv(1))
        x.update(kv(1), kv(1))
        yield f"axes {axes}", x
    for dtype in (torch.bfloat16, torch.float16):
        x = layer()
        x.update(kv(4, dtype=dtype), kv(4, dtype=dtype))
        x.update(kv(1, dtype=dtype), kv(1, dtype=dtype))
        yield f"{dtype}".replace("torch.", ""), x


def _cases() -> list[Any]:
    out = []
    for backend in ("quanto", "hqq"):
        if HAVE[backend]:
            out.extend(pytest.param(backend, name, layer, id=f"{backend}-{name}") for name, layer in _states(backend))
        else:
            out.append(pytest.param(backend, None, None, id=f"{backend}-not-installed", marks=pytest.mark.skip(reason=f"{PACKAGES[backend]} is not installed")))
    return out


STATE_CASES = _cases()


@pytest.mark.parametrize("backend, state, layer", STATE_CASES)
def test_every_layer_state_round_trips(backend: str, state: str, layer: Any) -> None:
    cls = CLASSES[backend]
    adapter = _caches.LAYERS[cls]
    assert set(vars(layer)) <= adapter.attributes, set(vars(layer)) - adapter.attributes
    cache = cu.Cache(layers=[layer])
    text, flat, back = _round_trip(cache)
    info = parse_type_info(text)
    assert len(flat) == info.n_items
    assert (info.layers[0].kind, info.layers[0].populated) == (CODES[backend], layer.is_initialized)
    assert type(back.layers[0]) is cls
    assert_same_layer(layer, back.layers[0])
    _, _, cloned = _round_trip(cache, clone=True)
    assert_same_layer(layer, cloned.layers[0], same_tensors=False)
    copied = make_copy(cache)
    assert_same_layer(layer, copied.layers[0], same_tensors=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_declared_attribute_exists_on_some_object(backend: str) -> None:
    seen: set[str] = set()
    for _, layer in _states(backend):
        seen.update(vars(layer))
    assert _caches.LAYERS[CLASSES[backend]].attributes == seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_the_string_and_the_items_say(backend: str) -> None:
    code = CODES[backend]
    layer = CLASSES[backend](nbits=2, axis_key=OTHER_AXIS[backend], q_group_size=8, residual_length=3)
    layer.update(kv(4, batch=2), kv(4, batch=2))
    layer.update(kv(1, batch=2), kv(1, batch=2))
    layer.reorder_cache(torch.tensor([1, 0]))
    cache = cu.Cache(layers=[layer, CLASSES[backend](q_group_size=64)])
    text, flat, _ = _round_trip(cache)
    assert text == f"Cache_On_{code}2g8r3kp_{code.lower()}4g64r128"
    names = parse_type_info(text).layers[0].item_names()
    items = dict(zip(names, flat))
    assert items["keys"] is layer.keys and items["values"] is layer.values
    assert items["cumulative_length"].shape == (5, 0) and items["_pending_beam_idx"] is layer._pending_beam_idx
    shape = "_quantized_keys.shape" if backend == "quanto" else "_quantized_keys[1]['shape']"
    assert items[shape].shape == (2, 2, 4, 8, 0) and items[shape].numel() == 0  # batch, heads, tokens, head_dim


# --------------------------------------------------------------------------------------------------
# real models: decoding on from the rebuilt cache

STEPS = 4

# (backend, QuantizedCache settings, prefill length, spelling); residual lengths short enough that the decode
# steps flush the residual into the quantized states, and transformers' defaults (group 64, residual 128)
MODEL_CASES = [
    ("quanto", {}, 8, "QuantizedCache_On_2Q4g64r128"),
    ("quanto", {"q_group_size": 16, "residual_length": 2}, 7, "QuantizedCache_On_2Q4g16r2"),
    ("quanto", {"nbits": 2, "axis_key": -1, "axis_value": -1, "q_group_size": 2, "residual_length": 3}, 7, "QuantizedCache_On_2Q2g2r3kv"),
    ("hqq", {}, 8, "QuantizedCache_On_2H4g64r128"),
    ("hqq", {"q_group_size": 16, "residual_length": 2}, 7, "QuantizedCache_On_2H4g16r2"),
    ("hqq", {"nbits": 3, "q_group_size": 8, "residual_length": 1}, 7, "QuantizedCache_On_2H3g8r1"),
    ("hqq", {"nbits": 8, "axis_key": 1, "axis_value": 1, "q_group_size": 16}, 7, "QuantizedCache_On_2H8g16r128kv"),
    ("hqq", {"nbits": 2, "axis_key": 1, "axis_value": 1, "q_group_size": 4, "residual_length": 0}, 7, "QuantizedCache_On_2H2g4kv"),
]


@pytest.fixture(scope="module")
def llama() -> Any:
    return tiny.llama()


@pytest.mark.parametrize(
    "backend, settings, n, spelling",
    [pytest.param(*case, id=f"{case[0]}-{case[3].split('_')[-1]}", marks=pytest.mark.skipif(not HAVE[case[0]], reason=f"{PACKAGES[case[0]]} is not installed")) for case in MODEL_CASES],
)
def test_decoding_on_from_a_rebuilt_cache(llama: Any, backend: str, settings: dict[str, int], n: int, spelling: str) -> None:
    cache = transformers.QuantizedCache(backend=backend, config=llama.config, **settings)
    _, cache = tiny.prefill(llama, n, cache)
    text, _, same = _round_trip(cache)
    assert text == spelling
    for a, b in zip(cache.layers, same.layers):
        assert_same_layer(a, b)
    _, _, rebuilt = _round_trip(cache, clone=True)
    copied = make_copy(cache)
    expected = tiny.decode(llama, cache, STEPS)
    for other in (rebuilt, copied):
        got = tiny.decode(llama, other, STEPS)
        for i, (a, b) in enumerate(zip(expected, got)):
            assert torch.equal(a, b), f"decode step {i}: logits differ"
        for a, b in zip(cache.layers, other.layers):  # both went through the same updates and flushes
            assert_same_layer(a, b, same_tensors=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_comparison_sees_a_changed_quantized_state(llama: Any, backend: str) -> None:
    """Negative control: the decode above would see a quantized state rebuilt wrong (here its scale halved)."""
    cache = transformers.QuantizedCache(backend=backend, config=llama.config, q_group_size=16, residual_length=2)
    _, cache = tiny.prefill(llama, 7, cache)
    text = type_as_str_with_info(cache)
    flat = [x.clone() for x in serialize_one(cache, "cache", None)]
    names = parse_type_info(text).layers[0].item_names()
    flat[names.index("_quantized_keys._scale" if backend == "quanto" else "_quantized_keys[1]['scale']")] *= 0.5
    (changed,) = deserialize_args(flat, [text])
    with pytest.raises(AssertionError, match="values differ"):
        assert_same_layer(cache.layers[0], changed.layers[0], same_tensors=False)
    assert not torch.equal(tiny.decode(llama, cache, 1)[0], tiny.decode(llama, changed, 1)[0])


# --------------------------------------------------------------------------------------------------
# refusals: state that cannot be carried, items that do not fit, a missing backend


def _filled(backend: str, **settings: Any) -> Any:
    layer = CLASSES[backend](**{"q_group_size": 16, "residual_length": 2, **settings})
    layer.update(kv(4), kv(4))
    return layer


def _set_meta(key: str, value: Any) -> Callable[[Any], None]:
    def patch(layer: Any) -> None:
        layer._quantized_keys[1][key] = value

    return patch


def _early_initialized(layer: Any) -> None:
    layer.reset()
    cu.Cache(layers=[layer]).early_initialization(1, 2, 8, torch.float32, torch.device("cpu"))


_REFUSALS = {
    "quanto": [
        (lambda x: setattr(x, "nbits", 3), r"nbits is 3, not one of \(2, 4\)"),
        (lambda x: setattr(x, "axis_key", 1), "axis_key is 1, not 0 or -1"),
        (lambda x: setattr(x, "residual_length", -1), "residual_length is -1, not a non-negative int"),
        (lambda x: setattr(x, "q_group_size", 8), r"_quantized_keys has the metadata \{.*'group_size': '16'.*\}, not \{.*'group_size': '8'"),
        (lambda x: setattr(x, "nbits", 2), "qtype is .*qint4.*, not optimum-quanto's qint2 \\(nbits=2\\)"),
        (lambda x: setattr(x.optimizer, "tweak", 1), "optimizer is .*, not a plain optimum-quanto MaxOptimizer"),
        (lambda x: setattr(x, "_quantized_values", x._quantized_values.dequantize()), "_quantized_values is a Tensor, not an optimum-quanto WeightQBitsTensor"),
        (lambda x: setattr(x, "_pending_beam_idx", torch.tensor([0.5])), "_pending_beam_idx is not a 1-d integer tensor"),
        (lambda x: setattr(x._quantized_keys, "_shift", x._quantized_values), "_quantized_keys._shift is a WeightQBitsTensor, not a plain tensor"),
        (_early_initialized, "is_initialized is True but it holds no quantized states"),
        (lambda x: setattr(x, "extra", 1), "has attribute 'extra' that this library does not know how to carry"),
    ],
    "hqq": [
        (lambda x: setattr(x, "nbits", 5), r"nbits is 5, not one of \(1, 2, 3, 4, 8\)"),
        (lambda x: setattr(x, "axis_value", -1), "axis_value is -1, not 0 or 1"),
        (lambda x: setattr(x, "quantizer", object), "quantizer is <class 'object'>, not hqq's Quantizer"),
        (_set_meta("view_as_float", True), "_quantized_keys has view_as_float=True, not False"),
        (_set_meta("compute_dtype", torch.float16), "_quantized_keys has compute_dtype=torch.float16, not torch.float32"),
        (_set_meta("nbits", 4.0), "_quantized_keys has nbits=4.0, not 4"),
        (_set_meta("optimize", True), r"the metadata of _quantized_keys has the keys \[.*'optimize'\], not"),
        (lambda x: setattr(x, "_quantized_values", list(x._quantized_values)), "_quantized_values is not an hqq \\(tensor, metadata\\) pair"),
        (lambda x: x._quantized_keys[1].__setitem__("scale", x._quantized_keys[1]["scale"].double()), r"item _quantized_keys\[1\]\['scale'\] must be 2-d torch.float32"),
        (_early_initialized, "is_initialized is True but it holds no quantized states"),
    ],
}
REFUSAL_CASES = [
    pytest.param(b, patch, message, id=f"{b}-{i}", marks=pytest.mark.skipif(not HAVE[b], reason=f"{PACKAGES[b]} is not installed"))
    for b in ("quanto", "hqq")
    for i, (patch, message) in enumerate(_REFUSALS[b])
]


@pytest.mark.parametrize("backend, patch, message", REFUSAL_CASES)
def test_state_that_cannot_be_carried_is_refused_by_name(backend: str, patch: Callable[[Any], None], message: str) -> None:
    layer = _filled(backend)
    patch(layer)
    cache = cu.Cache(layers=[cu.DynamicLayer(), layer])
    with pytest.raises(TypeError, match=rf"layer 1 \({CLASSES[backend].__name__}\):? {message}"):
        type_as_str_with_info(cache)
    with pytest.raises(TypeError, match="argument 'past'"):
        serialize_one(cache, "past", None)


def _items(backend: str) -> tuple[str, list[Any]]:
    cache = cu.Cache(layers=[_filled(backend)])
    return type_as_str_with_info(cache), [x.clone() for x in serialize_one(cache, "cache", None)]


def _replace(name: str, value: Callable[[Any], Any]) -> Callable[[str, list[Any]], None]:
    def patch(text: str, items: list[Any]) -> None:
        i = parse_type_info(text).layers[0].item_names().index(name)
        items[i] = value(items[i])

    return patch


_MISFITS = {
    "quanto": [
        (_replace("_quantized_keys.shape", lambda x: torch.zeros(1, 2, 4, 8)), TypeError, "item _quantized_keys.shape must be a shape tensor torch.empty((batch, heads, tokens, head_dim, 0))"),
        (_replace("_quantized_keys.shape", lambda x: torch.empty(1, 2, 3, 7, 0)), ValueError, "item _quantized_keys.shape is (1, 2, 3, 7), which does not split into groups of q_group_size=16"),
        (_replace("_quantized_keys.shape", lambda x: torch.empty(1, 2, 6, 8, 0)), ValueError, "item _quantized_keys._data._data must be the packed uint8 data of shape (3, 16)"),
        (
            _replace("_quantized_values._data._data", lambda x: x.to(torch.int32)),
            ValueError,
            "item _quantized_values._data._data must be the packed uint8 data of shape (2, 16) ((1, 2, 4, 8) in groups of 16, 4 bits), "
            "got torch.int32 of shape (2, 16)",
        ),
        (_replace("_quantized_values._shift", lambda x: x[:1, :1].expand(3, 1)), ValueError, "item _quantized_values._shift has shape (3, 1), which does not fit the groups (4, 16)"),
        (_replace("_quantized_keys._scale", lambda x: x.int()), ValueError, "item _quantized_keys._scale must be floating point, got torch.int32"),
    ],
    "hqq": [
        (_replace("_quantized_keys[1]['shape']", lambda x: torch.empty(2, 0)), TypeError, "item _quantized_keys[1]['shape'] must be a shape tensor"),
        (_replace("_quantized_keys[1]['shape']", lambda x: torch.empty(1, 1, 1, 3, 0)), ValueError, "item _quantized_keys[1]['shape'] is (1, 1, 1, 3), which does not split into groups of q_group_size=16"),
        (_replace("_quantized_keys[0]", lambda x: x.float()), ValueError, "item _quantized_keys[0] must be 2-d torch.uint8 (hqq's 4bit_u8 packing), got torch.float32"),
        (_replace("_quantized_values[1]['zero']", lambda x: x.half()), ValueError, "item _quantized_values[1]['zero'] must be 2-d torch.float32 on cpu"),
    ],
}
_COMMON_MISFITS = [
    (_replace("cumulative_length", lambda x: torch.tensor(4)), TypeError, "item cumulative_length must be a count tensor"),
    (_replace("keys", lambda x: torch.zeros(3)), ValueError, "item keys has shape (3,); the key and value tensors of a cache layer need rank >= 2"),
]
MISFIT_CASES = [
    pytest.param(b, patch, error, message, id=f"{b}-{i}", marks=pytest.mark.skipif(not HAVE[b], reason=f"{PACKAGES[b]} is not installed"))
    for b in ("quanto", "hqq")
    for i, (patch, error, message) in enumerate(_MISFITS[b] + _COMMON_MISFITS)
]


@pytest.mark.parametrize("backend, patch, error, message", MISFIT_CASES)
def test_items_that_do_not_fit_name_the_layer_and_item(backend: str, patch: Callable[[str, list[Any]], None], error: type, message: str) -> None:
    text, items = _items(backend)
    deserialize_args(list(items), [text])  # the items as they are fit
    patch(text, items)
    for _ in range(2):  # cold and warm (the step compiled on the first call steps aside)
        with pytest.raises(error) as err:
            deserialize_args(list(items), [text])
        assert f"layer 0 ({CLASSES[backend].__name__}): {message}" in str(err.value)


@pytest.mark.parametrize("backend", ["quanto", "hqq"])
def test_a_pending_beam_index_must_be_an_integer_vector(backend: str) -> None:
    if not HAVE[backend]:
        pytest.skip(f"{PACKAGES[backend]} is not installed")
    layer = _filled(backend)
    layer.reorder_cache(torch.tensor([0]))
    cache = cu.Cache(layers=[layer])
    text, items = type_as_str_with_info(cache), list(serialize_one(cache, "cache", None))
    items[-1] = torch.tensor([[0]])
    with pytest.raises(ValueError, match=r"item _pending_beam_idx must be a 1-d integer tensor, got torch.int64 of shape \(1, 1\)"):
        deserialize_args(items, [text])


# These need no backend: the spelling is checked before the backend is imported.
@pytest.mark.parametrize(
    "text, message",
    [
        ("Cache_q3g16", "layer 0 (QuantoQuantizedLayer): nbits is 3; the optimum-quanto backend takes 2 or 4"),
        ("Cache_h5g16", "layer 0 (HQQQuantizedLayer): nbits is 5; the hqq backend takes 1 or 2 or 3 or 4 or 8"),
        ("Cache_q4r2", "layer 0 (QuantoQuantizedLayer): layer kind 'Q' needs its q_group_size, the parameter g (e.g. Q4g64)"),
        ("Cache_h4g16p", "layer 0 (HQQQuantizedLayer): 'p' (_pending_beam_idx set) needs a layer that holds its tensors"),
    ],
)
def test_spellings_that_name_no_valid_layer(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        deserialize_args([], [text])
    assert message in str(err.value)


@pytest.mark.parametrize("backend", ["quanto", "hqq"])
def test_without_its_backend_a_layer_kind_is_refused_by_name(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a user without optimum-quanto or hqq sees: the class, and the package to install.

    Where the backend is installed, its import is made to fail as it does without it (a module that cannot be
    imported); the library's cache of imported backends is emptied for the test.
    """
    monkeypatch.setattr(_cache_quantized, "_backends", {})
    for module in ("optimum.quanto", "optimum.quanto.tensor.packed") if backend == "quanto" else ("hqq.core.quantize",):
        monkeypatch.setitem(sys.modules, module, None)
    cls, code, package = CLASSES[backend], CODES[backend], PACKAGES[backend]
    expected = (
        f"layer 0 ({cls.__name__}): it cannot be rebuilt without its quantization backend: {package} is not installed "
        f"(import of {'optimum.quanto' if backend == 'quanto' else 'hqq.core.quantize'} halted; None in sys.modules); "
        f"pip install {package} (or piece-by-piece-serialize[quantized])"
    )
    for text in (f"QuantizedCache_On_2{code.lower()}4g64r128", f"QuantizedCache_On_{code}4g64r128"):
        n = parse_type_info(text).n_items
        with pytest.raises(TypeError) as err:
            deserialize_args([torch.zeros(1, 1)] * n, [text])
        assert expected in str(err.value)
    # a layer made without its constructor (which needs the backend): refused, never carried without it
    layer = object.__new__(cls)
    layer.__dict__.update(keys=None, values=None, is_initialized=False, cumulative_length=0, _quantized_keys=None, _quantized_values=None)
    layer.__dict__.update(nbits=4, axis_key=0, axis_value=0, q_group_size=64, residual_length=128, _pending_beam_idx=None)
    with pytest.raises(TypeError, match=rf"layer 0 \({cls.__name__}\): a {cls.__name__} cannot be carried without its quantization backend"):
        type_as_str_with_info(cu.Cache(layers=[layer]))
