"""Mistakes named, not crashes (issue 30): a piece whose own program refuses its calls, torch's internal look-ups
in a reason, a closed export, dynamic shapes that cannot fit the example, the Markdown report's pipes, save paths,
the forms of ``classes``, and progress inside a long attempt."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import PieceByPieceExportError, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import Failure  # noqa: E402

Dim = torch.export.Dim
BATCH = Dim("batch", min=2, max=64)


class Odd(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x * 2 if x.shape[0] % 2 else x + 1  # a guard on the batch's parity


class WithOdd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.odd, self.lin = Odd(), torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.lin(self.odd(x))


def test_a_piece_whose_own_program_refuses_its_calls_has_no_own_program() -> None:
    model = WithOdd().eval()
    # before: AssertionError: Guard failed: tensors_0.size()[0] % 2 != 0, from _check_alone
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes="Odd")
    odd = result.pieces["odd"]
    assert odd.program is None and odd.own_export_failure is not None
    assert odd.own_export_failure.message.startswith("its program fails on one of its recorded calls: AssertionError: Guard failed")
    assert "no own program: other: its program fails on one of its recorded calls" in str(result.report)
    x = torch.randn(6, 4)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


def test_a_reason_is_the_failure_not_a_lookup_torch_caught_on_the_way() -> None:
    try:
        try:
            raise NameError("module is not installed as a submodule")  # torch.fx's path_of_module, caught inside torch
        except NameError:
            raise RuntimeError("the operator is not supported")  # noqa: B904  # an implicit context, as torch leaves it
    except RuntimeError as exc:
        assert isinstance(exc.__context__, NameError)  # before: the reason was the NameError
        assert Failure.of(exc).message == "RuntimeError: the operator is not supported"
    try:
        try:
            raise ValueError("the real cause")
        except ValueError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        assert Failure.of(exc).message == "ValueError: the real cause"  # an explicit cause is still followed


def test_a_closed_export_says_so_when_its_module_is_called() -> None:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    runnable = result.module()
    result.close()
    assert result.closed
    with pytest.raises(PieceByPieceExportError, match=r"^PieceByPieceExport.module\(\)'s call: this export was closed"):
        runnable(torch.randn(3, 4))  # before: AttributeError from torch's _OpNamespace
    with pytest.raises(PieceByPieceExportError, match=r"^PieceByPieceExport.module\(\): this export was closed"):
        result.module()


@pytest.mark.parametrize(
    ("shapes", "x", "message"),
    [
        (({0: Dim("batch", max=64), 1: Dim("batch", max=32)},), torch.randn(3, 3),
         "dynamic_shapes: the name 'batch' is given to two Dims of other bounds, Dim('batch', min=0, max=64) (for input dim 0) "
         "and Dim('batch', min=0, max=32) (for input dim 1); torch.export takes a name for one dimension"),
        (({0: Dim("batch", min=4, max=64)},), torch.randn(3, 4),
         "dynamic_shapes: input dim 0 is 3 in the example, outside the range of Dim('batch', min=4, max=64); give an example "
         "inside the range, or widen it (min=3)"),
        (({0: Dim("batch", min=1, max=64)},), torch.randn(1, 4),
         "dynamic_shapes: input dim 0 is 1 in the example, declared dynamic (Dim('batch', min=1, max=64)); torch.export "
         "specializes a dimension of size 0 or 1 to that constant: give an example of size 2 or more"),
        (({0: Dim.DYNAMIC},), torch.randn(1, 4), "dynamic_shapes: input dim 0 is 1 in the example, declared dynamic (Dim.DYNAMIC)"),
        (({0: Dim.AUTO},), torch.randn(1, 4), "dynamic_shapes: input dim 0 is 1 in the example, declared dynamic (Dim.AUTO)"),
    ],
    ids=["name-reused", "min-above-example", "size-one", "dynamic-size-one", "auto-size-one"],
)
def test_dynamic_shapes_mistakes_are_named(shapes: Any, x: Any, message: str) -> None:
    model = torch.nn.Sequential(torch.nn.ReLU()).eval()
    # (Sequential's forward takes `input`) before: "the export fails outside the model's submodules (no module could be
    # blamed)", and for Dim.AUTO a program that took only a batch of 1 (found by tests/property/test_export_contract.py)
    with pytest.raises(PieceByPieceExportError) as caught:
        export_piece_by_piece(model, (x,), dynamic_shapes=shapes)
    assert str(caught.value).startswith(message)


def test_the_markdown_report_escapes_a_pipe_once() -> None:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    result.report.onnx = SimpleNamespace(path="m|x.onnx", size=10, functions={"f": ["a"]}, model_diff=0.0, seconds=1.0)
    (row,) = [line for line in result.report.to_markdown().splitlines() if line.startswith("| onnx |")]
    assert row == "| onnx | `m\\|x.onnx`, 10 bytes, 1 function(s), max \\|diff\\| of onnxruntime 0, 1.0 s |"  # before: \\\|diff


def test_save_names_a_path_it_cannot_write(tmp_path: Path) -> None:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    missing = tmp_path / "no" / "such" / "model.pt2"
    with pytest.raises(FileNotFoundError, match=f"no directory '{tmp_path / 'no' / 'such'}' to write '{missing}' in"):
        result.save(missing)  # before: torch's C++ "enforce fail" without the path
    with pytest.raises(IsADirectoryError, match=f"'{tmp_path}' is a directory; give a file path"):
        result.save(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_classes_take_a_list_and_qualified_names_and_refuse_nothing_by_name() -> None:
    model = toy.deep()
    x = torch.randn(3, 4)
    by_list = export_piece_by_piece(model, (x,), classes=["Branchy"])  # before: refused
    assert by_list.report.behind_operators == ["top.mid.leaf"]
    qualified = export_piece_by_piece(model, (x,), classes=("torch.nn.LayerNorm", "_toy_models.Branchy"))  # before: refused
    assert qualified.report.behind_operators == ["top.mid.leaf", "norm"]
    with pytest.raises(ValueError, match=r"^export_piece_by_piece: classes=\(\) names no class; give a class, a class name or a tuple of them$"):
        export_piece_by_piece(model, (x,), classes=())  # before: "... is an instance of ;"


def test_a_long_attempt_logs_where_tracing_is(caplog: Any, monkeypatch: Any) -> None:
    from piece_by_piece_serialize.export import _job

    monkeypatch.setattr(_job, "_HEARTBEAT", 0.0)  # every module entered, instead of every 5 s
    with caplog.at_level(logging.INFO, logger="piece_by_piece_serialize.export"):
        export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    lines = [r.getMessage() for r in caplog.records if r.name == "piece_by_piece_serialize.export"]
    assert any(line.startswith("attempt 1: tracing top.mid.leaf, ") for line in lines)


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any, scale: Any = None) -> Any:
        return self.lin(x) if scale is None else self.lin(x) * scale


def test_a_call_of_another_structure_names_the_argument() -> None:
    from piece_by_piece_serialize.artifact import CallStructureError

    result = export_piece_by_piece(Scaled().eval(), (torch.randn(3, 4),), {"scale": None})
    # before: "called with (('Tensor', 'Tensor'), ('scale',), ()), but the program was exported for (('Tensor', 'None'), ..."
    with pytest.raises(CallStructureError, match=r"^PieceByPieceExport.module\(\): `scale` was None in the example, here a Tensor; every call"):
        result.module()(torch.randn(3, 4), scale=torch.tensor(2.0))


def test_a_cut_piece_points_at_the_models_code_with_torchs_whole_message_and_fix() -> None:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    failure = result.pieces["top.mid.leaf"].failure
    source = Path(toy.__file__)
    assert failure is not None and failure.where == f"{source}:23"  # `if h.sum() > 0:` in Branchy.forward
    assert source.read_text().splitlines()[22].strip() == "if h.sum() > 0:"
    leaf = next(line for line in str(result.report).splitlines() if "Branchy" in line)
    # exported alone too (automatic mode), it fails the same way: said once
    assert leaf.endswith("(at _toy_models.py:23); no own program: the same failure alone")
    markdown = result.report.to_markdown()
    assert f"- in the model's code: `{source}:23`" in markdown
    assert "  The following call raised this error:" in markdown  # the whole message, not its first line

    class Guarded(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2 if x.shape[0] <= 40 else x - 1

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.guarded, self.lin = Guarded(), torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            return self.lin(self.guarded(x))

    cut = export_piece_by_piece(Model().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    guarded = cut.pieces["guarded"].failure
    assert guarded is not None and guarded.fix == "batch = Dim('batch', max=40)"
    assert "; torch suggests: batch = Dim('batch', max=40)" in str(cut.report)
    assert "- torch's suggested fix: `batch = Dim('batch', max=40)`" in cut.report.to_markdown()
