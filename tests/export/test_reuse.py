"""Identical pieces share one program (Note [shared programs] in export/_reuse.py), and only identical ones.

Decoder layers without a cache differ only in ``layer_idx``, which they never read: one export serves them all.
With a cache they index it by ``layer_idx``, and each carries only its own layer: one export serves them all too,
unless the index is put to another use (arithmetic, a decision, a table, a torch function; Note [renumbered
layers]), and then each is exported alone. Two blocks whose only difference is a value
their forward reads, and whose recorded outputs agree (so the check against eager alone could not tell them
apart), are exported alone too, and each program computes its own block at inputs the calls never had.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402
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


def _ops(result: Any) -> list[Any]:
    """The operator nodes of the top program, in the order of the pieces."""
    targets = [f"{result.pieces[p].operator.replace('::', '.')}.default" for p in result.report.behind_operators]
    nodes = {str(n.target): n for n in result.program.graph.nodes if n.op == "call_function"}
    return [nodes[t] for t in targets]


def test_layers_that_index_the_cache_share_one_program_each_taking_its_own_cache_layer() -> None:
    model = tiny.llama_sized(32, 4)
    _, cache = tiny.prefill(model, 5, batch=2)
    result = export_piece_by_piece(
        model, (tiny.ids(2, batch=2),), {"cache": cache},
        dynamic_shapes={"input_ids": {0: BATCH, 1: torch.export.Dim("new", min=1, max=64)}, "cache": {0: BATCH, 2: SEQ}},
        classes="LlamaDecoderLayer",
    )  # fmt: skip
    programs = _programs(result)
    assert len(programs) == 4 and programs[0] is not None and all(p is programs[0] for p in programs)
    assert all(result.pieces[p].max_abs_diff == 0 for p in result.report.behind_operators)
    assert "- own programs: the one exported from `model.layers.0` runs model.layers.0-3 (x4)" in result.report.to_markdown()
    # each operator takes its 5 arguments and its own layer's keys and values, and gives its output and them back
    assert [(len(n.args[0]), len(n.meta["val"])) for n in _ops(result)] == [(7, 3)] * 4
    runnable = result.module()
    for batch, past, new in ((1, 4, 1), (3, 10, 2), (2, 30, 5)):
        _, ours = tiny.prefill(model, past, batch=batch)
        theirs = copy.deepcopy(ours)
        x = tiny.ids(new, batch, seed=9)
        with torch.no_grad():
            got, want = runnable(x, cache=ours), model(x, cache=theirs)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
        assert_same_state(theirs, ours)
    result.close()


class Indexed(torch.nn.Module):
    """A block that stores its input in cache layer ``layer_idx`` and may put the index to another use."""

    def __init__(self, layer_idx: int, use: str) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.layer_idx, self.use = layer_idx, use

    def forward(self, x: Any, cache: Any) -> Any:
        keys, values = cache.update(self.proj(x), x, self.layer_idx)
        y = keys.mean(dim=2, keepdim=True) + values.mean(dim=2, keepdim=True)
        if self.use == "scale":
            y = y * (self.layer_idx + 1)  # arithmetic
        elif self.use == "branch" and self.layer_idx == 0:
            y = -y  # a decision the layers take differently
        elif self.use == "table":
            y = y * (0.5, 1.0, 2.0)[self.layer_idx]  # an index Python does not ask: the run must fail
        elif self.use == "tensor":
            y = y + torch.full((1,), self.layer_idx)  # a torch function given the index
        return y


class Stack(torch.nn.Module):
    def __init__(self, use: str) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Indexed(i, use) for i in range(3)])

    def forward(self, x: Any, cache: Any) -> Any:
        for block in self.blocks:
            x = block(x, cache)
        return x


# "branch": layer 0 takes the branch, layers 1 and 2 do not and share one program
@pytest.mark.parametrize(("use", "programs"), [("none", 1), ("scale", 3), ("branch", 2), ("table", 3), ("tensor", 3)])
def test_layers_that_put_their_index_to_another_use_are_exported_one_by_one(use: str, programs: int) -> None:
    cache_utils = pytest.importorskip("transformers.cache_utils")
    torch.manual_seed(0)
    model = Stack(use).eval()
    cache = cache_utils.DynamicCache()
    for i in range(3):
        cache.update(torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), i)
    x = torch.randn(2, 2, 1, 4)
    result = export_piece_by_piece(model, (x, cache), dynamic_shapes=({0: BATCH}, {0: BATCH, 2: SEQ}), classes=Indexed)
    own = _programs(result)
    assert all(p is not None for p in own) and len({id(p) for p in own}) == programs
    assert [len(n.args[0]) for n in _ops(result)] == [3] * 3  # x, its layer's keys and values
    for batch, past in ((1, 5), (3, 2)):
        ours = cache_utils.DynamicCache()
        for i in range(3):
            ours.update(torch.randn(batch, 2, past, 4), torch.randn(batch, 2, past, 4), i)
        theirs = copy.deepcopy(ours)
        y = torch.randn(batch, 2, 1, 4)
        with torch.no_grad():
            torch.testing.assert_close(result.module()(y, ours), model(y, theirs), rtol=0, atol=1e-5)
        assert_same_state(theirs, ours)
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
