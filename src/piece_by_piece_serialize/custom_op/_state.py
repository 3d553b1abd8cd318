"""What the eager kernel keeps per call key, and its work after the module returned (both eager routes share it).

Imports: :mod:`._calls`, :mod:`._sites` and :mod:`._error`; torch when a state is made.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ._calls import Call, flat_outputs
from ._error import CustomOpError
from ._sites import Matcher, compile_values, match_values

# The dtype and the version counter of a tensor, read in C over a list (a generator or a list comprehension would
# run Python once per tensor).
_DTYPE = operator.attrgetter("dtype")
VERSION = operator.attrgetter("_version")  # also read by ._eager
# Calls recorded per key for shape learning: enough to tell a dimension from a constant, bounded.
MAX_RECORDED_CALLS = 8


class KernelState:
    """What the eager kernel reuses for one call key: which input tensors the in-place check reads (the caches'
    are written back, not checked), the matchers of the learned output structure (Note [call sites]) and the
    input shapes recorded (Note [direct eager calls])."""

    __slots__ = ("call", "checked", "inputs", "outputs", "size")

    def __init__(self, call: Call, n_tensors: int) -> None:
        import torch

        self.call = call
        self.size = torch.Tensor.size
        self.checked = [i for i in range(n_tensors) if i not in call.cache_tensors]
        self.outputs: list[Matcher] | None = None
        self.inputs: set[tuple[Any, ...]] = set()

    def learn(self, name: str, output: Any, caches: Sequence[Any]) -> None:
        """Compile the matchers of the output structure the call learned, from an output of that structure."""
        whats = [f"{name}: the output"] + [f"{name}: cache argument {i} after the call" for i in range(len(caches))]
        self.outputs = compile_values((output, *caches), self.call.out_kinds or (), whats)

    def versions(self, tensors: Sequence[Any]) -> list[int]:
        """The version counters of the input tensors the in-place check reads, in order (all in C)."""
        return list(map(VERSION, map(tensors.__getitem__, self.checked)))

    def check_versions(self, name: str, tensors: Sequence[Any], versions: list[int]) -> None:
        """Refuse a call whose module changed a checked input tensor in place (``versions``: before the call)."""
        if self.versions(tensors) != versions:
            raise in_place_error(name, [i for i, v in zip(self.checked, versions) if tensors[i]._version != v])  # noqa: B905 - a version per checked tensor

    def settle(self, name: str, tensors: Sequence[Any], versions: list[int], output: Any, caches: Sequence[Any]) -> list[Any]:
        """After a call of this structure that returned ``output`` and left ``caches`` (as the operator carries
        them): the outputs checked against the structure, in-place changes refused, the shapes recorded; the flat
        outputs. ``versions`` are those of the checked input tensors before the call."""
        call = self.call
        out = None if self.outputs is None else match_values(self.outputs, (output, *caches))
        if out is None:  # the first call of this structure, or an output of another structure (an error below)
            kinds, out, constants, n_flat = flat_outputs(name, output, caches)
        else:  # the learned output structure, by construction (Note [call sites])
            kinds, constants, n_flat = call.out_kinds, call.out_constants, call.out_n_flat  # type: ignore[assignment]
        self.check_versions(name, tensors, versions)
        dtypes = tuple(map(_DTYPE, out))
        if call.out_kinds is None:
            call.learn_outputs(kinds, constants, n_flat, output, caches)
        if not call.shapes:  # the first eager call (a fake= kernel may have seen the structure before)
            call.out_dtypes, call.out_devices = dtypes, tuple(t.device for t in out)
        if (kinds, constants, dtypes) != (call.out_kinds, call.out_constants, call.out_dtypes):
            raise CustomOpError(
                f"{name}: the module returned {kinds} (constants {constants}, dtypes {dtypes}) where an "
                f"earlier call of the same structure returned {call.out_kinds} (constants {call.out_constants}, "
                f"dtypes {call.out_dtypes}); an operator has one output structure per call structure"
            )
        if self.outputs is None:
            self.learn(name, output, caches)
        if len(call.shapes) < MAX_RECORDED_CALLS:  # past the bound nothing is recorded: the shapes are not read
            # torch.Size is a tuple (equal to, and hashing as, the plain tuple of its sizes), kept as torch gives it
            size = self.size
            shapes = (tuple(map(size, tensors)), tuple(map(size, out)))
            self.inputs.add(shapes[0])
            if shapes not in call.shapes:
                call.shapes.append(shapes)
                call.rules = None
        return out


def in_place_error(name: str, changed: list[int]) -> CustomOpError:
    """The refusal of a call whose module changed input tensors ``changed`` (not caches) in place."""
    return CustomOpError(
        f"{name}: the module changed input tensor(s) {changed} of the call in place; behind a custom operator the "
        "change would not reach the caller (only caches are written back): return the new value instead"
    )
