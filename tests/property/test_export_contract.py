"""The export's contract, on random small models and random ``dynamic_shapes`` (issue 30): ``export_piece_by_piece``
returns a program equal to eager at random sizes inside the declared ranges, or raises a documented error naming
the cause (:class:`PieceByPieceExportError`, ``TypeError`` for an example that does not fit the forward); never
another exception, never a wrong program.

A model is a chain of blocks drawn from: a Linear (fixes the last dimension), a data-dependent branch (cut), a
branch on the batch size (a guard on a declared range), a loop over a few rows, a nested pair of blocks, and an
output as a dict. A spec gives the batch dimension a Dim with or without bounds, ``Dim.AUTO``, ``Dim.DYNAMIC``,
``Dim.STATIC`` or nothing, and sometimes (a wrong spec) the feature dimension a Dim too. The short run here keeps
``make test`` quick (``PBP_EXPORT_FUZZ_EXAMPLES``, 3 by default); ``python fuzz/fuzz_export.py --examples N``
runs a long one and prints its counts.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from piece_by_piece_serialize import PieceByPieceExportError, export_piece_by_piece  # noqa: E402

FEATURES = 4
COUNTS: Counter[str] = Counter()  # what the runs did: models, exports, refusals by their first words


class Gate(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x * 2 if x.sum() > 0 else x - 1  # data-dependent: cut


class SizeBranch(torch.nn.Module):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def forward(self, x: Any) -> Any:
        return x + 1 if x.shape[0] <= self.limit else x - 1  # a guard on the batch


class FirstRows(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        out = x.clone()
        for i in range(min(2, x.shape[0])):  # a loop over the batch, at most two rows
            out[i] = out[i] * 0.5
        return out


class Pair(torch.nn.Module):
    def __init__(self, a: torch.nn.Module, b: torch.nn.Module) -> None:
        super().__init__()
        self.a, self.b = a, b

    def forward(self, x: Any) -> Any:
        return self.b(self.a(x))


class Chain(torch.nn.Module):
    def __init__(self, blocks: list[torch.nn.Module], as_dict: bool) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)
        self.as_dict = as_dict

    def forward(self, x: Any) -> Any:
        for block in self.blocks:
            x = block(x)
        return {"out": x, "total": x.sum(0)} if self.as_dict else x


def _block(kind: str, limit: int) -> torch.nn.Module:
    if kind == "linear":
        return torch.nn.Linear(FEATURES, FEATURES)
    if kind == "gate":
        return Gate()
    if kind == "size":
        return SizeBranch(limit)
    if kind == "rows":
        return FirstRows()
    return Pair(torch.nn.Linear(FEATURES, FEATURES), Gate())


KINDS = ["linear", "gate", "size", "rows", "pair"]
BATCH_SPECS = ["none", "dim", "dim-min", "dim-max", "dim-both", "auto", "dynamic", "static"]


def _batch_spec(kind: str, low: int, high: int) -> Any:
    Dim = torch.export.Dim
    return {
        "none": None,
        "dim": Dim("batch"),
        "dim-min": Dim("batch", min=low),
        "dim-max": Dim("batch", max=high),
        "dim-both": Dim("batch", min=low, max=high),
        "auto": Dim.AUTO,
        "dynamic": Dim.DYNAMIC,
        "static": Dim.STATIC,
    }[kind]


def _sizes(spec_kind: str, low: int, high: int, example: int) -> list[int]:
    """Sizes of the batch at which the program must equal eager: inside the declared range (for a hint, the
    range the export checks), or the example's alone."""
    if spec_kind in ("none", "static"):
        return [example]
    lo = max(low if spec_kind in ("dim-min", "dim-both") else 2, 2)
    hi = high if spec_kind in ("dim-max", "dim-both") else 2 * example + 1
    return sorted({lo, (lo + hi) // 2, hi, example})


def check_contract(kinds: list[str], limit: int, as_dict: bool, spec_kind: str, low: int, high: int, example: int,
                   wrong_features: bool, seed: int) -> None:  # fmt: skip
    torch.manual_seed(seed)
    model = Chain([_block(k, limit) for k in kinds], as_dict).eval()
    COUNTS["models"] += 1
    spec: dict[int, Any] = {}
    batch = _batch_spec(spec_kind, low, high)
    if batch is not None:
        spec[0] = batch
    if wrong_features:
        spec[1] = torch.export.Dim("feat", max=64)
    x = torch.randn(example, FEATURES)
    try:
        result = export_piece_by_piece(model, (x,), dynamic_shapes=(spec or None,))
    except PieceByPieceExportError as exc:  # a documented refusal: count it by its cause
        COUNTS["refused: " + " ".join(str(exc).replace("export_piece_by_piece: ", "").split()[:4])] += 1
        return
    COUNTS["exports"] += 1
    runnable = result.module()
    try:
        for n in _sizes(spec_kind, low, high, example):
            y = torch.randn(n, FEATURES)
            with torch.no_grad():
                want = model(y)
                got = runnable(y)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m, n=n: f"at batch {n}: {m}")
    finally:
        result.close()


SHORT = int(os.environ.get("PBP_EXPORT_FUZZ_EXAMPLES", "3"))


@settings(max_examples=SHORT, deadline=None, derandomize=True)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
    limit=st.integers(2, 12),
    as_dict=st.booleans(),
    spec_kind=st.sampled_from(BATCH_SPECS),
    low=st.integers(0, 3),
    high=st.integers(4, 16),
    example=st.integers(1, 6),
    wrong_features=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_export_is_equal_to_eager_in_its_ranges_or_a_named_refusal(
    kinds: list[str], limit: int, as_dict: bool, spec_kind: str, low: int, high: int, example: int, wrong_features: bool, seed: int
) -> None:
    check_contract(kinds, limit, as_dict, spec_kind, low, high, example, wrong_features, seed)
