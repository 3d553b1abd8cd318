"""The example inputs of an export and their dynamic dimensions, per flat tensor.

An export takes one example call ``(args, kwargs)`` and torch.export's ``dynamic_shapes`` for the model's
arguments. What is exported is a flat call (:mod:`._flat`): the tensors of the arguments, in the order of
Note [call keys], caches included. This module turns the user's ``dynamic_shapes`` into one spec per flat
tensor (Note [dynamic shapes of a cache]), derives such specs from several examples
(:func:`dynamic_shapes_from_examples`), and makes a second example when the user gave one (Note [a second
example]).

Note [dynamic shapes of a cache]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch.export reads ``dynamic_shapes`` through pytree, which does not flatten transformers caches. Here a
cache argument's spec is either one dict (or tuple) that applies to every tensor of the cache (``{0: batch,
2: past}`` for the keys and values of every layer), or a list with one spec per tensor of the cache in its
flat order (``k0, v0, k1, v1, ...`` for a ``DynamicCache``; Note [flat order] in :mod:`..serialize`). Every
other argument's spec has torch.export's form: a dict or tuple per tensor, the container's shape for lists,
tuples and dicts, ``None`` for static.

Note [a second example]
~~~~~~~~~~~~~~~~~~~~~~~
Output shapes of a piece behind an operator are learned from its calls (Note [learned shapes] in
:mod:`..custom_op`), and one call cannot tell a dynamic dimension from a constant of the same size. When the
user gave a single example, a second one is made by changing the size of every dynamic dimension: each
named ``Dim`` (or each group of unnamed hints of the same size) gets its own offset, within its range and
never 0 or 1, and a tensor's content along that dimension is tiled from the original (an all-ones mask
stays all ones; token ids stay ids). A derived dimension follows its root. If the model refuses the
stretched example, the export goes on with one example and the report says so.

Imports: :mod:`..custom_op` (the call structure), :mod:`..serialize`; torch on use.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..custom_op._calls import Call, describe_call, rebuild_arguments
from ..serialize import _caches
from ._errors import PieceByPieceExportError

DimSpec = dict[int, Any]  # dimension -> Dim, derived Dim or Dim hint


@dataclass
class Example:
    """One example call, described: its structure, its tensors, and the spec of each tensor."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    call: Call
    key: str
    tensors: list[Any]


def describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Example:
    call, tensors, key = describe_call("export_piece_by_piece", args, kwargs)
    return Example(args, kwargs, call, key, tensors)


def _bound(forward: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
    try:
        return inspect.signature(forward).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"export_piece_by_piece: the example does not match the model's forward: {exc}") from None


def flat_specs(forward: Any, example: Example, dynamic_shapes: Any) -> list[DimSpec | None]:
    """One spec per flat tensor of ``example``, from torch.export's ``dynamic_shapes`` for ``forward``."""
    if dynamic_shapes is None:
        return [None] * len(example.tensors)
    bound = _bound(forward, example.args, example.kwargs)
    names = list(bound.arguments)
    if isinstance(dynamic_shapes, Mapping):
        # by name, as torch.export takes it; a keyword the forward collects in **kwargs may also be named alone
        extra = {k: v for p in bound.signature.parameters.values() if p.kind is p.VAR_KEYWORD for k, v in bound.arguments.get(p.name, {}).items()}
        unknown = [k for k in dynamic_shapes if k not in names and k not in extra]
        if unknown:
            raise PieceByPieceExportError(
                f"dynamic_shapes names {unknown}, which the example does not pass; its arguments are {[*names, *extra]}"
            )
        pairs = [(name, bound.arguments[name] if name in names else extra[name], spec) for name, spec in dynamic_shapes.items()]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise PieceByPieceExportError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries where the example passes {len(names)} arguments "
                f"({', '.join(names)}); give one entry per argument, or a dict by name"
            )
        pairs = [(name, bound.arguments[name], spec) for name, spec in zip(names, dynamic_shapes, strict=True)]
    else:
        raise PieceByPieceExportError(f"dynamic_shapes must be a dict, a tuple or a list, not a {type(dynamic_shapes).__name__}")
    by_tensor: dict[int, DimSpec] = {}
    for name, value, spec in pairs:
        _walk(value, spec, name, by_tensor)
    return [by_tensor.get(id(t)) for t in example.tensors]


def _walk(value: Any, spec: Any, what: str, out: dict[int, DimSpec]) -> None:
    import torch

    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        _put(out, value, _tensor_spec(value, spec, what), what)
    elif _caches.is_cache(value):
        tensors = [t for t in _caches.flatten(value) if isinstance(t, torch.Tensor)]
        if isinstance(spec, Mapping) or (isinstance(spec, tuple) and not any(isinstance(s, (dict, list, tuple)) for s in spec)):
            specs = [spec] * len(tensors)
        elif isinstance(spec, list) and len(spec) == len(tensors):
            specs = spec
        else:
            raise PieceByPieceExportError(
                f"dynamic_shapes of {what} (a {type(value).__name__} of {len(tensors)} tensors) must be one spec for all "
                "its tensors or a list of one per tensor (Note [dynamic shapes of a cache])"
            )
        for i, (t, s) in enumerate(zip(tensors, specs, strict=True)):
            if s is None:
                continue
            if s is spec and not _fits(t, s):
                raise PieceByPieceExportError(
                    f"dynamic_shapes of {what}: the spec {s!r} given for all its tensors does not fit its tensor {i}, a "
                    f"{t.dim()}-d tensor of shape {tuple(t.shape)}; give a list of one spec per tensor (Note [dynamic "
                    "shapes of a cache]), or derive it from two examples with dynamic_shapes_from_examples"
                )
            _put(out, t, _tensor_spec(t, s, f"{what} tensor {i}"), what)
    elif isinstance(value, Mapping):
        if not isinstance(spec, Mapping) or set(spec) - set(value):
            raise PieceByPieceExportError(f"dynamic_shapes of {what} must be a dict with keys among {sorted(map(str, value))}")
        for k, v in value.items():
            _walk(v, spec.get(k), f"{what}[{k!r}]", out)
    elif isinstance(value, (list, tuple)):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise PieceByPieceExportError(f"dynamic_shapes of {what} must be a list or tuple of {len(value)} entries")
        for i, (v, s) in enumerate(zip(value, spec, strict=True)):
            _walk(v, s, f"{what}[{i}]", out)
    else:
        raise PieceByPieceExportError(f"dynamic_shapes of {what} must be None: it is a {type(value).__name__}, not a tensor")


def _fits(t: Any, spec: Any) -> bool:
    dims = spec.keys() if isinstance(spec, Mapping) else range(len(spec))
    return all(isinstance(d, int) and -t.dim() <= d < t.dim() for d in dims)


def _tensor_spec(t: Any, spec: Any, what: str) -> DimSpec:
    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = list(enumerate(spec))
    else:
        raise PieceByPieceExportError(f"dynamic_shapes of {what} (a tensor) must be a dict or a tuple, not {spec!r}")
    dims: DimSpec = {}
    for d, s in items:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise PieceByPieceExportError(f"dynamic_shapes of {what}: {d!r} is not a dimension of a {t.dim()}-d tensor")
        if s is None or isinstance(s, int):
            if isinstance(s, int) and s != t.shape[d]:
                raise PieceByPieceExportError(f"dynamic_shapes of {what}: dimension {d} is {t.shape[d]}, not {s}")
            continue
        if not _is_dim(s):
            raise PieceByPieceExportError(f"dynamic_shapes of {what}: dimension {d} has {s!r}, not a torch.export.Dim")
        dims[d % t.dim()] = s
    return dims


def _is_dim(s: Any) -> bool:
    from torch.export.dynamic_shapes import Dim, _DimHint

    return isinstance(s, (Dim, _DimHint)) or (isinstance(s, type) and issubclass(s, Dim))


def _put(out: dict[int, DimSpec], t: Any, dims: DimSpec, what: str) -> None:
    old = out.setdefault(id(t), dims)
    if old is not dims and old != dims:
        raise PieceByPieceExportError(f"dynamic_shapes: a tensor passed twice ({what}) has two different specs")


def static_dims(dims: DimSpec) -> bool:
    """True when no dimension of the spec is dynamic (``Dim.STATIC`` hints only)."""
    from torch.export.dynamic_shapes import _DimHint, _DimHintType

    return all(isinstance(s, _DimHint) and s.type == _DimHintType.STATIC for s in dims.values())


# ---------------------------------------------------------------------------------------------------
# dynamic shapes from several examples


def dynamic_shapes_from_examples(model: Any, examples: Sequence[tuple[tuple[Any, ...], Mapping[str, Any] | None]]) -> dict[str, Any]:
    """torch.export's ``dynamic_shapes`` for ``model``, from two or more example calls.

    ``examples`` is a sequence of ``(args, kwargs)``, each a call of ``model`` with the same structure (the same
    arguments given, the same ones ``None``, the same scalar values, the same cache kinds). A dimension whose
    size differs between examples becomes ``torch.export.Dim.DYNAMIC``, as ``torch.export.AdditionalInputs``
    decides; caches included, with one spec per tensor of the cache (Note [dynamic shapes of a cache]).
    Returns a dict from argument name to its spec, which :func:`export_piece_by_piece` takes as
    ``dynamic_shapes``; static arguments get ``None``.

    Raises :class:`PieceByPieceExportError` for fewer than two examples or examples of different structures.
    """
    described = [describe(tuple(args), dict(kwargs or {})) for args, kwargs in examples]
    if len(described) < 2:
        raise PieceByPieceExportError("dynamic_shapes_from_examples needs at least two examples")
    per_tensor = varying_dims(described)
    first = described[0]
    bound = _bound(model.forward, first.args, first.kwargs)
    by_id = {id(t): dims for t, dims in zip(first.tensors, per_tensor, strict=True)}
    return {name: _mirror(value, by_id) for name, value in bound.arguments.items()}


def varying_dims(described: Sequence[Example]) -> list[DimSpec | None]:
    """Per flat tensor of the first example, ``Dim.DYNAMIC`` for each dimension whose size differs."""
    from torch.export import Dim

    first = described[0]
    for other in described[1:]:
        if other.key != first.key:
            raise PieceByPieceExportError(
                f"the examples have different structures: {first.key} and {other.key}; every example must pass the "
                "same arguments, the same ones None, the same scalar values"
            )
    out: list[DimSpec | None] = []
    for i, t in enumerate(first.tensors):
        shapes = {tuple(e.tensors[i].shape) for e in described}
        if len({len(s) for s in shapes}) > 1:
            raise PieceByPieceExportError(f"flat tensor {i} of the examples has different ranks: {sorted(shapes)}")
        dims = {d: Dim.DYNAMIC for d in range(t.dim()) if len({s[d] for s in shapes}) > 1}
        out.append(dims or None)
    return out


def _mirror(value: Any, by_id: dict[int, DimSpec | None]) -> Any:
    """``value``'s spec in torch.export's form (a cache's as a list per tensor), from specs by tensor identity."""
    import torch

    if isinstance(value, torch.Tensor):
        return by_id.get(id(value))
    if _caches.is_cache(value):
        specs = [by_id.get(id(t)) for t in _caches.flatten(value) if isinstance(t, torch.Tensor)]
        return specs if any(s is not None for s in specs) else None
    if isinstance(value, Mapping):
        inner = {k: _mirror(v, by_id) for k, v in value.items()}
        return inner if any(v is not None for v in inner.values()) else None
    if isinstance(value, (list, tuple)):
        items = [_mirror(v, by_id) for v in value]
        return type(value)(items) if type(value) in (list, tuple) and any(v is not None for v in items) else None
    return None


# ---------------------------------------------------------------------------------------------------
# a second example (Note [a second example])


def stretched(example: Example, specs: Sequence[DimSpec | None]) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, tuple[int, int]]] | None:
    """A copy of ``example`` whose dynamic dimensions have other sizes, and the sizes changed (``name: (old, new)``);
    None when no dimension is dynamic."""
    sizes = _new_sizes(example, specs)
    if not sizes:
        return None
    import torch

    made: dict[int, Any] = {}
    tensors = []
    for t, dims in zip(example.tensors, specs, strict=True):
        if id(t) not in made:
            new = t
            for d, spec in (dims or {}).items():
                want = _size_of(spec, sizes, t.shape[d])
                if want != new.shape[d]:
                    index = torch.arange(want, device=t.device) % max(int(t.shape[d]), 1)
                    new = new.index_select(d, index)
            made[id(t)] = new
        tensors.append(made[id(t)])
    args, kwargs = rebuild_arguments(example.call, tensors)
    return tuple(args), kwargs, {name: pair for name, pair in sizes.items()}


def _root(spec: Any, size: int) -> tuple[str, Any]:
    """The name a dynamic dimension is grouped by, and the spec that bounds it (a derived Dim's root)."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint

    if isinstance(spec, _DimHint):
        return f"the dimensions of size {size}", spec
    root = spec.root if isinstance(spec, _DerivedDim) else spec
    return str(root.__name__), root


def _new_sizes(example: Example, specs: Sequence[DimSpec | None]) -> dict[str, tuple[int, int]]:
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    roots: dict[str, tuple[int, Any]] = {}
    for t, dims in zip(example.tensors, specs, strict=True):
        for d, spec in (dims or {}).items():
            if isinstance(spec, _DimHint) and spec.type == _DimHintType.STATIC:
                continue
            name, root = _root(spec, int(t.shape[d]))
            if isinstance(spec, _DerivedDim):
                continue  # follows its root, which another tensor or the range gives
            roots.setdefault(name, (int(t.shape[d]), root))
    sizes: dict[str, tuple[int, int]] = {}
    taken = {old for old, _ in roots.values()}
    for offset, (name, (old, root)) in enumerate(roots.items(), start=1):
        low = max(2, int(getattr(root, "min", None) or 0))
        high = getattr(root, "max", None)
        candidates = [old + offset + k for k in range(8)] + [old - offset - k for k in range(8)]
        for size in candidates:
            if size >= low and (high is None or size <= high) and size not in taken:
                sizes[name] = (old, size)
                taken.add(size)
                break
    return sizes


def _size_of(spec: Any, sizes: Mapping[str, tuple[int, int]], current: int) -> int:
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    if isinstance(spec, _DimHint):
        if spec.type == _DimHintType.STATIC:
            return int(current)
        return sizes.get(f"the dimensions of size {int(current)}", (current, int(current)))[1]
    if isinstance(spec, _DerivedDim):
        root = sizes.get(str(spec.root.__name__))
        return int(spec.fn(root[1])) if root is not None else int(current)
    return sizes.get(str(spec.__name__), (current, int(current)))[1]
