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
   these, or an error in that run, and the piece is exported alone;
4. the same call structure (key), dynamic dimensions, and example shapes and dtypes as the donor's program was
   exported with;
5. and then (in :mod:`._job`) the donor's program, run on this piece's weights and every recorded call of the
   structure, must give this piece's recorded eager outputs no further off than it gave the donor's.

Why that is sound enough: torch.export traces by running the module's Python once on the example; with the same
code, the same call (1, 4) and state equal but for values that run never read (2, 3), the piece's run performs
the same operations on the same inputs and takes the same branches as the donor's, so it would record the same
graph and the same guards over the same dynamic dimensions; and (5) checks the result against the piece's own
eager outputs anyway. Whatever fails falls back to exporting the piece alone, as before.

Imports: :mod:`..custom_op` (shallow copies), :mod:`._examples` (the examples' description), :mod:`._record` (the
tracing path), and :mod:`..serialize` (copies of the recorded calls); torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..custom_op import shallow_copy
from ..serialize import make_copy
from ._examples import Example
from ._record import Recorded, tracing_path

_PLAIN = (int, float, bool, str, type(None))
# what every module has: compared through the module tree, the weights and the hooks instead
_MODULE_STATE = frozenset(vars(torch.nn.Module()))
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def reusable(donor: torch.nn.Module, module: torch.nn.Module, calls: Sequence[Recorded], donor_example: Example,
             example: Example, donor_specs: list[Any], specs: list[Any]) -> bool:  # fmt: skip
    """Whether ``module`` may take the program ``donor`` was exported to (points 1 to 4 of Note [shared programs])."""
    if example.key != donor_example.key or [str(s) for s in specs] != [str(s) for s in donor_specs]:
        return False
    if [(tuple(t.shape), t.dtype) for t in example.tensors] != [(tuple(t.shape), t.dtype) for t in donor_example.tensors]:
        return False
    differing = _differing(donor, module)
    if differing is None:
        return False
    return not differing or not _reads(module, differing, calls[0])


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


def _reads(module: torch.nn.Module, differing: dict[str, set[str]], call: Recorded) -> bool:
    """Whether running ``module`` on ``call`` (on the tracing path) reads any of the ``differing`` attributes."""
    read: list[str] = []
    copies: dict[str, Any] = {}

    def copied(path: str) -> Any:  # the module at ``path`` in a copy of the tree: watched where it holds a value
        if path not in copies:
            original = module.get_submodule(path) if path else module
            copies[path] = _watched(original, differing[path], read) if path in differing else shallow_copy(original)
            if path:
                parent, _, name = path.rpartition(".")
                copied(parent)._modules[name] = copies[path]
        return copies[path]

    for path in differing:
        copied(path)
    root = copied("")
    args, kwargs = make_copy((call.args, call.kwargs))
    try:
        with tracing_path():
            root(*args, **kwargs)
    except Exception:
        return True
    return bool(read)


def _watched(module: torch.nn.Module, names: set[str], read: list[str]) -> Any:
    """A shallow copy of ``module`` whose attributes ``names`` are properties that record each read."""
    values = {name: vars(module)[name] for name in names}

    def watch(name: str) -> property:
        def get(self: Any) -> Any:
            read.append(name)
            return values[name]

        return property(get)

    cls = type(module)
    sub = type(cls.__name__, (cls,), {name: watch(name) for name in names})
    sub.__qualname__, sub.__module__ = cls.__qualname__, cls.__module__  # code that reads its class's name reads the same
    copy = shallow_copy(module, sub)
    for name in names:
        del copy.__dict__[name]
    return copy
