"""The adapters of the attention layers: dynamic, sliding-window, indexed, static and fp8 (kinds D to J, F).

Each holds keys and values (and, for some, counts, indexer state or scales) and follows the invariants of
:mod:`._cache_layers`: ``build(describe(layer), flatten(layer))`` gives back a layer with the same
attributes and the very same tensors, and anything an adapter does not know is refused by name; the
derived attributes (``device``, the static shapes, ``_sliding_window_tensor``) are recomputed as Note
[derived attributes] in _cache_layers.py says.

Imports: :mod:`..type_info` and :mod:`._cache_layers` only. torch is bound by :func:`bind_torch` (called by
:mod:`._layer_adapters` when transformers is first seen), as in :mod:`._cache_layers`.
"""

from __future__ import annotations

from typing import Any

from ..type_info import LayerInfo
from ._cache_layers import (
    LayerAdapter,
    _check_static_kv,
    _refuse,
    _same_device,
    _Take,
    check_count,
    check_kv,
    check_position,
    check_tensor,
    count_item,
    is_count,
)

# torch, bound by bind_torch() when transformers is first seen; module globals so that describe/build read
# them with one lookup, as the base module's functions do
_torch: Any = None
_Tensor: Any = None


def bind_torch(torch: Any) -> None:
    global _torch, _Tensor
    _torch, _Tensor = torch, torch.Tensor


class DynamicAdapter(LayerAdapter):
    """``DynamicLayer``: keys and values grow by concatenation; ``D`` / ``d``."""

    attributes: frozenset[str] = frozenset({"keys", "values", "is_initialized", "device"})
    order: tuple[str, ...] = ("keys", "values", "is_initialized", "device")

    def attention_describe(self, state: dict[str, Any], where: str) -> bool:
        populated = state.get("is_initialized")
        if populated is True:
            keys, values = state.get("keys"), state.get("values")
            if not isinstance(keys, _Tensor) or not isinstance(values, _Tensor):
                raise _refuse(where, "is_initialized is True but keys/values are not tensors")
            if "device" in state and not _same_device(state["device"], keys.device):
                raise _refuse(where, f"device is {state['device']} while its keys are on {keys.device} (offloaded)")
            return True
        if populated is False:
            if state.get("keys") is not None or state.get("values") is not None:
                raise _refuse(where, "is_initialized is False but it holds keys/values")
            return False
        raise _refuse(where, f"is_initialized is {populated!r}")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        return LayerInfo(self.code, self.attention_describe(state, where))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        self.flatten_extra(layer, out)

    def attention_fill(self, obj: Any, populated: bool, take: _Take, what: str) -> None:
        if populated:
            keys = check_kv(take(), "keys")
            obj["keys"] = keys
            obj["values"] = check_kv(take(), "values")
            obj["is_initialized"] = True
            obj["device"] = keys.device
        else:
            obj["keys"] = None
            obj["values"] = None
            obj["is_initialized"] = False

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.attention_fill(obj, info.populated, take, what)


class SlidingAdapter(DynamicAdapter):
    """``DynamicSlidingWindowLayer``: ``S<window>[r]``, items keys, values and ``cumulative_length``.

    The legacy spelling ``W<window>`` (written before cumulative_length was carried) is read with
    cumulative_length equal to the stored length, as it was then.
    """

    attributes = DynamicAdapter.attributes | {"sliding_window", "cumulative_length", "_sliding_window_tensor", "record_past"}
    order = ("keys", "values", "is_initialized", "sliding_window", "cumulative_length", "_sliding_window_tensor", "record_past", "device")

    def attention_describe_sliding(self, state: dict[str, Any], where: str) -> tuple[bool, int, bool]:
        populated = self.attention_describe(state, where)
        window = state.get("sliding_window")
        if type(window) is not int or window < 1:
            raise _refuse(where, f"sliding_window is {window!r}, not a positive int")
        count = state.get("cumulative_length")
        if not is_count(count):
            raise _refuse(where, f"cumulative_length is {count!r}, not a non-negative int")
        if not populated and count != 0:
            raise _refuse(where, f"it holds no tensors but cumulative_length is {count}")
        record = state.get("record_past")
        if type(record) is not bool:
            raise _refuse(where, f"record_past is {record!r}")
        tensor = state.get("_sliding_window_tensor")
        if not isinstance(tensor, _Tensor) or tensor.dim() != 0 or tensor.dtype != _torch.long or int(tensor) != window:
            raise _refuse(where, "_sliding_window_tensor is not sliding_window as a long scalar tensor")
        if populated and not _same_device(tensor.device, state["keys"].device):
            raise _refuse(where, f"_sliding_window_tensor is on {tensor.device}, its keys on {state['keys'].device}")
        return populated, window, record

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, window, record = self.attention_describe_sliding(state, where)
        return LayerInfo(self.code, populated, window, (("r", None),) if record else ())

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            out.append(count_item(layer.cumulative_length))
        self.flatten_extra(layer, out)

    def sliding_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        populated = info.populated
        self.attention_fill(obj, populated, take, what)
        window = info.number
        obj["sliding_window"] = window
        if not populated:
            obj["cumulative_length"] = 0
            device = None
        elif info.kind == "W":  # legacy: the count was not carried
            obj["cumulative_length"] = obj["keys"].shape[-2]
            device = obj["device"]
        else:
            obj["cumulative_length"] = check_count(take(), "cumulative_length")
            device = obj["device"]
        obj["_sliding_window_tensor"] = window_tensor(window, device)  # type: ignore[arg-type]  # a sliding kind always has its window
        obj["record_past"] = info.flag("r")

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.sliding_fill(obj, info, take, what)


_WINDOWS: dict[tuple[int, Any], Any] = {}


def window_tensor(window: int, device: Any) -> Any:
    """``torch.tensor(window, dtype=torch.long)`` on ``device`` (CPU when ``None``), shared.

    transformers only reads this tensor (and moves it with ``.to``, which makes a new one), so rebuilt
    layers share one per window and device instead of allocating one each per forward call.
    """
    key = (window, device)
    t = _WINDOWS.get(key)
    if t is None:
        if len(_WINDOWS) >= 256:
            _WINDOWS.clear()
        t = _WINDOWS[key] = _torch.tensor(window, dtype=_torch.long, device=device)
    return t


class IndexedAdapter(DynamicAdapter):
    """``DynamicIndexedLayer``: ``I[x][p]``; indexer keys and positions as extra items."""

    attributes = DynamicAdapter.attributes | {
        "indexer_keys",
        "indexer_position_ids",
        "is_indexer_initialized",
        "indexer_dtype",
        "indexer_device",
    }
    order: tuple[str, ...] = (
        "keys",
        "values",
        "is_initialized",
        "indexer_keys",
        "indexer_position_ids",
        "is_indexer_initialized",
        "device",
        "indexer_dtype",
        "indexer_device",
    )
    _static = False

    def indexer_describe(self, state: dict[str, Any], where: str) -> list[tuple[str, None]]:
        params: list[tuple[str, None]] = []
        init = state.get("is_indexer_initialized")
        keys = state.get("indexer_keys")
        if init is True:
            if not isinstance(keys, _Tensor):
                raise _refuse(where, "is_indexer_initialized is True but indexer_keys is not a tensor")
            if state.get("indexer_dtype") != keys.dtype or not _same_device(state.get("indexer_device"), keys.device):
                raise _refuse(where, "indexer_dtype/indexer_device differ from its indexer keys'")
            if self._static and not isinstance(state.get("indexer_cumulative_length"), _Tensor):
                raise _refuse(where, "indexer_cumulative_length is not a tensor")
            params.append(("x", None))
        elif init is False:
            if keys is not None or (self._static and state.get("indexer_cumulative_length") is not None):
                raise _refuse(where, "is_indexer_initialized is False but it holds indexer keys")
        else:
            raise _refuse(where, f"is_indexer_initialized is {init!r}")
        positions = state.get("indexer_position_ids")
        if positions is not None:
            if not isinstance(positions, _Tensor):
                raise _refuse(where, f"indexer_position_ids is a {type(positions).__name__}")
            params.append(("p", None))
        return params

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated = self.attention_describe(state, where)
        return LayerInfo(self.code, populated, None, tuple(self.indexer_describe(state, where)))

    def flatten_indexer(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.flag("x"):
            out.append(layer.indexer_keys)
            if self._static:
                out.append(layer.indexer_cumulative_length)
        if info.flag("p"):
            out.append(layer.indexer_position_ids)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        self.flatten_indexer(layer, info, out)
        self.flatten_extra(layer, out)

    def indexer_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        if info.flag("x"):
            keys = check_tensor(take(), "indexer_keys")
            obj["indexer_keys"] = keys
            if self._static:
                obj["indexer_cumulative_length"] = check_position(take(), "indexer_cumulative_length")
            obj["is_indexer_initialized"] = True
            obj["indexer_dtype"], obj["indexer_device"] = keys.dtype, keys.device
        else:
            obj["indexer_keys"] = None
            if self._static:
                obj["indexer_cumulative_length"] = None
            obj["is_indexer_initialized"] = False
        obj["indexer_position_ids"] = check_tensor(take(), "indexer_position_ids") if info.flag("p") else None

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.attention_fill(obj, info.populated, take, what)
        self.indexer_fill(obj, info, take, what)


class StaticAdapter(LayerAdapter):
    """``StaticLayer``: ``T<max_cache_len>`` / ``t<max_cache_len>``; keys, values, ``cumulative_length`` tensor."""

    attributes = frozenset(
        {"keys", "values", "is_initialized", "max_cache_len", "cumulative_length", "device", "batch_size", "num_heads", "k_head_dim", "v_head_dim"}
    )
    _shape_attrs = ("device", "batch_size", "num_heads", "k_head_dim", "v_head_dim")
    order: tuple[str, ...] = ("keys", "values", "is_initialized", "max_cache_len", "cumulative_length", "device", "batch_size", "num_heads", "v_head_dim", "k_head_dim")

    def static_describe(self, state: dict[str, Any], where: str) -> tuple[bool, int]:
        length = state.get("max_cache_len")
        if type(length) is not int or length < 1:
            raise _refuse(where, f"max_cache_len is {length!r}, not a positive int")
        if not isinstance(state.get("cumulative_length"), _Tensor):
            raise _refuse(where, "cumulative_length is not a tensor")
        populated = state.get("is_initialized")
        if populated is True:
            keys, values = state.get("keys"), state.get("values")
            if not isinstance(keys, _Tensor) or not isinstance(values, _Tensor) or keys.dim() != 4 or values.dim() != 4:
                raise _refuse(where, "is_initialized is True but keys/values are not rank-4 tensors")
            derived = (keys.device, keys.shape[0], keys.shape[1], keys.shape[-1], values.shape[-1])
            for name, value in zip(self._shape_attrs, derived):  # noqa: B905 - both five long; strict= doubles zip's cost
                if name in state and state[name] != value:
                    raise _refuse(where, f"{name} is {state[name]!r} while its tensors say {value!r}")
            if keys.shape[2] != length:
                raise _refuse(where, f"its keys hold {keys.shape[2]} positions, max_cache_len is {length}")
            return True, length
        if populated is False:
            if state.get("keys") is not None or state.get("values") is not None:
                raise _refuse(where, "is_initialized is False but it holds keys/values")
            return False, length
        raise _refuse(where, f"is_initialized is {populated!r}")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        populated, length = self.static_describe(self.check(layer, where), where)
        return LayerInfo(self.code, populated, length)

    def flatten_static(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
        out.append(layer.cumulative_length)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        self.flatten_extra(layer, out)

    def static_fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        length = info.number
        obj["max_cache_len"] = length
        if info.populated:
            keys, values = take(), take()
            _check_static_kv(keys, values, length, what)  # type: ignore[arg-type]
            obj["keys"], obj["values"] = keys, values
            obj["is_initialized"] = True
            obj["device"] = keys.device
            obj["batch_size"], obj["num_heads"] = keys.shape[:2]
            obj["v_head_dim"] = values.shape[-1]
            obj["k_head_dim"] = keys.shape[-1]
        else:
            obj["keys"] = obj["values"] = None
            obj["is_initialized"] = False
        obj["cumulative_length"] = check_position(take(), "cumulative_length")

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)


class StaticSlidingAdapter(StaticAdapter):
    """``StaticSlidingWindowLayer``: ``V<max_cache_len>[c]``; the static items plus ``cumulative_length_int``.

    Its ``max_cache_len`` is already ``min(max_cache_len, sliding_window)`` (the window itself is not kept);
    ``c`` records whether it was made with ``max_cache_len <= sliding_window`` (``_is_croppable``).
    """

    attributes = StaticAdapter.attributes | {"cumulative_length_int", "_is_croppable"}
    order = (*StaticAdapter.order[:5], "cumulative_length_int", "_is_croppable", *StaticAdapter.order[5:])

    def sliding_params(self, state: dict[str, Any], where: str) -> list[tuple[str, None]]:
        count, crop = state.get("cumulative_length_int"), state.get("_is_croppable")
        if type(count) is not int or count < 0:
            raise _refuse(where, f"cumulative_length_int is {count!r}")
        if type(crop) is not bool:
            raise _refuse(where, f"_is_croppable is {crop!r}")
        return [("c", None)] if crop else []

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, length = self.static_describe(state, where)
        return LayerInfo(self.code, populated, length, tuple(self.sliding_params(state, where)))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        out.append(count_item(layer.cumulative_length_int))
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)
        obj["cumulative_length_int"] = check_count(take(), "cumulative_length_int")
        obj["_is_croppable"] = info.flag("c")


class StaticIndexedAdapter(StaticAdapter, IndexedAdapter):
    """``StaticIndexedLayer``: ``J<max_cache_len>[x][p]``."""

    attributes = StaticAdapter.attributes | IndexedAdapter.attributes | {"indexer_cumulative_length"}
    order = (
        *StaticAdapter.order[:5],
        "indexer_keys",
        "indexer_position_ids",
        "indexer_cumulative_length",
        "is_indexer_initialized",
        *StaticAdapter.order[5:],
        "indexer_dtype",
        "indexer_device",
    )
    _static = True

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated, length = self.static_describe(state, where)
        return LayerInfo(self.code, populated, length, tuple(self.indexer_describe(state, where)))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_static(layer, info, out)
        self.flatten_indexer(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        self.static_fill(obj, info, take, what)
        self.indexer_fill(obj, info, take, what)


class Fp8Adapter(DynamicAdapter):
    """``Fp8QuantizedLayer``: ``F`` / ``f``; the (empty) residual keys/values, both quantized pairs, the count."""

    attributes = DynamicAdapter.attributes | {"cumulative_length", "_quantized_keys", "_quantized_values"}
    order = ("keys", "values", "is_initialized", "cumulative_length", "_quantized_keys", "_quantized_values", "device")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated = self.attention_describe(state, where)
        count = state.get("cumulative_length")
        if type(count) is not int or count < 0:
            raise _refuse(where, f"cumulative_length is {count!r}")
        for name in ("_quantized_keys", "_quantized_values"):
            pair = state.get(name)
            if populated:
                if type(pair) is not tuple or len(pair) != 2 or not all(isinstance(x, _Tensor) for x in pair):
                    raise _refuse(where, f"{name} is not a (tensor, scale) pair")
            elif pair is not None:
                raise _refuse(where, f"it holds no tensors but {name} is set")
        if not populated and count:
            raise _refuse(where, f"it holds no tensors but cumulative_length is {count}")
        return LayerInfo(self.code, populated)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            out.extend(layer._quantized_keys)
            out.extend(layer._quantized_values)
            out.append(count_item(layer.cumulative_length))
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        if info.populated:
            obj["keys"] = check_tensor(take(), "keys")
            obj["values"] = check_tensor(take(), "values")
            obj["is_initialized"] = True
            obj["device"] = obj["keys"].device
            q = (check_tensor(take(), "_quantized_keys[0]"), check_tensor(take(), "_quantized_keys[1]"))
            obj["_quantized_keys"] = q
            obj["_quantized_values"] = (
                check_tensor(take(), "_quantized_values[0]"),
                check_tensor(take(), "_quantized_values[1]"),
            )
            obj["cumulative_length"] = check_count(take(), "cumulative_length")
        else:
            obj["keys"] = obj["values"] = None
            obj["is_initialized"] = False
            obj["cumulative_length"] = 0
            obj["_quantized_keys"] = obj["_quantized_values"] = None
