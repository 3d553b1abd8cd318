"""The operators of a loaded artifact: each backed by its piece's program, or by the user's implementation.

Each operator has the schema the export gave it, ``(Tensor[] tensors, Tensor[] weights, str call) ->
Tensor[]`` (Note [weights as inputs] in :mod:`..custom_op`). Its kernel runs the piece's own exported program
on the weights and tensors, and its fake implementation runs the same program under fake tensors, so output
shapes are exact. A piece without program runs the implementation the user gave (Note [implementations]) on
the call rebuilt from its structure, and its fake implementation evaluates the shape rules the export learned
(Note [learned shapes]), with the dtypes and devices recorded. A piece with programs by size (Note [programs by
size] in :mod:`..export._by_size`) runs the first whose domain holds for its inputs' sizes (Note [domains] in
:mod:`..domains`: read from the program as checked, never run), or, at sizes no domain holds for, the
implementation if one was given, and refuses them by name otherwise; its fake implementation evaluates the
shape rules, since fake sizes choose no domain.

Imports: :mod:`..custom_op` (the call structure, the shape rules), :mod:`..domains`, :mod:`._manifest`; torch.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch

from ..custom_op._calls import Call, caches_after, flat_outputs, rebuild_arguments
from ..custom_op._shapes import evaluate
from ..domains import Domain, domain_of
from ._manifest import CallRecord, OperatorRecord
from ._runnable import checked_runner, sizes_text

SCHEMA = "(Tensor[] tensors, Tensor[] weights, str call) -> Tensor[]"
_SHAPE = operator.attrgetter("shape")  # a torch.Size is a tuple: the domain reads it as one


def call_of(record: CallRecord, owner: str = "") -> Call:
    """The :class:`Call` a manifest record stands for, as the wrappers and the runnable module use it; ``owner``
    names the operator in the errors of a cut cache's spare layers."""
    return Call(
        record.kinds, record.n_positional, record.keywords, dict(record.constants), record.n_flat, record.caches,
        frozenset(), record.out_kinds, dict(record.out_constants), record.out_n_flat, record.out_aliases,
        slices=record.slices, owner=owner,
    )  # fmt: skip


def dtype_named(name: str) -> torch.dtype | None:
    """The dtype spelled ``name`` (``"float32"``), looked up among torch's dtypes, or None."""
    value = getattr(torch, name, None) if name.isidentifier() else None
    return value if isinstance(value, torch.dtype) else None


def _by_size(program: Any, shared: dict[Any, Any]) -> tuple[Domain, Any]:
    """A program by size and its module, checked by its domain alone (Note [one check of the sizes])."""
    domain, runner = _runner(program, True, shared)
    return domain if domain is not None else domain_of(program), runner  # domain_of raises the DomainError


def _runner(program: Any, guards: bool, shared: dict[Any, Any]) -> tuple[Domain | None, Any]:
    """:func:`checked_runner`, made once per program and use in a load: identical pieces share one program
    (Note [renumbered layers] in ..export._reuse), and so its domain and what runs it."""
    key = (id(program), guards)
    if key not in shared:
        shared[key] = (program, checked_runner(program, guards))  # the program held: its id stays its own
    return shared[key][1]  # type: ignore[no-any-return]


class LoadedOperator:
    """One operator of a loaded artifact (see the module docstring)."""

    def __init__(self, namespace: str, record: OperatorRecord, program: Any, implementation: Any, by_size: Sequence[Any] = (),
                 shared: dict[Any, Any] | None = None) -> None:  # fmt: skip
        """``shared``: the runners already made in this load, by program (:func:`_runner`)."""
        self.qualname = f"{namespace}::{record.name}"
        self.record = record
        self.calls = {c.key: (c, call_of(c, self.qualname)) for c in record.calls}
        shared = {} if shared is None else shared
        # Note [one check of the sizes]: the own program's shapes and ranges, where they read, are its only check
        self.domain: Domain | None = None
        self.runner: Any = None
        if program is not None:
            self.domain, self.runner = _runner(program, False, shared)
        self.by_size = [_by_size(p, shared) for p in by_size]
        self.implementation = implementation
        self.lib = torch.library.Library(namespace, "FRAGMENT")  # type: ignore[no-untyped-call]
        self.lib.define(f"{record.name}{SCHEMA}")  # type: ignore[no-untyped-call]
        self.lib.impl(record.name, self._real, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        torch.library.register_fake(self.qualname, self._fake, lib=self.lib)

    def close(self) -> None:
        self.lib._destroy()  # type: ignore[no-untyped-call]  # unannotated in torch

    def _lookup(self, key: str) -> tuple[CallRecord, Call]:
        found = self.calls.get(key)
        if found is None:
            raise ValueError(f"{self.qualname}: called with a call structure the artifact does not have: {key}")
        return found

    def _real(self, tensors: list[Any], weights: list[Any], key: str) -> list[Any]:
        record, call = self._lookup(key)
        if self.runner is not None and key == self.record.program_key:
            if self.domain is not None and not self.domain.holds(shapes := list(map(_SHAPE, (*weights, *tensors)))):
                # the whole domain holds a condition per weight's size: the first false one says why
                raise ValueError(
                    f"{self.qualname}: the program of {self.record.piece} was not exported for these input sizes "
                    f"({sizes_text(tensors)}): its ranges refuse them, {self.domain.why_not(shapes)} (inputs numbered "
                    f"from 0: {f'its {len(weights)} weights, then these' if weights else 'these'}); export from examples of "
                    "these sizes (Note [one check of the sizes])"
                )
            return list(self.runner(*weights, *tensors))
        if self.by_size and key == self.record.program_key:
            shapes = list(map(_SHAPE, (*weights, *tensors)))
            runner = next((r for domain, r in self.by_size if domain.holds(shapes)), None)
            if runner is not None:
                return list(runner(*weights, *tensors))
            if self.implementation is None:
                whys = "; ".join(f"{k}: {domain.why_not(shapes)}" for k, (domain, _) in enumerate(self.by_size, 1))
                raise ValueError(
                    f"{self.qualname}: {self.record.piece} has no program for these input sizes ({sizes_text(tensors)}): none of its "
                    f"{len(self.by_size)} programs by size was exported for them ({whys}; inputs numbered from 0: "
                    f"{f'its {len(weights)} weights, then these' if weights else 'these'}); pass its class or an instance in "
                    "implementations= to run its module there"
                )
        if self.implementation is None:
            raise ValueError(f"{self.qualname}: the program of {self.record.piece} computes another call structure than {key}")
        args, kwargs = rebuild_arguments(call, tensors)
        params = dict(zip(self.record.weights, weights, strict=True))
        output = torch.func.functional_call(self.implementation, params, tuple(args), kwargs)
        given = [*args, *kwargs.values()]
        kinds, out, constants, _ = flat_outputs(self.qualname, output, caches_after(call, given))
        if kinds != record.out_kinds or constants != dict(record.out_constants):
            raise ValueError(
                f"{self.qualname}: the implementation of {self.record.piece} returned {kinds} (constants {constants}) "
                f"where the exported piece returned {record.out_kinds} (constants {dict(record.out_constants)})"
            )
        return out

    def _fake(self, tensors: list[Any], weights: list[Any], key: str) -> list[Any]:
        record, _ = self._lookup(key)
        if self.runner is not None and key == self.record.program_key:
            return [t.clone() if any(t is x for x in (*tensors, *weights)) else t for t in self.runner(*weights, *tensors)]
        if record.rules is None:
            raise ValueError(f"{self.qualname}: the artifact has no shape rules for {key}; it cannot be traced")
        sizes = [t.shape for t in tensors]
        out = []
        for k, (rules, dtype, device) in enumerate(zip(record.rules, record.out_dtypes, record.out_devices, strict=True)):
            shape = evaluate(self.qualname, k, rules, sizes)
            out.append(torch.empty(shape, dtype=dtype_named(dtype), device=torch.device(device)))
        return out
