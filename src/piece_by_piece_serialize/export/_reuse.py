"""Identical pieces share one exported program instead of being exported one by one (Note [shared programs]).

Note [shared programs]
~~~~~~~~~~~~~~~~~~~~~~
With ``classes=`` every piece is also exported alone, its weights as inputs (Note [weights as inputs] in
:mod:`..custom_op`), so 32 identical decoder layers would be 32 exports of the same code. A piece takes the program
of an earlier piece that was exported (its *donor*) instead when everything that decides the trace is the same:

1. the module tree: the same classes at the same paths, the same ``training`` flags, no hooks on either, the same
   parameter and buffer names, shapes, dtypes and devices (the program's weight inputs);
2. every other attribute of every submodule equal to the donor's: plain values (numbers, strings, ``None``, their
   tuples) by class and value, anything else (a shared config) by identity; plain values that differ (a
   ``layer_idx``) are set apart;
3. none of those differing values read while the piece runs its first recorded call on the tracing path (Note [the
   tracing path]): each is watched, on shallow copies of the modules that hold it, by a property that records the
   read -- indexing a cache by ``layer_idx``, choosing sliding attention by it, ``vars()`` of the module: any of
   these, or an error in that run, and the piece is exported alone -- except a position of a cache layer the piece
   carries, where the donor's value is the donor's position of that layer (a ``layer_idx``), which may index the
   cache and nothing else (Note [renumbered layers], below);
4. the same call structure (key, the positions of the cache layers carried aside), dynamic dimensions, and example
   shapes and dtypes as the donor's program was exported with;
5. and then (in :mod:`._job`) the donor's program, run on this piece's weights and every recorded call of the
   structure, must give this piece's recorded eager outputs no further off than it gave the donor's.

Why that is sound enough: torch.export traces by running the module's Python once on the example; with the same
code, the same call (1, 4) and state equal but for values that run never read (2, 3), the piece's run performs
the same operations on the same inputs and takes the same branches as the donor's, so it would record the same
graph and the same guards over the same dynamic dimensions; and (5) checks the result against the piece's own
eager outputs anyway. Whatever fails falls back to exporting the piece alone, as before.

The same argument shares a failure: a piece identical by points 1 to 4 to one whose export alone torch.export
failed on (a data-dependent branch: LongCat-Flash's experts, one per layer) would trace the same operations and
meet the same failure, so it takes that failure instead of an export of its own that costs as much and fails as
well. Not a program refusing one of its donor's recorded calls (``_alone.RefusedCall``): the piece's calls are its
own, and may pass.

Imports: :mod:`..custom_op` (shallow copies), :mod:`._examples` (the examples' description), :mod:`._record` (the
tracing path), :mod:`._values` (tensors without values) and :mod:`..serialize` (copies of the recorded calls); torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..custom_op import shallow_copy
from ..custom_op._calls import flat_outputs
from ..serialize import make_copy
from ..serialize._cache_slice import spares
from ._examples import Example
from ._record import Recorded, tracing_path
from ._values import is_valueless

_PLAIN = (int, float, bool, str, type(None))
# what every module has: compared through the module tree, the weights and the hooks instead
_MODULE_STATE = frozenset(vars(torch.nn.Module()))
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def reusable(donor: torch.nn.Module, module: torch.nn.Module, calls: Sequence[Recorded], donor_example: Example,
             example: Example, donor_specs: list[Any], specs: list[Any]) -> bool:  # fmt: skip
    """Whether ``module`` may take the program ``donor`` was exported to (points 1 to 4 of Note [shared programs],
    and Note [renumbered layers] for pieces that carry other layers of a cache)."""
    if _structure(example) != _structure(donor_example) or [str(s) for s in specs] != [str(s) for s in donor_specs]:
        return False
    if [(tuple(t.shape), t.dtype) for t in example.tensors] != [(tuple(t.shape), t.dtype) for t in donor_example.tensors]:
        return False
    renumber = _renumbering(example, donor_example)
    differing = _differing(donor, module)
    if differing is None or renumber is None:
        return False
    if not differing and not renumber:
        return True
    return not _reads(module, donor, differing, calls[0], example, renumber)


def same_structures(described: Sequence[Example], donor: Sequence[Example]) -> bool:
    """Whether two pieces' recorded calls have, call by call, the same structure but for the positions of the
    cache layers they carry (point 4 for every call, where :func:`reusable` looks at the first)."""
    return len(described) == len(donor) and all(_structure(a) == _structure(b) for a, b in zip(described, donor, strict=True))


def _structure(example: Example) -> Any:
    """An example's call structure (its key) but for the positions of the cache layers it carries."""
    call = example.call
    cut = tuple((arg, n, len(positions)) for arg, n, positions in call.slices)
    return call.kinds, call.keywords, tuple(sorted(call.constants.items())), cut


def _renumbering(example: Example, donor: Example) -> dict[int, int] | None:
    """The donor's position of each cache layer position the piece carries where they differ (empty when the
    same), or ``None`` when one position would stand for two."""
    pairs: dict[int, int] = {}
    for (_, _, mine), (_, _, theirs) in zip(example.call.slices, donor.call.slices, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            if pairs.setdefault(a, b) != b:
                return None
    if len(set(pairs.values())) != len(pairs):
        return None
    return {a: b for a, b in pairs.items() if a != b}


def _weights(module: torch.nn.Module) -> list[tuple[str, Any, Any, Any]]:
    named = [*module.named_parameters(), *module.named_buffers()]
    return [(name, tuple(t.shape), t.dtype, t.device) for name, t in named]


def _differing(donor: torch.nn.Module, module: torch.nn.Module) -> dict[str, set[str]] | None:
    """Per submodule path, the plain attributes whose values differ; ``None`` when anything else differs."""
    if type(donor) is not type(module) or _weights(donor) != _weights(module):
        return None
    theirs, mine = list(donor.named_modules(remove_duplicate=False)), list(module.named_modules(remove_duplicate=False))
    if [(p, type(m)) for p, m in theirs] != [(p, type(m)) for p, m in mine]:
        return None
    differing: dict[str, set[str]] = {}
    for (path, a), (_, b) in zip(theirs, mine, strict=True):
        if a.training != b.training or any(getattr(m, h, None) for m in (a, b) for h in _HOOKS):
            return None
        state_a = {k: v for k, v in vars(a).items() if k not in _MODULE_STATE}
        state_b = {k: v for k, v in vars(b).items() if k not in _MODULE_STATE}
        if state_a.keys() != state_b.keys():
            return None
        for name, value in state_a.items():
            other = state_b[name]
            if value is other or (_plain(value) and type(value) is type(other) and value == other):
                continue
            if not (_plain(value) and _plain(other)):
                return None  # another object (a config of its own, a function): the trace could depend on it
            differing.setdefault(path, set()).add(name)
    return differing


def _plain(value: Any) -> bool:
    if type(value) is tuple:
        return all(_plain(v) for v in value)
    return type(value) in _PLAIN


def _reads(module: torch.nn.Module, donor: torch.nn.Module, differing: dict[str, set[str]], call: Recorded, example: Example,
           renumber: dict[int, int]) -> bool:  # fmt: skip
    """Whether running ``module`` on ``call`` (on the tracing path) reads any of the ``differing`` attributes, other
    than as the index of a cache layer it carries (Note [renumbered layers])."""
    read: list[str] = []
    copies: dict[str, Any] = {}

    def copied(path: str) -> Any:  # the module at ``path`` in a copy of the tree: watched where it holds a value
        if path not in copies:
            original = module.get_submodule(path) if path else module
            if path in differing:
                theirs = vars(donor.get_submodule(path) if path else donor)
                index = {n: (v, theirs[n]) for n in differing[path]
                         if type(v := vars(original)[n]) is int and type(theirs[n]) is int and renumber.get(v) == theirs[n]}  # fmt: skip
                copies[path] = _watched(original, differing[path], read, index)
            else:
                copies[path] = shallow_copy(original)
            if path:
                parent, _, name = path.rpartition(".")
                copied(parent)._modules[name] = copies[path]
        return copies[path]

    for path in differing:
        copied(path)
    root = copied("")
    args, kwargs = make_copy((call.args, call.kwargs))
    given = [*args, *kwargs.values()]
    for arg, _, positions in example.call.slices:
        _renumbered(given[arg], positions, example.call.owner)
    try:
        with tracing_path(), _Flagging(read):
            output = root(*args, **kwargs)
        if renumber:  # every use the index was put to is in the outputs: they must be eager's, exactly
            got = flat_outputs("", output, _cut_after(example.call, given))[1]
            want = flat_outputs("", call.output, _cut_after(example.call, call.caches_after, recorded=True))[1]
            if len(got) != len(want) or not all(_same(a, b) for a, b in zip(got, want, strict=True)):
                read.append("outputs")
    except Exception:
        return True
    return bool(read)


def _same(a: Any, b: Any) -> bool:
    """Equal tensors; for tensors without values (a model on ``meta``, Note [exports without values] in
    :mod:`._values`) the same shape and dtype, the flagged reads of the index being then the only evidence."""
    if is_valueless(a) or is_valueless(b):
        return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
    return bool(torch.equal(a, b))


def _watched(module: torch.nn.Module, names: set[str], read: list[str], index: dict[str, tuple[int, int]]) -> Any:
    """A shallow copy of ``module`` whose attributes ``names`` are properties that record each read; those of
    ``index`` (the position of a cache layer the piece carries, where the donor's value is the donor's position
    of that layer) read as a :class:`_LayerIndex` instead."""
    values = {name: vars(module)[name] for name in names}

    def watch(name: str) -> property:
        value = values[name]
        if name in index:
            layer = _LayerIndex(*index[name], read)
            return property(lambda self: layer)

        def get(self: Any) -> Any:
            read.append(name)
            return value

        return property(get)

    cls = type(module)
    sub = type(cls.__name__, (cls,), {name: watch(name) for name in names})
    sub.__qualname__, sub.__module__ = cls.__qualname__, cls.__module__  # code that reads its class's name reads the same
    copy = shallow_copy(module, sub)
    for name in names:
        del copy.__dict__[name]
    return copy


# --------------------------------------------------------------------------------------------------
# Note [renumbered layers]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# With a cache, decoder layers differ by ``layer_idx`` and read it: ``cache.update(k, v, self.layer_idx)``. Each
# carries only its own layer (Note [cut calls] in custom_op/_slices.py), so layer j's call takes the same tensors
# as the donor's layer i; its program is the donor's if the index is used for nothing but finding the carried
# layer. That is checked on the tracing path's run of the piece (point 3), in which the index reads as a
# :class:`_LayerIndex`, an int whose value is far outside any list and which
#
# * finds the carried layer when it indexes the cache's list of layers (the run's list is a :class:`_Renumbered`,
#   spare layers elsewhere: Note [cache slices] in serialize/_cache_slice.py);
# * answers a comparison or a truth test with the answer both the piece's and the donor's positions give, and
#   counts as read when they differ;
# * counts as read when put to any other use Python lets it see: arithmetic, hashing (a dict key), conversion to
#   int, float or text, an attribute, an argument of a torch function;
# * and, used where Python does not ask it (indexing another list, a C function reading its value), fails the run
#   or changes what it computes: the run's outputs must equal the piece's recorded eager outputs exactly.
#
# A run that passes took the donor's path, the index deciding nothing but which carried layer is read, so the
# donor's trace is the piece's; point 5 then checks the program on the piece's weights and calls, as before.


class _LayerIndex(int):
    """A layer index read while a piece runs (Note [renumbered layers])."""

    own: int
    donor: int
    read: list[str]

    def __new__(cls, own: int, donor: int, read: list[str]) -> _LayerIndex:
        obj = int.__new__(cls, -(2**62))  # no list is that long: any unobserved indexing fails
        obj.__dict__.update(own=own, donor=donor, read=read)
        return obj

    def __getattribute__(self, name: str) -> Any:
        if name in ("own", "donor", "read", "__dict__", "__class__"):
            return object.__getattribute__(self, name)
        object.__getattribute__(self, "read").append(f"layer index .{name}")
        return getattr(int(object.__getattribute__(self, "own")), name)


def _decided(name: str) -> Any:
    """A comparison or truth test answered alike for the piece and the donor, or counted as a read."""
    method = getattr(int, name)

    def decide(self: _LayerIndex, *other: Any) -> Any:
        d = object.__getattribute__(self, "__dict__")
        a = method(d["own"], *[x.__dict__["own"] if type(x) is _LayerIndex else x for x in other])
        b = method(d["donor"], *[x.__dict__["donor"] if type(x) is _LayerIndex else x for x in other])
        if a is not NotImplemented and (type(a) is not bool or a != b):
            d["read"].append(f"layer index {name}")
        return a

    return decide


def _used(name: str) -> Any:
    """Any other use of a layer index: counted as a read (the run goes on with the piece's own value)."""
    method = getattr(int, name)

    def use(self: _LayerIndex, *other: Any) -> Any:
        d = object.__getattribute__(self, "__dict__")
        d["read"].append(f"layer index {name}")
        return method(d["own"], *[x.__dict__["own"] if type(x) is _LayerIndex else x for x in other])

    return use


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__"):
    setattr(_LayerIndex, _name, _decided(_name))
for _name in ("__hash__", "__index__", "__int__", "__float__", "__repr__", "__str__", "__format__", "__neg__", "__pos__",
              "__abs__", "__invert__", "__round__", "__trunc__", "__floor__", "__ceil__", "__add__", "__radd__", "__sub__",
              "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__", "__truediv__", "__rtruediv__", "__mod__",
              "__rmod__", "__divmod__", "__rdivmod__", "__pow__", "__rpow__", "__and__", "__rand__", "__or__", "__ror__",
              "__xor__", "__rxor__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__"):  # fmt: skip
    setattr(_LayerIndex, _name, _used(_name))


class _Renumbered(list):  # type: ignore[type-arg]  # holds the layers, whatever their classes
    """A cache's list of layers in the run of Note [renumbered layers]: a :class:`_LayerIndex` finds its layer."""

    def __getitem__(self, index: Any) -> Any:
        if type(index) is _LayerIndex:
            index = index.__dict__["own"]
        return list.__getitem__(self, index)


def _renumbered(cache: Any, positions: tuple[int, ...], owner: str) -> None:
    """Give ``cache`` (a whole copy) the list of layers the piece's call sees: its carried layers at their
    positions, spare layers elsewhere, in a :class:`_Renumbered` list."""
    layers = cache.__dict__["layers"]
    grown = spares(len(layers), positions, owner or "a piece")
    for i in positions:
        grown[i] = layers[i]
    cache.__dict__["layers"] = _Renumbered(grown)


def _cut_after(call: Any, given: Sequence[Any], recorded: bool = False) -> list[Any]:
    """The cache arguments after a call, cut to the layers ``call`` carries (``given``: the arguments of the run,
    or with ``recorded`` the recorded caches after the call)."""
    caches = list(given) if recorded else [given[i] for i in call.caches]
    cut = {arg: positions for arg, _, positions in call.slices}
    return [_cut_list(c, cut[i]) if i in cut else c for i, c in zip(call.caches, caches, strict=True)]


def _cut_list(cache: Any, positions: tuple[int, ...]) -> Any:
    layers = cache.__dict__["layers"]
    new = object.__new__(type(cache))
    new.__dict__.update(cache.__dict__)
    new.__dict__["layers"] = [list.__getitem__(layers, i) for i in positions]
    return new


class _Flagging(torch.overrides.TorchFunctionMode):
    """Counts a layer index passed to a torch function as a read (Note [renumbered layers])."""

    def __init__(self, read: list[str]) -> None:
        super().__init__()
        self.read = read

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if _holds_index((args, kwargs)):
            self.read.append(f"layer index in {getattr(func, '__name__', func)}")
        return func(*args, **kwargs)


def _holds_index(value: Any, depth: int = 0) -> bool:
    if type(value) is _LayerIndex:
        return True
    if depth < 4 and isinstance(value, (list, tuple)):
        return any(_holds_index(v, depth + 1) for v in value)
    if depth < 4 and isinstance(value, dict):
        return any(_holds_index(v, depth + 1) for v in value.values())
    return False
