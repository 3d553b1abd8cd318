"""Eager calls of an operator: when torch's dispatcher would only call the real kernel, the wrapper calls it.

Note [plain eager calls]
~~~~~~~~~~~~~~~~~~~~~~~~
A wrapped module's eager call goes through torch's dispatcher: the Python operator object, the boxing of the
tensor list, the autograd fallback, the backend kernel, the unboxing back into Python. For a decoder layer of a
small model that is 15 to 30 µs a call, up to a tenth of the layer itself, and it buys nothing when nothing is there
to see the call. So the wrapper calls the real kernel itself, with the very list the dispatcher would have
unboxed, but only when the dispatcher's route is known to end there and change nothing on the way:

* gradients are off (``torch.no_grad``, ``torch.inference_mode``): with them on, torch's autograd fallback for an
  operator without an autograd kernel stands between the call and the kernel, and what the outputs' gradients
  are is its to decide (it warns at backward today and is deprecated), so the call goes through it;
* no autocast, no dispatch mode (``FakeTensorMode``, ``FlopCounterMode``, functionalization), no torch-function
  mode, no functorch transform (``vmap``, ``grad``), no TorchScript trace, no profiler (which records the
  operator), not under ``torch.compile`` (which must see the operator), and no other key in the thread's
  included dispatch keys than the two every eager call has (``BackendSelect``, ``ADInplaceOrView``; inference
  mode drops the second). A functorch transform includes its ``FuncTorchDynamicLayer`` keys and a TorchScript
  trace its ``Tracer`` key for as long as it runs, so that one check of the key set (a bit mask, no Python set)
  stands for their own checks, which cost as much each; the tests run a call under each;
* every tensor is a plain ``torch.Tensor`` (a weight may be a ``Parameter``), none on ``meta`` (whose calls go to
  the fake kernel: Note [eager calls without values]), and there is at least one (an empty list would dispatch
  on the thread's keys alone).

Anything else takes the dispatcher. The kernel is the one the dispatcher calls (``_Op._real``'s body), so what the
module sees, the checks on its outputs and the write-back are the same either way; the tests compare both routes
on the same calls.

Note [eager results]
~~~~~~~~~~~~~~~~~~~~
In eager mode the kernel has the module's output and the updated caches as objects before it flattens
them; rebuilding them from the returned tensors would give equal objects at the cost of a rebuild per
call. So the kernel leaves them on a stack and the wrapper takes them, but only if the tensors the
operator returned are the very objects the kernel returned (identity, checked element by element);
under fake tensors, or if anything came between, the wrapper rebuilds from the tensors as before.
The stack is popped right after each operator call, so a nested call of the same operator (a module
calling itself) pairs with its own entry. Only a call through the wrapper pushes (it counts its calls under
way): a program calls the operator itself, and nothing would pop what its calls pushed (a decode loop of an
export's ``module()`` kept every step's outputs and caches, and the checks of an export all of theirs).
A plain eager call (Note [plain eager calls]) gets the objects from the kernel directly and uses no stack.

Note [direct eager calls]
~~~~~~~~~~~~~~~~~~~~~~~~~
A plain eager call (Note [plain eager calls]) still flattens its arguments, rebuilds them for the module and writes
the caches back, and nothing sees any of it: the operator's boundary is traced, converted or checked only when
something other than a plain eager call runs it. So once a call structure is known, the wrapper calls the module
itself on the caller's own objects (its cache is updated by the module, as without the wrapper), when:

* the call matches a known site (Note [call sites]) whose structure an eager kernel call has already learned (its
  output structure, and the cache layers it touches, Note [cut calls]): the first call of each structure always
  takes the operator's route, which is where what the operator cannot carry is refused;
* the call is plain, and no observer is set (the export's checks watch the kernel's calls).

What the kernel does for the operator still happens where it matters. The in-place check on the non-cache inputs
runs on every call. The call's shapes are recorded (for the fake kernel, Note [learned shapes]) when they can teach
something: fewer than the bound recorded and input shapes not seen before (the output shapes are taken to follow
from the input shapes, as the fake kernel takes them); a recorded call is checked as the kernel checks it (output
structure and dtypes, a cut cache taken as the operator carries it). A call with seen input shapes whose output
differs in structure from the learned one is not refused here: it is refused where the operator runs it (a
program, a check of the export), with the same error.

Measured on a 32-layer tiny Llama's decode step (hidden 32, one thread): 1.34x the unreplaced model through the
kernel, 1.12-1.15x this way (bench/custom_op_overhead.py). The tests of the operator's route run with gradients on.
What is left, per layer call, measured in place (each part replaced in turn, 50 rounds in shuffled order,
per-thread CPU time): the wrapper's own calls 2 µs, the site match 13.5, :func:`plain` 10.5 (8 of them reading the
thread's included dispatch keys), the rest 9. Each is five to seven times what the same code costs in a loop of its
own: between two calls the layer's work evicts it from the processor's caches, so a read saved counts more than
its cost in a micro-benchmark says.

Imports: :mod:`._calls` and :mod:`._state`; torch, when the first operator is made.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ._calls import carried_caches
from ._state import MAX_RECORDED_CALLS, VERSION, KernelState

_OTHER_KEYS = 0  # the bits of every dispatch key but the two each eager call includes (BackendSelect, ADInplaceOrView)
_TORCH: Any = None
_TENSOR: Any = None
_KINDS: tuple[type, ...] = ()  # torch.Tensor, torch.nn.Parameter
_IS_META: Any = operator.attrgetter("is_meta")


def bind() -> None:
    """Read torch's names once (torch is imported by the time an operator exists)."""
    global _OTHER_KEYS, _TORCH, _TENSOR, _KINDS
    import torch

    key = torch._C.DispatchKey
    _OTHER_KEYS = ~(torch._C.DispatchKeySet(key.BackendSelect) | torch._C.DispatchKeySet(key.ADInplaceOrView)).raw_repr()
    _TORCH, _TENSOR, _KINDS = torch, torch.Tensor, (torch.Tensor, torch.nn.Parameter)


def plain(tensors: Sequence[Any], weights: Sequence[Any] | None) -> bool:
    """Whether a call of these tensors would go from the dispatcher straight to the real kernel (Note [plain
    eager calls])."""
    torch = _TORCH
    c = torch._C
    if (
        torch.compiler.is_compiling()  # first: under dynamo it is a constant and the rest is never traced
        or c.is_grad_enabled()
        or c._is_any_autocast_enabled()
        or c._len_torch_dispatch_stack()
        or c._is_torch_function_mode_enabled()
        or c._autograd._profiler_enabled()
        # a functorch transform and a TorchScript trace include their keys (Note [plain eager calls])
        or c._dispatch_tls_local_include_set().raw_repr() & _OTHER_KEYS
        or not tensors
    ):
        return False
    # each a torch.Tensor, none on meta: read in C, no Python run per tensor
    if tuple(map(type, tensors)).count(_TENSOR) != len(tensors) or any(map(_IS_META, tensors)):
        return False
    if weights is not None:
        for t in weights:
            if type(t) not in _KINDS or t.is_meta:
                return False
    return True


def direct(op: Any, state: KernelState, args: tuple[Any, ...], kwargs: dict[str, Any], tensors: Sequence[Any]) -> Any:
    """A steady eager call (Note [direct eager calls]): the module on the caller's own arguments, then the kernel's
    checks, and its records when the call has something to record."""
    # read here, not through the state's methods: on a small layer each Python call costs as much as what it reads
    checked = list(map(tensors.__getitem__, state.checked))
    versions = list(map(VERSION, checked))  # state.versions(tensors)
    # whether the call has something to record: the bound is not reached and its input shapes are new (the output
    # shapes are taken to follow from them, as the fake kernel takes them)
    records = len(state.call.shapes) < MAX_RECORDED_CALLS and tuple(map(state.size, tensors)) not in state.inputs
    output = op.run(*args, **kwargs)
    if records:  # a cut cache as the operator carries it (Note [cache slices])
        state.settle(op.qualname, tensors, versions, output, carried_caches(state.call, (*args, *kwargs.values())))
    elif list(map(VERSION, checked)) != versions:
        state.check_versions(op.qualname, tensors, versions)
    return output
