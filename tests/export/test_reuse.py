"""Identical pieces share one program (Note [shared programs] in export/_reuse.py), and only identical ones.

Decoder layers without a cache differ only in ``layer_idx``, which they never read: one export serves them all.
With a cache they index it by ``layer_idx``: each is exported alone. Two blocks whose only difference is a value
their forward reads, and whose recorded outputs agree (so the check against eager alone could not tell them
apart), are exported alone too, and each program computes its own block at inputs the calls never had.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402

BATCH, SEQ = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=64)


def _programs(result: Any) -> list[Any]:
    return [result.pieces[p].program for p in result.report.behind_operators]


def test_identical_layers_without_a_cache_share_one_program() -> None:
    model = tiny.llama_sized(32, 4)
    ids = tiny.ids(6, batch=2)
    result = export_piece_by_piece(model, (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}},
                                   classes="LlamaDecoderLayer")  # fmt: skip
    programs = _programs(result)
    assert len(programs) == 4 and all(p is programs[0] for p in programs)
    assert all(result.pieces[p].max_abs_diff == 0 for p in result.report.behind_operators)
    page = result.report.to_markdown()  # the report says which program each piece runs
    assert "## `model.layers.0-3 (x4)`" in page
    assert "- own programs: the one exported from `model.layers.0` runs model.layers.0-3 (x4)" in page
    x = tiny.ids(40, batch=3)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x, use_cache=False).logits, model(x, use_cache=False).logits, rtol=0, atol=1e-5)
    result.close()


def test_layers_that_index_the_cache_are_exported_one_by_one() -> None:
    model = tiny.llama()
    _, cache = tiny.prefill(model, 5, batch=2)
    result = export_piece_by_piece(
        model, (tiny.ids(2, batch=2),), {"cache": cache},
        dynamic_shapes={"input_ids": {0: BATCH, 1: torch.export.Dim("new", min=1, max=64)}, "cache": {0: BATCH, 2: SEQ}},
        classes="LlamaDecoderLayer",
    )  # fmt: skip
    programs = _programs(result)
    assert len(programs) == 2 and programs[0] is not None and programs[1] is not None and programs[0] is not programs[1]
    page = result.report.to_markdown()
    assert ("- own programs: the one exported from `model.layers.0` runs model.layers.0; "
            "the one exported from `model.layers.1` runs model.layers.1") in page  # fmt: skip
    result.close()


class Gate(torch.nn.Module):
    def __init__(self, limit: float) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.limit = limit  # read by forward; the recorded calls never reach either limit

    def forward(self, x: Any) -> Any:
        y = self.proj(x)
        return torch.where(y.abs() < self.limit, y * 2, y * 3)


class Gates(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gates = torch.nn.ModuleList([Gate(100.0), Gate(1000.0)])

    def forward(self, x: Any) -> Any:
        return [g(x) for g in self.gates]


def test_pieces_that_read_a_value_of_their_own_are_exported_one_by_one() -> None:
    torch.manual_seed(0)
    model = Gates().eval()
    with torch.no_grad():
        model.gates[1].proj.load_state_dict(model.gates[0].proj.state_dict())  # the same weights: equal outputs
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=Gate)
    first, second = _programs(result)
    assert first is not None and second is not None and first is not second
    big = torch.full((2, 4), 50.0)  # |y| between the two limits: the blocks differ here
    weights = [dict(model.gates[i].named_parameters()) for i in range(2)]
    for program, block, w in ((first, model.gates[0], weights[0]), (second, model.gates[1], weights[1])):
        with torch.no_grad():
            got = program.module()(w["proj.weight"], w["proj.bias"], big)
            torch.testing.assert_close(got[0], block(big), rtol=0, atol=0)
    result.close()
