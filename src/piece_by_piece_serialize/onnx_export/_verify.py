"""onnxruntime against eager: a model on its example's flat tensors, a function's model on a piece's call.

Imports: onnxruntime and numpy, torch; nothing of the library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def _session(model: Any) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: a checked model's warnings are onnxruntime's own notes
    source = model if isinstance(model, str) else model.SerializeToString()
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _run(session: Any, inputs: Sequence[Any]) -> list[Any]:
    import torch

    feeds = {i.name: _real(t).detach().contiguous().cpu().numpy() for i, t in zip(session.get_inputs(), inputs, strict=True)}
    return [torch.from_numpy(x) for x in session.run(None, feeds)]


def _real(tensor: Any) -> Any:
    """A complex tensor as the ONNX model takes and gives it, its real view (Note [complex as real])."""
    import torch

    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def runner(model: Any) -> Callable[[Sequence[Any]], list[Any]]:
    """The ONNX model (a path, or a function's own model: the pruned piece exported alone) as a function of its
    flat input tensors, run by onnxruntime; one session for every call."""
    session = _session(model)
    return lambda inputs: _run(session, inputs)


def max_diff(expected: Sequence[Any], got: Sequence[Any]) -> float:
    """The largest absolute difference; infinite when the counts, shapes or dtypes differ."""
    if len(expected) != len(got):
        return math.inf
    worst = 0.0
    for a, b in zip(expected, got, strict=True):
        a = _real(a)
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            return math.inf
        if a.numel():
            diff = (a.double() - b.double()).abs().max().item() if a.is_floating_point() else float((a != b).any())
            worst = max(worst, math.inf if math.isnan(diff) else diff)
    return worst
