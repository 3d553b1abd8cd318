"""The adapters of the linear-attention layers (``A``), the hybrids that also hold attention (``B``, ``C``,
``G``, ``K``) and the empty ``DummyLayer`` (``X``).

A linear-attention layer holds per-state conv and recurrent tensors and flags; a hybrid holds the same next
to an attention half, whose adapter (from :mod:`._cache_attention`) it is given. The invariants are those
of :mod:`._cache_layers`, and the ``device``/``dtype`` of a linear layer are derived from its first conv
state (Note [derived attributes] in _cache_layers.py).

Imports: :mod:`..type_info`, :mod:`._cache_layers` and :mod:`._cache_attention` (a hybrid is given its
attention half's adapter and asks which kind it is); never the other way round. torch is bound by
:func:`bind_torch`, called by :mod:`._layer_adapters`.
"""

from __future__ import annotations

from typing import Any

from ..type_info import LayerInfo, LinearState
from ..type_info._cache_kinds import LayerKind
from ._cache_attention import SlidingAdapter, StaticAdapter, StaticSlidingAdapter
from ._cache_layers import LayerAdapter, _check_attributes, _refuse, _same_device, _Take, check_position, check_tensor, count_item

# torch, bound by bind_torch() when transformers is first seen (see _cache_attention)
_torch: Any = None
_Tensor: Any = None


def bind_torch(torch: Any) -> None:
    global _torch, _Tensor
    _torch, _Tensor = torch, torch.Tensor


_LINEAR_ATTRS = frozenset(
    {
        "number_of_states",
        "conv_states",
        "recurrent_states",
        "is_conv_states_initialized",
        "is_recurrent_states_initialized",
        "has_previous_state",
        "conv_kernel_size",
        "cumulative_length_linear",  # transformers >= 5.25 (the "l" parameter); absent before
        "device",
        "dtype",
        "record_past",
    }
)
_LINEAR_ORDER = (
    "number_of_states",
    "conv_states",
    "recurrent_states",
    "is_conv_states_initialized",
    "is_recurrent_states_initialized",
    "has_previous_state",
    "conv_kernel_size",
    "cumulative_length_linear",
)
_STATE_DICTS = (
    "conv_states",
    "recurrent_states",
    "is_conv_states_initialized",
    "is_recurrent_states_initialized",
    "has_previous_state",
    "conv_kernel_size",
)


class _LinearPart:
    """The linear-attention half shared by ``A``, ``B``, ``C``, ``G`` and ``K`` (Note [derived attributes])."""

    @staticmethod
    def describe_states(state: dict[str, Any], where: str) -> tuple[tuple[LinearState, ...], Any, Any]:
        n = state.get("number_of_states")
        if type(n) is not int or n < 1:
            raise _refuse(where, f"number_of_states is {n!r}")
        dicts = {}
        for name in _STATE_DICTS:
            d = state.get(name)
            if type(d) is not dict or list(d) != list(range(n)):
                raise _refuse(where, f"{name} is not a dict over the states 0..{n - 1}")
            dicts[name] = d
        states = []
        first_conv = None
        for i in range(n):
            conv, rec = dicts["conv_states"][i], dicts["recurrent_states"][i]
            conv_init, rec_init = dicts["is_conv_states_initialized"][i], dicts["is_recurrent_states_initialized"][i]
            kernel, previous = dicts["conv_kernel_size"][i], dicts["has_previous_state"][i]
            if type(conv_init) is not bool or type(rec_init) is not bool or type(previous) is not bool:
                raise _refuse(where, f"the flags of state {i} are not bools")
            if conv_init != isinstance(conv, _Tensor) or (not conv_init and conv is not None):
                raise _refuse(where, f"conv_states[{i}] and is_conv_states_initialized[{i}] disagree")
            if rec_init != isinstance(rec, _Tensor) or (not rec_init and rec is not None):
                raise _refuse(where, f"recurrent_states[{i}] and is_recurrent_states_initialized[{i}] disagree")
            if conv_init != (type(kernel) is int and kernel >= 1) or (not conv_init and kernel is not None):
                raise _refuse(where, f"conv_kernel_size[{i}] is {kernel!r} while conv state {i} is {'set' if conv_init else 'unset'}")
            if conv_init and first_conv is None:
                first_conv = conv
            states.append(LinearState(kernel if conv_init else None, rec_init, previous))
        if type(state.get("record_past")) is not bool:
            raise _refuse(where, f"record_past is {state.get('record_past')!r}")
        return tuple(states), first_conv, n

    @staticmethod
    def check_dtype_device(state: dict[str, Any], first_conv: Any, attention_device: Any, where: str) -> bool:
        dtype, device = state.get("dtype"), state.get("device")
        expected_device = attention_device if attention_device is not None else (first_conv.device if first_conv is not None else None)
        if (device is None and expected_device is not None) or (device is not None and not _same_device(device, expected_device)):
            raise _refuse(where, f"device is {device!r}; its tensors say {expected_device!r}")
        if dtype is None:
            return False
        if first_conv is None or dtype != first_conv.dtype:
            raise _refuse(where, f"dtype is {dtype!r}, not its first conv state's")
        return True

    @staticmethod
    def has_length(state: dict[str, Any], where: str) -> bool:
        """Whether the layer counts its tokens in ``cumulative_length_linear`` (transformers >= 5.25)."""
        if "cumulative_length_linear" not in state:
            return False
        length = state["cumulative_length_linear"]
        if not isinstance(length, _Tensor) or length.dim() != 0 or length.dtype != _torch.int64:
            raise _refuse(where, f"cumulative_length_linear is {length!r}, not a 0-d int64 tensor")
        return True

    @staticmethod
    def flatten_states(layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.flag("l"):  # a flag item: after the attention items, before the states
            out.append(layer.cumulative_length_linear)
        conv, rec = layer.conv_states, layer.recurrent_states
        for i, st in enumerate(info.states):
            if st.conv_kernel is not None:
                out.append(conv[i])
            if st.recurrent:
                out.append(rec[i])

    @staticmethod
    def fill_states(obj: Any, info: LayerInfo, take: _Take, what: str, attention_device: Any) -> None:
        if info.flag("l"):
            obj["cumulative_length_linear"] = check_position(take(), "cumulative_length_linear")
        n = len(info.states)
        obj["number_of_states"] = n
        conv: dict[int, Any] = {}
        rec: dict[int, Any] = {}
        first_conv = None
        for i, st in enumerate(info.states):
            conv[i] = check_tensor(take(), f"conv_states[{i}]") if st.conv_kernel is not None else None
            if first_conv is None and conv[i] is not None:
                first_conv = conv[i]
            rec[i] = check_tensor(take(), f"recurrent_states[{i}]") if st.recurrent else None
        obj["conv_states"] = conv
        obj["recurrent_states"] = rec
        obj["is_conv_states_initialized"] = {i: st.conv_kernel is not None for i, st in enumerate(info.states)}
        obj["is_recurrent_states_initialized"] = {i: st.recurrent for i, st in enumerate(info.states)}
        obj["has_previous_state"] = {i: st.previous for i, st in enumerate(info.states)}
        obj["conv_kernel_size"] = {i: st.conv_kernel for i, st in enumerate(info.states)}
        if attention_device is not None:
            obj["device"] = attention_device
        else:
            obj["device"] = first_conv.device if first_conv is not None else None
        obj["dtype"] = first_conv.dtype if info.flag("y") else None  # type: ignore[union-attr]  # y: there is a first conv state
        obj["record_past"] = info.flag("r")


class LinearAdapter(LayerAdapter):
    """``LinearAttentionLayer``: ``A[r][y]`` and one ``s[c<k>][h][p]`` group per recurrent state."""

    attributes = _LINEAR_ATTRS
    order = (*_LINEAR_ORDER, "device", "dtype", "record_past")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        states, first_conv, _ = _LinearPart.describe_states(state, where)
        params = [("r", None)] if state["record_past"] else []
        if _LinearPart.check_dtype_device(state, first_conv, None, where):
            params.append(("y", None))
        if _LinearPart.has_length(state, where):
            params.append(("l", None))
        return LayerInfo(self.code, True, None, tuple(params), states)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        _LinearPart.flatten_states(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        _LinearPart.fill_states(obj, info, take, what, None)


class HybridAdapter(LayerAdapter):
    """A linear-attention layer that also holds attention (``B``, ``C``, ``G``, ``K``): both halves, attention first."""

    def __init__(self, kind: LayerKind, cls: type, attention: LayerAdapter) -> None:
        self.attention = attention
        super().__init__(kind, cls)
        self.attributes = attention.attributes | _LINEAR_ATTRS | frozenset(self.extra)
        # the attention half's constructor runs first, then the linear half's; lazy_initialization adds the
        # static shape attributes last
        head = attention.order[: attention.order.index("device")] if "device" in attention.order else attention.order
        tail = tuple(a for a in attention.order[len(head) :] if a != "device")
        linear_tail = tuple(a for a in ("device", "dtype", "record_past") if a not in head)
        self.order = (*head, *_LINEAR_ORDER, *linear_tail, *tail)

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = _check_attributes(layer, self.attributes, where)
        states, first_conv, _ = _LinearPart.describe_states(state, where)
        att = self.attention
        if isinstance(att, SlidingAdapter):
            populated, number, _ = att.attention_describe_sliding(state, where)
            params: list[tuple[str, None]] = []
        elif isinstance(att, StaticSlidingAdapter):
            populated, number = att.static_describe(state, where)
            params = att.sliding_params(state, where)
        elif isinstance(att, StaticAdapter):
            populated, number = att.static_describe(state, where)
            params = []
        else:
            # the remaining attention half in HYBRIDS is "D", a DynamicAdapter, which has attention_describe
            populated, number, params = att.attention_describe(state, where), None, []  # type: ignore[attr-defined]
        if state["record_past"]:
            params.append(("r", None))
        device = state["keys"].device if populated else None
        if _LinearPart.check_dtype_device(state, first_conv, device, where):
            params.append(("y", None))
        if _LinearPart.has_length(state, where):
            params.append(("l", None))
        return LayerInfo(self.code, populated, number, tuple(params), states)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        att = self.attention
        if isinstance(att, StaticAdapter):
            att.flatten_static(layer, info, out)
            if isinstance(att, StaticSlidingAdapter):
                out.append(count_item(layer.cumulative_length_int))
        elif info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            if isinstance(att, SlidingAdapter):
                out.append(count_item(layer.cumulative_length))
        _LinearPart.flatten_states(layer, info, out)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        att = self.attention
        if isinstance(att, SlidingAdapter):
            att.sliding_fill(obj, info, take, what)
        else:
            att.fill(obj, info, take, what)
        device = obj["device"] if info.populated else None
        _LinearPart.fill_states(obj, info, take, what, device)


class DummyAdapter(LayerAdapter):
    """``DummyLayer``: ``X``; holds nothing, always "initialized"."""

    attributes = frozenset({"is_initialized", "keys", "values"})
    order = ("is_initialized", "keys", "values")

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        if state.get("is_initialized") is not True or state.get("keys") is not None or state.get("values") is not None:
            raise _refuse(where, "a DummyLayer holding state")
        return LayerInfo(self.code)

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        obj["is_initialized"] = True
        obj["keys"] = None
        obj["values"] = None
