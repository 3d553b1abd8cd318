"""Adapters of the group-wise quantized layers, whose quantized states are objects of a quantization backend.

``QuantoQuantizedLayer`` (kind ``Q``, backend optimum-quanto) and ``HQQQuantizedLayer`` (kind ``H``, backend
hqq) hold, besides a residual of recent keys and values in full precision, their older keys and values in a
form that the backend defines: a quanto tensor subclass, or an hqq ``(tensor, metadata)`` pair. Each
adapter takes such a state apart into plain tensors and rebuilds it from them and from the layer's settings
(Note [quantized states]); the layer's backend objects (``qtype`` and ``optimizer``, or ``quantizer``) are
functions of its settings and are rebuilt as transformers' constructor makes them.

Invariants: the backends are imported here by fixed names, and only when such a layer is described or a
spelling of one is rebuilt (never by a name read from input); without its backend a layer kind is refused
with a ``TypeError`` that names the class and the package to install, never rebuilt without its quantized
states. Everything else follows :mod:`._cache_layers`: ``build(describe(layer), flatten(layer))`` has the
attributes of ``layer`` in the same order with equal values, its plain tensors the very same objects; a state
the adapter cannot rebuild exactly is refused by name.

Imports: :mod:`..type_info`, :mod:`._cache_layers` (the base and the bound torch names) and
:mod:`._cache_attention` (these layers are dynamic layers with more state); the kind table of
:mod:`._layer_adapters` lists the adapters, this module does not register itself.

Note [quantized states]
~~~~~~~~~~~~~~~~~~~~~~~
A quantized state is made of plain tensors and of metadata. The tensors are items. The metadata is a
function of the layer's settings (in the type-info string: ``nbits``, ``q_group_size``, the axis) and of
the shape of the tensor that was quantized, ``(batch, heads, tokens, head_dim)``, which no item holds
(the data is stored grouped, and the residual keys are empty after each flush). The shape changes as
tokens come (Note [varying scalars] in _cache_kinds.py), so it is an item too: a *shape tensor*, the empty
tensor ``torch.empty((*shape, 0))``, which like a count tensor (Note [count tensors] in _cache_layers.py)
holds no data and is read back from its size. :meth:`describe` recomputes the metadata from the settings
and the shape and refuses the layer when the backend's own differs in anything, so that the metadata
given back to the backend on rebuild is exactly what it had.

* optimum-quanto: a ``WeightQBitsTensor``, taken apart through the tensor-subclass protocol
  (``__tensor_flatten__``): its inner ``_data`` (a ``PackedTensor``, itself holding the packed ``_data``),
  ``_scale`` and ``_shift``, and metadata strings (qtype, axis, group size, size, stride; for the packed
  tensor: bits, grouped size, stride). It is rebuilt with ``__tensor_unflatten__``.
* hqq: a tuple ``(W_q, meta)`` with ``meta`` a dict: its ``scale`` and ``zero`` tensors and ``shape`` are
  items, and ``nbits``, ``group_size``, ``axis``, ``packing`` (hqq's table of ``nbits``),
  ``unpack_view_dtype`` (hqq's table of the packing), ``view_as_float`` (``False``) and ``compute_dtype``
  (the layer's keys' dtype, as ``HQQQuantizedLayer._quantize`` sets it) are derived.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..type_info import LayerInfo
from . import _cache_layers as L
from ._cache_attention import DynamicAdapter

_Take = Callable[[], Any]

# what each backend's constructor accepts (transformers' QuantoQuantizedLayer and HQQQuantizedLayer)
_QUANTO_NBITS = (2, 4)
_HQQ_NBITS = (1, 2, 3, 4, 8)
_HQQ_META = ("nbits", "group_size", "shape", "scale", "zero", "axis", "packing", "unpack_view_dtype", "view_as_float", "compute_dtype")
_QUANTIZED = ("_quantized_keys", "_quantized_values")


class _Missing:
    """A backend that could not be imported: the message says which package to install."""

    def __init__(self, message: str) -> None:
        self.message = message


_backends: dict[str, Any] = {}


def _quanto() -> Any:
    """optimum-quanto's classes and qtypes, imported once; a :class:`_Missing` when it is not installed."""
    found = _backends.get("quanto")
    if found is None:
        try:
            from optimum.quanto import MaxOptimizer, WeightQBitsTensor, grouped_shape, qint2, qint4
            from optimum.quanto.tensor.packed import PackedTensor
        except ImportError as err:
            found = _Missing(f"optimum-quanto is not installed ({err})")
        else:
            found = {
                "WeightQBitsTensor": WeightQBitsTensor,
                "PackedTensor": PackedTensor,
                "MaxOptimizer": MaxOptimizer,
                "grouped_shape": grouped_shape,
                "qtypes": {2: qint2, 4: qint4},
            }
        _backends["quanto"] = found
    return found


def _hqq() -> Any:
    """hqq's ``Quantizer`` (what transformers' ``HQQQuantizedLayer`` uses), or a :class:`_Missing`."""
    found = _backends.get("hqq")
    if found is None:
        try:
            from hqq.core.quantize import Quantizer
        except ImportError as err:
            found = _Missing(f"hqq is not installed ({err})")
        else:
            found = Quantizer
        _backends["hqq"] = found
    return found


# Shape tensors (Note [quantized states])


def shape_item(shape: Any) -> Any:
    """The shape tensor of ``shape``: ``torch.empty((*shape, 0))``, no data."""
    return L._torch.empty((*shape, 0), dtype=L._torch.int8)


def check_shape(x: Any, what: str) -> tuple[int, ...]:
    """The 4-d shape a shape tensor carries; a clear error for anything else."""
    if not isinstance(x, L._Tensor) or x.dim() != 5 or x.shape[-1] != 0:
        got = f"shape {tuple(x.shape)}" if isinstance(x, L._Tensor) else f"a {type(x).__name__}"
        raise TypeError(
            f"item {what} must be a shape tensor torch.empty((batch, heads, tokens, head_dim, 0)) carrying the "
            f"shape of the quantized tensor, got {got}"
        )
    return tuple(x.shape[:4])


def _contiguous_stride(shape: tuple[int, ...]) -> list[int]:
    stride, step = [], 1
    for n in reversed(shape):
        stride.append(step)
        step *= max(n, 1)
    return stride[::-1]


def _is_count(x: Any) -> bool:
    return type(x) is int and x >= 0


def _is_beam_index(x: Any) -> bool:
    return isinstance(x, L._Tensor) and x.dim() == 1 and not x.dtype.is_floating_point and not x.dtype.is_complex and x.dtype != L._torch.bool


class _GroupWiseAdapter(DynamicAdapter):
    """What ``QuantizedLayer`` holds: residual keys/values, two quantized states, settings, the count and a
    deferred beam reordering. Subclasses say what a quantized state is and what the backend objects are."""

    backend_attributes: tuple[str, ...] = ()
    attributes: frozenset[str] = DynamicAdapter.attributes | {
        "cumulative_length",
        *_QUANTIZED,
        "nbits",
        "axis_key",
        "axis_value",
        "q_group_size",
        "residual_length",
        "_pending_beam_idx",
    }
    #: the order of transformers' constructors, then lazy_initialization's ``device``
    order: tuple[str, ...] = (
        "keys",
        "values",
        "is_initialized",
        "cumulative_length",
        *_QUANTIZED,
        "nbits",
        "axis_key",
        "axis_value",
        "q_group_size",
        "residual_length",
        "_pending_beam_idx",
    )
    package = ""  # the distribution to install
    nbits_allowed: tuple[int, ...] = ()
    other_axis = 0  # the axis spelled by the flags k and v (0 is spelled by their absence)

    def __init__(self, kind: Any, cls: type) -> None:
        super().__init__(kind, cls)
        self.attributes = self.attributes | frozenset(self.backend_attributes)
        self.order = (*type(self).order, *self.backend_attributes, "device")

    # -- backend-specific
    def backend(self) -> Any:
        raise NotImplementedError

    def check_backend_objects(self, state: dict[str, Any], backend: Any, nbits: int, where: str) -> None:
        raise NotImplementedError

    def backend_objects(self, obj: dict[str, Any], backend: Any, nbits: int) -> None:
        raise NotImplementedError

    def check_quantized(self, q: Any, name: str, backend: Any, settings: tuple[int, int, int], keys: Any, where: str) -> None:
        raise NotImplementedError

    def flatten_quantized(self, q: Any, out: list[Any]) -> None:
        raise NotImplementedError

    def take_quantized(self, take: _Take, name: str, backend: Any, settings: tuple[int, int, int], keys: Any) -> Any:
        raise NotImplementedError

    # -- shared
    def _backend_or_refuse(self, where: str | None) -> Any:
        """The backend; without it a ``Refused`` naming the package (``where`` is None when rebuilding: the
        caller names the layer)."""
        backend = self.backend()
        if isinstance(backend, _Missing):
            doing = "it cannot be rebuilt" if where is None else f"{where}: a {self.cls.__qualname__} cannot be carried"
            raise L.Refused(
                f"{doing} without its quantization backend: {backend.message}; pip install {self.package} "
                "(or piece-by-piece-serialize[quantized])"
            )
        return backend

    def describe(self, layer: Any, where: str) -> LayerInfo:
        state = self.check(layer, where)
        populated = self.attention_describe(state, where)
        nbits, axis_key, axis_value = state.get("nbits"), state.get("axis_key"), state.get("axis_value")
        group, residual = state.get("q_group_size"), state.get("residual_length")
        if type(nbits) is not int or nbits not in self.nbits_allowed:
            raise L._refuse(where, f"nbits is {nbits!r}, not one of {self.nbits_allowed}")
        for name, axis in (("axis_key", axis_key), ("axis_value", axis_value)):
            if type(axis) is not int or axis not in (0, self.other_axis):
                raise L._refuse(where, f"{name} is {axis!r}, not 0 or {self.other_axis}")
        if type(group) is not int or group < 1:
            raise L._refuse(where, f"q_group_size is {group!r}, not a positive int")
        if not _is_count(residual):
            raise L._refuse(where, f"residual_length is {residual!r}, not a non-negative int")
        backend = self._backend_or_refuse(where)
        self.check_backend_objects(state, backend, nbits, where)
        count = state.get("cumulative_length")
        if not _is_count(count):
            raise L._refuse(where, f"cumulative_length is {count!r}, not a non-negative int")
        pending = state.get("_pending_beam_idx")
        if pending is not None and not _is_beam_index(pending):
            raise L._refuse(where, "_pending_beam_idx is not a 1-d integer tensor")
        if populated:
            if state.get("_quantized_keys") is None and state.get("_quantized_values") is None:
                raise L._refuse(
                    where,
                    "is_initialized is True but it holds no quantized states (Cache.early_initialization leaves a "
                    "quantized layer so, and transformers' own update cannot run from it)",
                )
            for name, axis in zip(_QUANTIZED, (axis_key, axis_value)):  # noqa: B905 - both two long; strict= doubles zip's cost
                # the loop over both axes above raised unless each is an int, which mypy does not carry here
                self.check_quantized(state.get(name), name, backend, (nbits, group, axis), state["keys"], where)  # type: ignore[arg-type]
        else:
            for name in _QUANTIZED:
                if state.get(name) is not None:
                    raise L._refuse(where, f"it holds no tensors but {name} is set")
            if count:
                raise L._refuse(where, f"it holds no tensors but cumulative_length is {count}")
            if pending is not None:
                raise L._refuse(where, "it holds no tensors but _pending_beam_idx is set")
        params: list[tuple[str, int | None]] = [("g", group)]
        if residual:
            params.append(("r", residual))
        if axis_key:
            params.append(("k", None))
        if axis_value:
            params.append(("v", None))
        if pending is not None:
            params.append(("p", None))
        return LayerInfo(self.code, populated, nbits, tuple(params))

    def flatten(self, layer: Any, info: LayerInfo, out: list[Any]) -> None:
        if info.populated:
            out.append(layer.keys)
            out.append(layer.values)
            self.flatten_quantized(layer._quantized_keys, out)
            self.flatten_quantized(layer._quantized_values, out)
            out.append(L.count_item(layer.cumulative_length))
            if info.flag("p"):
                out.append(layer._pending_beam_idx)
        self.flatten_extra(layer, out)

    def fill(self, obj: Any, info: LayerInfo, take: _Take, what: str) -> None:
        # the spelling first (its errors do not depend on what is installed), then the backend
        nbits = info.number
        if nbits not in self.nbits_allowed:
            raise ValueError(f"nbits is {nbits}; the {self.package} backend takes {' or '.join(map(str, self.nbits_allowed))}")
        values = dict(info.params)
        group = values.get("g")
        if group is None:
            raise ValueError(f"layer kind {self.code!r} needs its q_group_size, the parameter g (e.g. {self.code}{nbits}g64)")
        if info.flag("p") and not info.populated:
            raise ValueError("'p' (_pending_beam_idx set) needs a layer that holds its tensors (upper-case kind)")
        backend = self._backend_or_refuse(None)
        axes = tuple(self.other_axis if info.flag(letter) else 0 for letter in ("k", "v"))
        if info.populated:
            self.attention_fill(obj, True, take, what)
            keys = obj["keys"]
            for name, axis in zip(_QUANTIZED, axes):  # noqa: B905 - both two long; strict= doubles zip's cost
                obj[name] = self.take_quantized(take, name, backend, (nbits, group, axis), keys)
            obj["cumulative_length"] = L.check_count(take(), "cumulative_length")
            if info.flag("p"):
                pending = L.check_tensor(take(), "_pending_beam_idx")
                if not _is_beam_index(pending):
                    raise ValueError(f"item _pending_beam_idx must be a 1-d integer tensor, got {pending.dtype} of shape {tuple(pending.shape)}")
                obj["_pending_beam_idx"] = pending
            else:
                obj["_pending_beam_idx"] = None
        else:
            self.attention_fill(obj, False, take, what)
            obj["cumulative_length"] = 0
            obj["_quantized_keys"] = obj["_quantized_values"] = None
            obj["_pending_beam_idx"] = None
        obj["nbits"] = nbits
        obj["axis_key"], obj["axis_value"] = axes
        obj["q_group_size"] = group
        obj["residual_length"] = values.get("r") or 0
        self.backend_objects(obj, backend, nbits)


def _leaf(x: Any, name: str, where: str) -> Any:
    # a tensor, but not one that holds others (a traceable subclass such as quanto's): the flat list holds
    # tensors that any operator takes (FakeTensors under tracing are fine)
    if not isinstance(x, L._Tensor) or hasattr(x, "__tensor_flatten__"):
        raise L._refuse(where, f"{name} is a {type(x).__qualname__}, not a plain tensor")
    return x


def _fits(check: Callable[[], None], where: str) -> None:
    """Run a rebuild-side check of the parts of a quantized state while describing: the same conditions,
    so that what is described can be rebuilt."""
    try:
        check()
    except ValueError as err:
        raise L._refuse(where, str(err)) from None


class QuantoAdapter(_GroupWiseAdapter):
    """``QuantoQuantizedLayer``: ``Q<nbits>g<q_group_size>[r<residual_length>][k][v][p]`` / ``q...``."""

    backend_attributes = ("qtype", "optimizer")
    package = "optimum-quanto"
    nbits_allowed = _QUANTO_NBITS
    other_axis = -1

    def backend(self) -> Any:
        return _quanto()

    def check_backend_objects(self, state: dict[str, Any], backend: Any, nbits: int, where: str) -> None:
        # what QuantoQuantizedLayer.__init__ makes: quanto's qint4 or qint2, and a MaxOptimizer (stateless)
        if state.get("qtype") is not backend["qtypes"][nbits]:
            raise L._refuse(where, f"qtype is {state.get('qtype')!r}, not optimum-quanto's qint{nbits} (nbits={nbits})")
        optimizer = state.get("optimizer")
        if type(optimizer) is not backend["MaxOptimizer"] or vars(optimizer):
            raise L._refuse(where, f"optimizer is {optimizer!r}, not a plain optimum-quanto MaxOptimizer")

    def backend_objects(self, obj: dict[str, Any], backend: Any, nbits: int) -> None:
        obj["qtype"] = backend["qtypes"][nbits]
        obj["optimizer"] = backend["MaxOptimizer"]()

    @staticmethod
    def _meta(backend: Any, settings: tuple[int, int, int], shape: tuple[int, ...]) -> tuple[dict[str, str], tuple[int, int], dict[str, str]]:
        # The metadata strings of WeightQBitsTensor.__tensor_flatten__ and of its PackedTensor's, from the
        # settings and the shape, formatted as quanto formats them (the comparison in check_quantized fails
        # loudly if a quanto release changes that). quanto quantizes a contiguous tensor, grouped and packed
        # contiguously.
        nbits, group, axis = settings
        qtype = backend["qtypes"][nbits]
        grouped = tuple(backend["grouped_shape"](list(shape), axis, group))
        meta = {
            "qtype": qtype.name,
            "axis": str(axis),
            "group_size": str(group),
            "size": str(list(shape)),
            "stride": str(_contiguous_stride(shape)),
        }
        packed = {"bits": str(qtype.bits), "size": str(list(grouped)), "stride": str((grouped[1], 1))}
        return meta, grouped, packed

    @staticmethod
    def _check_parts(name: str, settings: tuple[int, int, int], shape: tuple[int, ...], data: Any, scale: Any, shift: Any) -> None:
        nbits, group, _ = settings
        if math.prod(shape) % group:
            raise ValueError(f"item {name}.shape is {shape}, which does not split into groups of q_group_size={group}")
        n = math.prod(shape) // group
        grouped = (n, group) if settings[2] == 0 else (group, n)
        rows = -(-grouped[0] // (8 // nbits))  # quanto packs 8 // nbits values per byte along the rows
        if data.dtype != L._torch.uint8 or tuple(data.shape) != (rows, grouped[1]):
            raise ValueError(
                f"item {name}._data._data must be the packed uint8 data of shape {(rows, grouped[1])} ({shape} in groups "
                f"of {group}, {nbits} bits), got {data.dtype} of shape {tuple(data.shape)}"
            )
        for part, x in (("_scale", scale), ("_shift", shift)):
            if x.dim() != 2 or any(k not in (1, g) for k, g in zip(x.shape, grouped)):  # noqa: B905 - both two long (dim checked first)
                raise ValueError(f"item {name}.{part} has shape {tuple(x.shape)}, which does not fit the groups {grouped}")
            if x.device != data.device:
                raise ValueError(f"item {name}.{part} is on {x.device}, its data on {data.device}")
        if not scale.dtype.is_floating_point:
            raise ValueError(f"item {name}._scale must be floating point, got {scale.dtype}")

    def check_quantized(self, q: Any, name: str, backend: Any, settings: tuple[int, int, int], keys: Any, where: str) -> None:
        if type(q) is not backend["WeightQBitsTensor"]:
            raise L._refuse(where, f"{name} is a {type(q).__qualname__}, not an optimum-quanto WeightQBitsTensor")
        inner, meta = q.__tensor_flatten__()
        if inner != ["_data", "_scale", "_shift"]:
            raise L._refuse(where, f"{name} flattens to the tensors {inner}, not _data, _scale and _shift")
        shape = tuple(q.shape)
        if len(shape) != 4 or math.prod(shape) % settings[1]:
            raise L._refuse(where, f"{name} has shape {shape}, not 4-d in groups of q_group_size={settings[1]}")
        expected, _, expected_packed = self._meta(backend, settings, shape)
        if meta != expected:
            raise L._refuse(where, f"{name} has the metadata {meta}, not {expected} (what its settings and shape give)")
        if q.requires_grad:
            raise L._refuse(where, f"{name} requires grad")
        packed = q._data
        if type(packed) is not backend["PackedTensor"]:
            raise L._refuse(where, f"{name}._data is a {type(packed).__qualname__}, not an optimum-quanto PackedTensor")
        inner, meta = packed.__tensor_flatten__()
        if inner != ["_data"] or meta != expected_packed:
            raise L._refuse(where, f"{name}._data flattens to {inner} and {meta}, not ['_data'] and {expected_packed}")
        data = _leaf(packed._data, f"{name}._data._data", where)
        scale = _leaf(q._scale, f"{name}._scale", where)
        shift = _leaf(q._shift, f"{name}._shift", where)
        _fits(lambda: self._check_parts(name, settings, shape, data, scale, shift), where)

    def flatten_quantized(self, q: Any, out: list[Any]) -> None:
        out.append(q._data._data)
        out.append(q._scale)
        out.append(q._shift)
        out.append(shape_item(q.shape))

    def take_quantized(self, take: _Take, name: str, backend: Any, settings: tuple[int, int, int], keys: Any) -> Any:
        data = L.check_tensor(take(), f"{name}._data._data")
        scale = L.check_tensor(take(), f"{name}._scale")
        shift = L.check_tensor(take(), f"{name}._shift")
        shape = check_shape(take(), f"{name}.shape")
        self._check_parts(name, settings, shape, data, scale, shift)
        meta, grouped, packed_meta = self._meta(backend, settings, shape)
        packed = backend["PackedTensor"].__tensor_unflatten__({"_data": data}, packed_meta, grouped, (grouped[1], 1))
        return backend["WeightQBitsTensor"].__tensor_unflatten__(
            {"_data": packed, "_scale": scale, "_shift": shift}, meta, shape, tuple(_contiguous_stride(shape))
        )


class HQQAdapter(_GroupWiseAdapter):
    """``HQQQuantizedLayer``: ``H<nbits>g<q_group_size>[r<residual_length>][k][v][p]`` / ``h...``."""

    backend_attributes = ("quantizer",)
    package = "hqq"
    nbits_allowed = _HQQ_NBITS
    other_axis = 1

    def backend(self) -> Any:
        return _hqq()

    def check_backend_objects(self, state: dict[str, Any], backend: Any, nbits: int, where: str) -> None:
        if state.get("quantizer") is not backend:
            raise L._refuse(where, f"quantizer is {state.get('quantizer')!r}, not hqq's Quantizer")

    def backend_objects(self, obj: dict[str, Any], backend: Any, nbits: int) -> None:
        obj["quantizer"] = backend

    @staticmethod
    def _derived(backend: Any, settings: tuple[int, int, int], keys: Any) -> dict[str, Any]:
        # the metadata HQQQuantizedLayer._quantize and hqq's Quantizer.quantize write besides the tensors and
        # the shape, in their order
        nbits, group, axis = settings
        packing = backend.bit_to_packing[nbits]
        return {
            "nbits": nbits,
            "group_size": group,
            "axis": axis,
            "packing": packing,
            "unpack_view_dtype": backend.unpack_view_dtype[packing],
            "view_as_float": False,
            "compute_dtype": keys.dtype,
        }

    @staticmethod
    def _check_parts(name: str, derived: dict[str, Any], shape: tuple[int, ...], data: Any, scale: Any, zero: Any) -> None:
        group = derived["group_size"]
        if math.prod(shape) % group:
            raise ValueError(f"item {name}[1]['shape'] is {shape}, which does not split into groups of q_group_size={group}")
        if data.dtype != derived["unpack_view_dtype"] or data.dim() != 2:
            raise ValueError(
                f"item {name}[0] must be 2-d {derived['unpack_view_dtype']} (hqq's {derived['packing']} packing), got "
                f"{data.dtype} of shape {tuple(data.shape)}"
            )
        dtype = derived["compute_dtype"]  # hqq casts the scale and zero to it, on the data's device
        for part, x in (("scale", scale), ("zero", zero)):
            if x.dim() != 2 or x.dtype != dtype or x.device != data.device:
                raise ValueError(
                    f"item {name}[1]['{part}'] must be 2-d {dtype} on {data.device} (the keys' dtype, the data's device), "
                    f"got {x.dtype} of shape {tuple(x.shape)} on {x.device}"
                )

    def check_quantized(self, q: Any, name: str, backend: Any, settings: tuple[int, int, int], keys: Any, where: str) -> None:
        if type(q) is not tuple or len(q) != 2 or type(q[1]) is not dict:
            raise L._refuse(where, f"{name} is not an hqq (tensor, metadata) pair")
        data, meta = q
        if tuple(meta) != _HQQ_META:
            raise L._refuse(where, f"the metadata of {name} has the keys {list(meta)}, not {list(_HQQ_META)}")
        derived = self._derived(backend, settings, keys)
        for key, value in derived.items():
            if type(meta[key]) is not type(value) or meta[key] != value:
                raise L._refuse(where, f"{name} has {key}={meta[key]!r}, not {value!r} (what its settings and keys give)")
        shape = meta["shape"]
        if type(shape) is not L._torch.Size or len(shape) != 4:
            raise L._refuse(where, f"{name} has shape {shape!r}, not a 4-d torch.Size")
        data = _leaf(data, f"{name}[0]", where)
        scale = _leaf(meta["scale"], f"{name}[1]['scale']", where)
        zero = _leaf(meta["zero"], f"{name}[1]['zero']", where)
        _fits(lambda: self._check_parts(name, derived, tuple(shape), data, scale, zero), where)

    def flatten_quantized(self, q: Any, out: list[Any]) -> None:
        data, meta = q
        out.append(data)
        out.append(meta["scale"])
        out.append(meta["zero"])
        out.append(shape_item(meta["shape"]))

    def take_quantized(self, take: _Take, name: str, backend: Any, settings: tuple[int, int, int], keys: Any) -> Any:
        data = L.check_tensor(take(), f"{name}[0]")
        scale = L.check_tensor(take(), f"{name}[1]['scale']")
        zero = L.check_tensor(take(), f"{name}[1]['zero']")
        shape = check_shape(take(), f"{name}[1]['shape']")
        derived = self._derived(backend, settings, keys)
        self._check_parts(name, derived, shape, data, scale, zero)
        return (
            data,
            {
                "nbits": derived["nbits"],
                "group_size": derived["group_size"],
                "shape": L._torch.Size(shape),
                "scale": scale,
                "zero": zero,
                "axis": derived["axis"],
                "packing": derived["packing"],
                "unpack_view_dtype": derived["unpack_view_dtype"],
                "view_as_float": False,
                "compute_dtype": derived["compute_dtype"],
            },
        )
