"""A module called through flat tensors: what is exported, for the whole model and for each piece.

torch.export takes tensors and pytrees; a transformers cache is neither. :class:`FlatCall` holds one call
structure (Note [call keys] in :mod:`..custom_op`): its ``forward`` takes the call's tensors, rebuilds the
arguments (caches included), calls the module, and returns the output's tensors followed by each cache
argument's tensors after the call, the same flat lists an operator of :mod:`..custom_op` takes and returns.
So an exported program of a :class:`FlatCall` has the operator's signature, and the caller's objects are
rebuilt and written back by :func:`..custom_op._calls.finish_call`.

Invariants: the structure of the output is learned from the first (eager) call and every later call, traced
or not, must return the same. The module is a registered submodule, so its parameters and buffers are the
program's; or, for a piece's own program, they are its first inputs (Note [weights as inputs] in
:mod:`..custom_op`), so that identical pieces share one program and the weights are stored once.

Imports: :mod:`..custom_op` (the call structure); torch on use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..custom_op._calls import Call, caches_after, flat_outputs, rebuild_arguments
from ._errors import PieceByPieceExportError


class FlatCall(torch.nn.Module):
    """``module`` called with the arguments that ``call`` rebuilds from flat tensors; returns flat tensors."""

    def __init__(self, module: torch.nn.Module, call: Call, name: str, weights: tuple[str, ...] | None = None) -> None:
        super().__init__()
        if weights is None:
            self.module = module
        else:  # Note [weights as inputs]: the weights come in as the first tensors; the program holds none
            self.__dict__["module"] = module
        # plain attributes, not submodules or buffers: the structure is data, the hook is the export's
        self.__dict__["call"] = call
        self.__dict__["name"] = name
        self.__dict__["weights"] = weights
        self.__dict__["on_enter"] = None

    call: Call
    name: str
    weights: tuple[str, ...] | None
    on_enter: Callable[[tuple[Any, ...]], None] | None

    def forward(self, *tensors: Any) -> tuple[Any, ...]:
        if self.on_enter is not None:
            self.on_enter(tensors)
        call = self.call
        if self.weights is None:
            args, kwargs = rebuild_arguments(call, tensors)
            output = self.module(*args, **kwargs)
        else:
            n = len(self.weights)
            args, kwargs = rebuild_arguments(call, tensors[n:])
            params = dict(zip(self.weights, tensors[:n], strict=True))
            output = torch.func.functional_call(self.module, params, tuple(args), kwargs)
        given = [*args, *kwargs.values()]
        caches = caches_after(call, given)  # a cut cache cut again (Note [cache slices] in ..serialize._cache_slice)
        kinds, out, constants, n_flat = flat_outputs(self.name, output, caches)
        if call.out_kinds is None:
            call.learn_outputs(kinds, constants, n_flat, output, caches)
            call.out_dtypes, call.out_devices = tuple(t.dtype for t in out), tuple(t.device for t in out)
        elif (kinds, constants) != (call.out_kinds, call.out_constants):
            raise PieceByPieceExportError(
                f"{self.name} returned {kinds} (constants {constants}) where the eager call returned {call.out_kinds} "
                f"(constants {call.out_constants}): the traced call takes another path than the eager one"
            )
        return tuple(out)
