"""onnxruntime against eager: a model on its example's flat tensors, a function's model on a piece's call.

Imports: :mod:`.._closeness` (the element rule, the export's); onnxruntime and numpy, torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .._closeness import difference


class NoKernelError(Exception):
    """onnxruntime has no CPU kernel for an operator of a valid model in its dtype (``Where`` in bfloat16): the
    model cannot be run here, which says nothing of the model."""


def _session(model: Any, initializers: dict[str, Any] | None = None) -> Any:
    import numpy
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: a checked model's warnings are onnxruntime's own notes
    names, values = [], []
    for name, tensor in (initializers or {}).items():
        try:
            array = tensor.detach().numpy()  # the tensor's own memory: no copy
        except TypeError:  # a dtype numpy lacks (bfloat16): onnxruntime reads it from the file instead
            continue
        if array.dtype != numpy.object_ and array.flags.c_contiguous:
            names.append(name)
            values.append(onnxruntime.OrtValue.ortvalue_from_numpy(array))
    if names:  # Note [external weights]: the weights the program holds, used in place rather than read again
        # one by one: add_external_initializers copies most of them into onnxruntime's own buffers (289 of 482 MB
        # in a 4-layer model), add_initializer keeps the memory it is given
        for name, value in zip(names, values, strict=True):
            options.add_initializer(name, value)
        # nor copied into another layout for its matrix products: a check runs a few calls, not a server's load
        options.add_session_config_entry("session.disable_prepacking", "1")
    # Note [external weights]: folding a weight's Transpose would make a transposed copy of every matrix, and the
    # arena would keep each call's largest buffers after it; a check runs a few calls
    options.enable_cpu_mem_arena = False
    source = model if isinstance(model, str) else model.SerializeToString()
    try:
        session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"], disabled_optimizers=["ConstantFolding"])
    except onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented as exc:
        raise NoKernelError(str(exc).rpartition("NOT_IMPLEMENTED : ")[2]) from None  # an error message, not a language
    session._pbp_initializers = values  # onnxruntime reads them while the session lives
    return session


def _run(session: Any, inputs: Sequence[Any]) -> list[Any]:
    import torch

    feeds = {i.name: _real(t).detach().contiguous().cpu().numpy() for i, t in zip(session.get_inputs(), inputs, strict=True)}
    return [torch.from_numpy(x) for x in session.run(None, feeds)]


def _real(tensor: Any) -> Any:
    """A complex tensor as the ONNX model takes and gives it, its real view (Note [complex as real])."""
    import torch

    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def runner(model: Any, initializers: dict[str, Any] | None = None) -> Callable[[Sequence[Any]], list[Any]]:
    """The ONNX model (a path, or a function's own model: the pruned piece exported alone) as a function of its
    flat input tensors, run by onnxruntime; one session for every call. ``initializers`` (name -> tensor) are
    used in place of those of the model's external data, without a copy where numpy can view them."""
    session = _session(model, initializers)
    return lambda inputs: _run(session, inputs)


def compare(expected: Sequence[Any], got: Sequence[Any], tolerance: Callable[[Any], tuple[float, float]] | None) -> tuple[float, list[tuple[int, float]]]:
    """The largest absolute difference of ``got`` against ``expected``, and the outputs not within ``tolerance``
    (a dtype -> (atol, rtol); ``None``: none judged) by the export's element rule (:func:`.._closeness.difference`):
    (index, max |diff|) each. Another count, shape or dtype is an infinite difference, and outside."""
    if len(expected) != len(got):
        return math.inf, [(i, math.inf) for i in range(len(expected))]
    worst, found = 0.0, []
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        a = _real(a)
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            worst = math.inf
            found.append((i, math.inf))
            continue
        atol, rtol = tolerance(a.dtype) if tolerance is not None else (0.0, 0.0)
        diff, _, passed = difference(a, b, atol, rtol)
        worst = max(worst, diff)
        if tolerance is not None and not passed:
            found.append((i, diff))
    return worst, found
