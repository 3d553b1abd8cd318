"""The verdict of an export: each output tensor of the program (and of each piece) against eager, within a tolerance.

Note [the verdict]
~~~~~~~~~~~~~~~~~~
A difference is only a finding when it is compared with something. Each flat output tensor is compared with
eager's element by element as ``torch.isclose`` does: it passes when ``|got - want| <= atol + rtol * |want|``
everywhere, where equal values (the same infinity included) and NaN against NaN count as equal. Tolerances
default per dtype of eager's tensor (:data:`DEFAULT_TOLERANCES`, the orders of magnitude of a reordered
reduction in that dtype); integer and boolean tensors must be equal. The user's ``atol``/``rtol`` replace the
defaults for floating-point tensors. Each output keeps, over every example and call compared, its largest
absolute and relative difference; a piece, or the model, passes when all its outputs pass.

The element rule itself is :func:`.._closeness.difference`, which ``to_onnx`` judges onnxruntime with too.

Imports: :mod:`.._closeness`, :mod:`._errors`, :mod:`._values`; torch on use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._closeness import difference
from ._errors import PieceByPieceExportError
from ._values import is_valueless

#: torch's words for a program's guard refusing its inputs, which a refusal in the verdict then quotes (Note
#: [guards on a hint] in ._ranges reads them there)
GUARD_FAILED = "Guard failed"

# dtype name -> (atol, rtol) for floating-point outputs (Note [the verdict]); any other dtype must be equal.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "complex128": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "complex64": (1e-4, 1e-4),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1.6e-2),
}


@dataclass(frozen=True)
class OutputCheck:
    """One output tensor compared with eager: its ``name``, the largest absolute and relative differences over
    every call compared, the tolerances used, and whether every element was within them."""

    name: str
    max_abs_diff: float
    max_rel_diff: float
    atol: float
    rtol: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "max_abs_diff": _finite(self.max_abs_diff), "max_rel_diff": _finite(self.max_rel_diff),
            "atol": self.atol, "rtol": self.rtol, "passed": self.passed,
        }  # fmt: skip

    def line(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return (f"{self.name}: max |diff| {_num(self.max_abs_diff)}, max rel {_num(self.max_rel_diff)} "
                f"(atol {self.atol:g}, rtol {self.rtol:g}): {verdict}")  # fmt: skip


def _finite(x: float) -> float | str:
    return "inf" if math.isinf(x) else ("nan" if math.isnan(x) else x)


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else ("0" if x == 0 else f"{x:.2g}")


def tolerance(dtype: Any, atol: float | None, rtol: float | None) -> tuple[float, float]:
    """The tolerances for an output of ``dtype`` (Note [the verdict])."""
    default = DEFAULT_TOLERANCES.get(str(dtype).rpartition(".")[2])  # torch.float32 -> float32
    if default is None:
        return 0.0, 0.0
    return (default[0] if atol is None else atol), (default[1] if rtol is None else rtol)


def check_tolerances(atol: Any, rtol: Any) -> None:
    for name, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
            raise PieceByPieceExportError(f"export_piece_by_piece: {name} must be a number >= 0 or None, not {value!r}")


class Verdict:
    """The comparisons of one export, by subject (``""`` for the model, a piece's path for a piece)."""

    def __init__(self, atol: float | None, rtol: float | None) -> None:
        self.atol, self.rtol = atol, rtol
        self.outputs: dict[str, dict[str, OutputCheck]] = {}
        self.refused: list[str] = []  # points of the declared ranges eager accepts and the program refuses

    def refuse(self, point: str, what: str) -> None:
        """The program refused a call eager accepts, or gave outputs of other shapes (Note [every declared range]
        in :mod:`._examples`): ``what`` says which, as a clause."""
        self.refused.append(f"at {point} {what}")

    def compare(self, subject: str, expected: Sequence[Any], got: Sequence[Any], what: str, names: Sequence[str] | None = None) -> float | None:
        """Compare ``got`` with eager's ``expected`` (flat tensors of the same structure), keep each output's
        result under ``subject``, and return the largest absolute difference. A different count, shape or dtype
        is no difference but a wrong program: :class:`PieceByPieceExportError`. A tensor without values (Note
        [exports without values] in :mod:`._values`) has its shape and dtype compared only, and then the
        difference is None: not compared, never a silent 0."""
        if len(expected) != len(got):
            raise PieceByPieceExportError(f"{what}: {len(got)} output tensors where eager gives {len(expected)}")
        kept = self.outputs.setdefault(subject, {})
        worst: float | None = 0.0
        for i, (a, b) in enumerate(zip(expected, got, strict=True)):
            if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                raise PieceByPieceExportError(
                    f"{what}: output tensor {i} is {b.dtype} {tuple(b.shape)} where eager gives {a.dtype} {tuple(a.shape)}"
                )
            if is_valueless(a) or is_valueless(b):
                worst = None
                continue
            name = names[i] if names is not None and i < len(names) else f"output tensor {i}"
            atol, rtol = tolerance(a.dtype, self.atol, self.rtol)
            abs_diff, rel_diff, passed = difference(a, b, atol, rtol)
            old = kept.get(name)
            if old is not None:
                abs_diff, rel_diff, passed = max(abs_diff, old.max_abs_diff), max(rel_diff, old.max_rel_diff), passed and old.passed
            kept[name] = OutputCheck(name, abs_diff, rel_diff, atol, rtol, passed)
            worst = None if worst is None else max(worst, abs_diff)
        return worst

    def merge(self, other: Verdict) -> None:
        """Add the comparisons of ``other`` (a trial kept) to these."""
        for subject, checks in other.outputs.items():
            kept = self.outputs.setdefault(subject, {})
            for name, c in checks.items():
                old = kept.get(name)
                kept[name] = c if old is None else OutputCheck(
                    name, max(c.max_abs_diff, old.max_abs_diff), max(c.max_rel_diff, old.max_rel_diff), c.atol, c.rtol, c.passed and old.passed
                )  # fmt: skip

    def of(self, subject: str) -> tuple[OutputCheck, ...]:
        return tuple(self.outputs.get(subject, {}).values())

    def passed(self, subject: str) -> bool | None:
        checks = self.outputs.get(subject)
        if subject == "" and self.refused:
            return False
        return None if not checks else all(c.passed for c in checks.values())
