"""The examples of an export: dynamic shapes per flat tensor, the second example made from the first, and the
dynamic shapes derived from several examples (Note [a second example], Note [dynamic shapes of a cache])."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize import PieceByPieceExportError, dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402


class Pair(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any, extra: dict[str, Any]) -> Any:
        return self.lin(x) + extra["bias"].sum(0), [x.sum(), extra["bias"]]


def test_dynamic_shapes_from_examples_mark_the_dimensions_that_move() -> None:
    model = Pair()
    a = ((torch.randn(3, 4), {"bias": torch.randn(5, 4)}), {})
    b = ((torch.randn(6, 4), {"bias": torch.randn(5, 4)}), {})
    shapes = dynamic_shapes_from_examples(model, [a, b])
    assert shapes == {"x": {0: torch.export.Dim.DYNAMIC}, "extra": None}
    with pytest.raises(PieceByPieceExportError, match="at least two examples"):
        dynamic_shapes_from_examples(model, [a])
    c = ((torch.randn(6, 4), {"bias": None}), {})
    with pytest.raises(PieceByPieceExportError, match="the examples have different structures"):
        dynamic_shapes_from_examples(model, [a, c])
    d = ((torch.randn(6, 4, 1), {"bias": torch.randn(5, 4)}), {})
    with pytest.raises(PieceByPieceExportError, match="different ranks"):
        dynamic_shapes_from_examples(model, [a, d])


def test_a_second_example_is_made_and_said_and_its_refusal_too() -> None:
    model = Pair()
    batch = torch.export.Dim("batch", min=2, max=16)
    result = export_piece_by_piece(model, (torch.randn(3, 4), {"bias": torch.randn(5, 4)}), dynamic_shapes=({0: batch}, None))
    assert result.report.notes == [
        "a second example was made from the first (batch: 3 -> 4)",
        "the program checked at 3 more points of the declared ranges (batch: 2, 9, 16)",  # Note [every declared range]
    ]
    assert len(result.report.examples) == 2

    class Strict(Pair):
        def forward(self, x: Any, extra: dict[str, Any]) -> Any:
            if x.shape[0] != 3:  # eagerly refuses any other batch: the stretched example fails
                raise ValueError("batch must be 3")
            return super().forward(x, extra)

    result = export_piece_by_piece(Strict(), (torch.randn(3, 4), {"bias": torch.randn(5, 4)}))
    assert result.report.notes == []  # nothing dynamic: no second example
    with pytest.raises(PieceByPieceExportError, match="in the model's own forward") as info:  # it guards on the batch
        export_piece_by_piece(Strict(), (torch.randn(3, 4), {"bias": torch.randn(5, 4)}), dynamic_shapes=({0: batch}, None))
    assert info.value.report.notes == ["no second example: the model refused the first one stretched (batch: 3 -> 4): ValueError: batch must be 3"]


def test_additional_inputs_give_the_dimensions_and_the_examples() -> None:
    model = Pair()
    shapes = torch.export.AdditionalInputs()
    shapes.add((torch.randn(7, 4), {"bias": torch.randn(5, 4)}))
    result = export_piece_by_piece(model, (torch.randn(3, 4), {"bias": torch.randn(5, 4)}), dynamic_shapes=shapes)
    assert result.report.notes == [
        "dynamic dimensions from 2 examples (torch.export.AdditionalInputs)",
        "the program checked at 4 more points of the declared ranges (x dim 0: 1, 2, 4, 7)",  # 1: Note [sizes of one]
    ]
    x = torch.randn(11, 4)
    extra = {"bias": torch.randn(5, 4)}
    got, want = result.module()(x, extra), model(x, extra)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    assert type(got[1]) is list and torch.equal(got[1][1], extra["bias"])
