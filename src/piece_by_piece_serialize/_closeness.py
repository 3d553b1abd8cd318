"""The element rule of every comparison with eager: the export's verdict and ``to_onnx``'s check of onnxruntime.

A tensor ``b`` is close to eager's ``a`` when ``|b - a| <= atol + rtol * |a|`` everywhere, equal values (the same
infinity included) and NaN against NaN counting as equal, NaN against a number as an infinite difference;
integer and boolean tensors must be equal (Note [the verdict] in :mod:`.export._verdict` says which tolerances).
One function, so that an output passes or fails alike wherever it is judged.

Imports: nothing of the library; torch on use.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CHUNK", "difference"]

# Elements compared at a time: the comparison works in float64 with a few temporaries, which for a whole output
# (the logits at the end of a sequence range, 8 M elements) took 500 MB beside the model (issue 28).
CHUNK = 1 << 18


def difference(a: Any, b: Any, atol: float, rtol: float) -> tuple[float, float, bool]:
    """The largest absolute and relative difference of ``b`` against ``a``, and whether all elements are close;
    computed :data:`CHUNK` elements at a time."""
    if not a.numel():
        return 0.0, 0.0, True
    if not (a.is_floating_point() or a.is_complex()):
        differ = bool((a != b).any())
        return float(differ), float(differ), not differ
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    worst, worst_rel, passed = 0.0, 0.0, True
    for start in range(0, flat_a.numel(), CHUNK):
        d, r, p = _chunk(flat_a[start : start + CHUNK], flat_b[start : start + CHUNK], atol, rtol)
        worst, worst_rel, passed = max(worst, d), max(worst_rel, r), passed and p
    return worst, worst_rel, passed


def _chunk(a: Any, b: Any, atol: float, rtol: float) -> tuple[float, float, bool]:
    import torch

    x, y = a.double() if a.is_floating_point() else a.cdouble(), b.double() if b.is_floating_point() else b.cdouble()
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))
    diff = torch.where(same, torch.zeros((), dtype=torch.float64), (x - y).abs().double())
    diff = torch.where(torch.isnan(diff), torch.full((), math.inf, dtype=torch.float64), diff)  # NaN against a number
    scale = x.abs().double()
    rel = torch.where(diff == 0, torch.zeros((), dtype=torch.float64), diff / scale)  # x/0 is inf: any change of a 0
    passed = bool((diff <= atol + rtol * scale).all())
    return float(diff.max()), float(rel.max()), passed
