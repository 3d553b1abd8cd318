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
named ``Dim`` and each unnamed hint (``Dim.AUTO``, ``Dim.DYNAMIC``) gets its own offset, within its range and
never 0 or 1, so that no two dimensions that were equal by chance in the example move together (their
operators would learn them tied, and the program would guard on their equality); a tensor's content along
that dimension is tiled from the original (an all-ones mask stays all ones; token ids stay ids). A derived
dimension follows its root. If the model refuses that, the hints of one size move together (a batch given as
``Dim.DYNAMIC`` to two inputs), then those of one size and dimension index apart from the others of that size
where the model takes it (the batch apart from new tokens when both were 2). If it refuses even the hints of
one size together, only the dimensions it accepts changed alone are changed (a ``Dim.AUTO`` on a Linear's
input features stays). If none, the export goes on with one example and the report says so.

Note [every declared range]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
Two examples show a program at two points. After the export, the program is also run, and compared with
eager, with each independent dynamic dimension alone at the low end of its declared range, a value between
and the high end (an unbounded range is taken up to twice the example's size and one), the others at the
example's sizes; and where the program's own range of a dimension ends before the declared one (a guard such
as ``past <= 15``, which Llama 4's chunked attention puts in the program of its decode step), one past that end,
which sampling up to twice the example's size would miss: with the dimensions that moved with it in the
examples, else alone (past its window, a cache counts more positions than it keeps keys). A point eager refuses is out of the model's own range
and skipped; a point eager accepts and the program refuses, or computes otherwise, fails the verdict. A named ``Dim`` (or ``Dim.DYNAMIC``) whose every
other size eager refuses is a static dimension declared dynamic: an error, with torch's suggested fix; unless the
examples show it at two sizes, when it only moves with others (a sliding cache's keys with its count, below the
window: Llama 4's decode step), and its points are skipped as any point eager refuses.

Note [sizes of one]
~~~~~~~~~~~~~~~~~~~
torch.export gives a dimension declared by a hint (``Dim.AUTO``, ``Dim.DYNAMIC``, and every dimension taken from
``AdditionalInputs``) the range 2 and up, yet its program takes a size of 1 there at run time: a decode step
exported from calls of 2 and 3 new tokens is called with one. An expression of such a dimension is held to its
range, though: a sliding-window layer's mask of ``new + 4`` positions (GPT-OSS) has the range 6 and up in the
layer's own program, which refused the 5 of one new token after a load, while the export had passed. So the
range of each expression of one such dimension starts where the dimension at 1 puts it
(:func:`._alone.relax_ones`), and the program and every own program are checked at 1 like any point of the
declared ranges (:func:`range_points`): a program that differs there fails, an own program that fails or differs
is dropped. Only a refusal of the program at 1 is no failure (torch's range does not include it): the report
says so, and no own program is judged there, as none would meet 1 in the loaded program either.

Note [checks in bounded memory]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The end of a declared range may be far beyond anything the machine holds: a ``past`` declared up to 131,072
positions is a cache of 86 GB for a 70B-shaped model at batch 2, and even a 4,096-position cache, held four
times over by a check (the inputs, eager's outputs, the program's, the calls recorded for the pieces' own
programs), made the range checks the largest cost in memory of an export (issue 28). So a point of a range whose inputs
would take more than the checks' limit (``check_bytes``: by default 1/64 of the model's weights, at least
32 MiB) is checked instead at the largest size whose inputs fit, and the report says which point was moved,
what it would have taken and how to check it (a larger ``check_bytes``): never skipped in silence. And a
check holds as little beside its inputs as it can: eager's outputs, then the program's, computed on the
inputs themselves (their last use; copies of those the point shares with the examples, which a StaticCache
would write into); each piece's own program is run on its piece's call as the program's operator meets it,
on a copy of that call alone, instead of on a recording of the whole model (:mod:`._ranges`).

Imports: :mod:`..custom_op` (the call structure), :mod:`..serialize`; torch on use.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Generator, Mapping, Sequence
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


def check_dims(example: Example, specs: Sequence[DimSpec | None], label: Any) -> None:
    """Refuse, naming the mistake, ``dynamic_shapes`` that cannot fit the example: a ``Dim`` name given to Dims
    of other bounds, an example size outside its ``Dim``'s range, and an example size of 0 or 1 for a dimension
    declared dynamic (torch.export specializes those sizes). ``label`` names a place (``#0.1``) for people."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    seen: dict[str, tuple[Any, str]] = {}
    for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True)):
        for d, spec in (dims or {}).items():
            where, size = label(f"#{i}.{d}"), int(t.shape[d])
            if isinstance(spec, _DimHint):
                if spec.type != _DimHintType.STATIC and size < 2:
                    raise PieceByPieceExportError(_size_one(where, size, f"Dim.{spec.type.name}"))
                continue
            if isinstance(spec, _DerivedDim):
                continue  # its root's range and the example's size are torch's to check
            name, bounds_ = str(spec.__name__), (spec.min, spec.max)
            old = seen.setdefault(name, (bounds_, where))
            if old[0] != bounds_:
                raise PieceByPieceExportError(
                    f"dynamic_shapes: the name {name!r} is given to two Dims of other bounds, {_dim(name, *old[0])} "
                    f"(for {old[1]}) and {_dim(name, *bounds_)} (for {where}); torch.export takes a name for one "
                    "dimension: create the Dim once and use it for both, or give them different names"
                )
            if size < 2:
                raise PieceByPieceExportError(_size_one(where, size, _dim(name, *bounds_)))
            low, high = bounds(spec, size)
            if size < low or (high is not None and size > high):
                raise PieceByPieceExportError(
                    f"dynamic_shapes: {where} is {size} in the example, outside the range of {_dim(name, *bounds_)}; "
                    f"give an example inside the range, or widen it ({'min' if size < low else 'max'}={size})"
                )


def _dim(name: str, low: Any, high: Any) -> str:
    return f"Dim({name!r}, min={low}" + (f", max={high})" if isinstance(high, int) else ")")


def _size_one(where: str, size: int, spec: str) -> str:
    return (
        f"dynamic_shapes: {where} is {size} in the example, declared dynamic ({spec}); torch.export specializes a "
        "dimension of size 0 or 1 to that constant: give an example of size 2 or more (the range may still "
        "include 1)"
    )


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


Partition = Mapping[str, str]  # a hint's place ("#0.1") -> the name of the group of hints it moves with


def stretched(example: Example, specs: Sequence[DimSpec | None], partition: Partition | None = None, only: Any = None) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, tuple[int, int]]] | None:
    """A copy of ``example`` whose dynamic dimensions (those named in ``only``, if given) have other sizes, and the
    sizes changed (``name: (old, new)``); None when no dimension is dynamic. Every hint (``Dim.AUTO``,
    ``Dim.DYNAMIC``) is a dimension of its own, unless ``partition`` groups it with others (Note [a second
    example])."""
    sizes = _new_sizes(example, specs, partition)
    if only is not None:
        sizes = {name: pair for name, pair in sizes.items() if name in only}
    if not sizes:
        return None
    args, kwargs = resized(example, specs, {name: new for name, (_, new) in sizes.items()}, partition)
    return args, kwargs, sizes


def hint_partitions(example: Example, specs: Sequence[DimSpec | None]) -> Generator[dict[str, str], bool, None]:
    """The ways to group the hints, finest first, for the second example (Note [a second example]): each apart;
    all those of one size together; then, from that, each size's hints of one dimension index apart from the
    rest (the caller keeps a split the model accepts, and gives it back through ``send``)."""
    from torch.export.dynamic_shapes import _DimHint, _DimHintType

    places = {
        f"#{i}.{d}": (int(t.shape[d]), d)
        for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True))
        for d, spec in (dims or {}).items()
        if isinstance(spec, _DimHint) and spec.type != _DimHintType.STATIC
    }
    if not places:
        return
    yield {p: p for p in places}
    # a group is named by its first member, a place, so that it reads as that dimension ("input_ids dim 0")
    first_of: dict[Any, str] = {}
    for p, (size, _) in places.items():
        first_of.setdefault(size, p)
    partition = {p: first_of[size] for p, (size, _) in places.items()}
    if len(set(partition.values())) == len(places):
        return  # no two hints of one size: the first way was the only one
    accepted = yield partition
    if not accepted:
        return
    for size, d in sorted(set(places.values())):
        members = [p for p, v in places.items() if v == (size, d)]
        rest = [p for p, v in places.items() if v[0] == size and v[1] != d and partition[p] == partition[members[0]]]
        if rest:
            trial = {**partition, **dict.fromkeys(members, members[0])}
            trial.update(dict.fromkeys(rest, rest[0]))
            if (yield trial):
                partition = trial


def size_partition(example: Example, specs: Sequence[DimSpec | None]) -> dict[str, str]:
    """Every hint with the hints of its size in ``example``, as one dimension."""
    from torch.export.dynamic_shapes import _DimHint

    return {
        f"#{i}.{d}": f"the dimensions of size {int(t.shape[d])}"
        for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True))
        for d, spec in (dims or {}).items()
        if isinstance(spec, _DimHint)
    }


def observed_partition(examples: Sequence[Example], specs: Sequence[DimSpec | None]) -> dict[str, str]:
    """How the hints move together across given examples (``AdditionalInputs``): those whose sizes are equal in
    every example are one dimension (the batch of the ids and of every cache tensor), named by the first."""
    by_sizes: dict[tuple[int, ...], str] = {}
    partition: dict[str, str] = {}
    for i, dims in enumerate(specs):
        for d in dims or {}:
            place = f"#{i}.{d}"
            partition[place] = by_sizes.setdefault(tuple(int(e.tensors[i].shape[d]) for e in examples), place)
    return partition


def resized(example: Example, specs: Sequence[DimSpec | None], sizes: Mapping[str, int], partition: Partition | None = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A copy of ``example`` with each dynamic dimension named in ``sizes`` (by :func:`groups`' names) at that
    size, its content tiled from the original along it; the others as they were."""
    import torch

    made: dict[int, Any] = {}
    tensors = []
    for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True)):
        if id(t) not in made:
            new = t
            for d, want in _sized(t, dims, i, sizes, partition).items():
                if want != new.shape[d]:
                    index = torch.arange(want, device=t.device) % max(int(t.shape[d]), 1)
                    new = new.index_select(d, index)
            made[id(t)] = new
        tensors.append(made[id(t)])
    args, kwargs = rebuild_arguments(example.call, tensors)
    return tuple(args), kwargs


def _sized(t: Any, dims: DimSpec | None, i: int, sizes: Mapping[str, int], partition: Partition | None) -> dict[int, int]:
    """Each dynamic dimension of flat tensor ``i`` (``t``) at its size in ``sizes`` (its own where not named)."""
    return {d: _size_of(spec, sizes, int(t.shape[d]), _name(spec, i, d, partition)) for d, spec in (dims or {}).items()}


def _name(spec: Any, i: int, d: int, partition: Partition | None) -> str:
    """The name a dynamic dimension is grouped by: a named Dim's (a derived Dim's root's), and for a hint its
    place (``#0.1``: dimension 1 of flat tensor 0) or the group ``partition`` puts it in."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint

    if isinstance(spec, _DimHint):
        place = f"#{i}.{d}"
        return place if partition is None else partition.get(place, place)
    root = spec.root if isinstance(spec, _DerivedDim) else spec
    return str(root.__name__)


def groups(example: Example, specs: Sequence[DimSpec | None], partition: Partition | None = None) -> dict[str, tuple[int, Any]]:
    """Each independent dynamic dimension of ``example``: its name (:func:`_name`), its size in the example and
    the spec that bounds it (a derived Dim's root); ``Dim.STATIC`` and derived dimensions are not among them."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    roots: dict[str, tuple[int, Any]] = {}
    for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True)):
        for d, spec in (dims or {}).items():
            if (isinstance(spec, _DimHint) and spec.type == _DimHintType.STATIC) or isinstance(spec, _DerivedDim):
                continue  # a derived dimension follows its root, which another tensor or the range gives
            roots.setdefault(_name(spec, i, d, partition), (int(t.shape[d]), spec))
    return roots


def bounds(spec: Any, size: int) -> tuple[int, int | None]:
    """The declared range of a dimension: a Dim's ``min`` and ``max`` (None when unbounded), a hint's [2, none]."""
    low = getattr(spec, "min", None)
    high = getattr(spec, "max", None)
    low = 2 if low is None else int(low)
    high = high if isinstance(high, int) else None  # torch's int_oo when unbounded, an int (not a bool) else
    return low, high


def _new_sizes(example: Example, specs: Sequence[DimSpec | None], partition: Partition | None) -> dict[str, tuple[int, int]]:
    roots = groups(example, specs, partition)
    sizes: dict[str, tuple[int, int]] = {}
    taken = {old for old, _ in roots.values()}
    for offset, (name, (old, spec)) in enumerate(roots.items(), start=1):
        low, high = bounds(spec, old)
        low = max(2, low)
        candidates = [old + offset + k for k in range(8)] + [old - offset - k for k in range(8)]
        for size in candidates:
            if size >= low and (high is None or size <= high) and size not in taken:
                sizes[name] = (old, size)
                taken.add(size)
                break
    return sizes


def _size_of(spec: Any, sizes: Mapping[str, int], current: int, name: str) -> int:
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    if isinstance(spec, _DimHint) and spec.type == _DimHintType.STATIC:
        return int(current)
    if isinstance(spec, _DerivedDim):
        root = sizes.get(name)
        return int(spec.fn(root)) if root is not None else int(current)
    return int(sizes.get(name, current))


# ---------------------------------------------------------------------------------------------------
# the declared ranges (Note [every declared range])


def input_bytes(example: Example, specs: Sequence[DimSpec | None], sizes: Mapping[str, int], partition: Partition | None = None) -> int:
    """The bytes of ``example``'s distinct tensors with the dimensions named in ``sizes`` at those sizes, as
    :func:`resized` makes them, without making them."""
    seen: set[int] = set()
    total = 0
    for i, (t, dims) in enumerate(zip(example.tensors, specs, strict=True)):
        if id(t) in seen:
            continue
        seen.add(id(t))
        shape = {**dict(enumerate(map(int, t.shape))), **_sized(t, dims, i, sizes, partition)}
        total += math.prod(shape.values()) * t.element_size()
    return total


def largest_within(example: Example, specs: Sequence[DimSpec | None], name: str, size: int, limit: int, partition: Partition | None = None) -> int | None:
    """The largest size of dimension ``name`` between the example's and ``size`` at which the example's tensors
    take at most ``limit`` bytes (Note [checks in bounded memory]); None if none above the example's does."""
    old = groups(example, specs, partition)[name][0]
    low, high = old, size  # the bytes grow with the size: the largest one within the limit, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if input_bytes(example, specs, {name: middle}, partition) <= limit:
            low = middle
        else:
            high = middle - 1
    return low if low > old else None


def range_points(example: Example, specs: Sequence[DimSpec | None], partition: Partition | None = None) -> list[dict[str, int]]:
    """The sizes at which the program is checked besides the examples (Note [every declared range]): each
    independent dynamic dimension alone at the low end of its range, a value between and the high end (an
    unbounded range's "end" is twice the example's size and one more), the others at the example's sizes."""
    from torch.export.dynamic_shapes import _DimHint

    points: list[dict[str, int]] = []
    for name, (old, spec) in groups(example, specs, partition).items():
        low, high = bounds(spec, old)
        low = max(low, 1)
        top = high if high is not None else 2 * old + 1
        # a hint's range starts at 2, yet its program takes 1 (Note [sizes of one]): a decode step's one new token
        for size in sorted({low, (low + top) // 2, top} | ({1} if isinstance(spec, _DimHint) else set())):
            if size != old and size >= 1:
                points.append({name: size})
    return points


def guard_points(example: Example, specs: Sequence[DimSpec | None], program: Any, partition: Partition | None = None) -> list[tuple[dict[str, int], str]]:
    """One size past the end of the program's own range of each independent dynamic dimension, where that end
    is within the declared range (Note [every declared range]), and the place (``#3.0``) of the hint guarded (a
    named Dim's name, which moves only as a whole): the program's placeholders are the flat tensors of
    ``example`` in order, each dimension a symbol of ``program.range_constraints``."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint, _DimHintType

    user = set(program.graph_signature.user_inputs)
    values = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
    if len(values) != len(example.tensors):  # not the flat call (never for the export's program): nothing to add
        return []
    points: list[tuple[dict[str, int], str]] = []
    for i, (value, dims) in enumerate(zip(values, specs, strict=True)):
        for d, spec in (dims or {}).items():
            if (isinstance(spec, _DimHint) and spec.type == _DimHintType.STATIC) or isinstance(spec, _DerivedDim):
                continue
            expr = getattr(getattr(value.shape[d], "node", None), "expr", None) if value is not None else None
            upper: Any = getattr(program.range_constraints.get(expr), "upper", None)
            if not getattr(upper, "is_Integer", False):  # unbounded: torch's int_oo, which is no sympy Integer
                continue
            high = bounds(spec, int(example.tensors[i].shape[d]))[1]
            upper = int(upper)
            name = _name(spec, i, d, partition)
            point = {name: upper + 1}
            if (high is None or upper < high) and point not in [p for p, _ in points]:  # a named Dim never moves alone
                points.append((point, f"#{i}.{d}" if isinstance(spec, _DimHint) else name))
    return points
