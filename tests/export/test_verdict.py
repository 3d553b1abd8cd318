"""The verdict of an export (Note [the verdict]): every output against eager within a tolerance, pass or FAIL per
output, per piece and for the model; a program that does not match raises, unless ``strict=False``; a model
with an active dropout is refused by name."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import PieceByPieceExportError, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import DEFAULT_TOLERANCES, ExportMismatchError  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=64)


class Noisy(torch.nn.Module):
    """Random in its forward: no program can match eager."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return {"clean": self.lin(x), "noisy": self.lin(x) + torch.rand_like(x)}


class NoisyBranchy(toy.Branchy):
    """A data-dependent branch (cut) that is also random: its check against its module fails."""

    def forward(self, x: Any) -> Any:
        return super().forward(x) + torch.rand_like(x)


class NoisyLeaf(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.leaf = NoisyBranchy()

    def forward(self, x: Any) -> Any:
        return self.leaf(x) * 2


def test_every_output_gets_a_verdict_and_a_clean_export_passes() -> None:
    model = toy.deep()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    report = result.report
    assert report.passed is True and report.failed == []
    (out,) = report.root.outputs
    assert out.name == "output" and out.passed and out.max_abs_diff == 0.0 and out.max_rel_diff == 0.0
    assert (out.atol, out.rtol) == DEFAULT_TOLERANCES["float32"]
    leaf = result.pieces["top.mid.leaf"]
    assert leaf.passed is True and leaf.verdict == "pass" and [o.name for o in leaf.outputs] == ["output"]
    assert str(report).splitlines()[0].endswith(" on 2 examples: PASS")
    assert "| verdict | PASS |" in report.to_markdown()
    assert report.to_dict()["passed"] is True and report.to_dict()["tree"]["outputs"][0]["name"] == "output"


def test_a_program_that_does_not_match_eager_raises_naming_the_output() -> None:
    with pytest.raises(ExportMismatchError) as caught:
        export_piece_by_piece(Noisy().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    error = caught.value
    assert isinstance(error, PieceByPieceExportError)
    assert "does not match eager: (model)" in str(error) and "output.noisy" in str(error) and "strict=False" in str(error)
    assert "output.clean" not in str(error)  # only what failed
    checks = {o.name: o for o in error.report.root.outputs}
    assert checks["output.clean"].passed and checks["output.clean"].max_abs_diff == 0.0
    assert not checks["output.noisy"].passed and checks["output.noisy"].max_abs_diff > 1e-3
    assert error.result is not None and error.result.report is error.report


def test_strict_false_keeps_the_program_and_the_report_says_fail() -> None:
    result = export_piece_by_piece(Noisy().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), strict=False)
    assert result.report.passed is False and result.report.failed == ["(model)"]
    assert str(result.report).splitlines()[0].endswith(": FAIL")
    assert "output output.noisy: max |diff|" in str(result.report)
    markdown = result.report.to_markdown()
    assert "| verdict | FAIL ((model)) |" in markdown and "| `output.noisy` |" in markdown


def test_a_piece_that_does_not_match_its_module_fails_by_name() -> None:
    with pytest.raises(ExportMismatchError, match=r"does not match eager: .*leaf") as caught:
        export_piece_by_piece(NoisyLeaf().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    report = caught.value.report
    assert report.failed == ["(model)", "leaf"] and report.pieces["leaf"].verdict == "FAIL"
    assert "|d| " in str(report) and " FAIL" in next(line for line in str(report).splitlines() if "NoisyBranchy" in line)
    assert "- checked through its operator against its module: max \\|diff\\|" in report.to_markdown()


def test_tolerances_loosen_the_verdict_and_are_checked() -> None:
    result = export_piece_by_piece(Noisy().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), atol=2.0)
    assert result.report.passed is True
    assert {o.atol for o in result.report.root.outputs} == {2.0}
    with pytest.raises(PieceByPieceExportError, match="rtol must be a number >= 0 or None, not -1"):
        export_piece_by_piece(Noisy().eval(), (torch.randn(3, 4),), rtol=-1)


def test_a_model_with_active_dropout_is_refused_by_name_and_batch_norms_in_training_warned() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    with pytest.raises(PieceByPieceExportError, match=r"Sequential is in training mode with active dropout \(1\).*model\.eval\(\)"):
        export_piece_by_piece(model, (torch.randn(3, 4),))
    with pytest.warns(UserWarning, match="active dropout"):
        kept = export_piece_by_piece(model, (torch.randn(3, 4),), strict=False)
    assert kept.report.passed is False  # the dropout's randomness is what the verdict sees
    normed = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    with pytest.warns(UserWarning, match=r"Sequential is in training mode: its batch norms \(1\)"):
        export_piece_by_piece(normed, (torch.randn(3, 4),), strict=False)
    assert export_piece_by_piece(model.eval(), (torch.randn(3, 4),)).report.passed is True


def test_a_transformers_model_left_in_training_mode_is_refused_naming_its_dropouts() -> None:
    from transformers import AutoModelForCausalLM

    from _tiny_models import config

    model = AutoModelForCausalLM.from_config(config("gpt2", n_embd=32, n_layer=2, n_head=4, vocab_size=64))
    assert model.training
    with pytest.raises(PieceByPieceExportError, match=r"GPT2LMHeadModel is in training mode with active dropout \(transformer\.drop, "):
        export_piece_by_piece(model, (torch.randint(0, 64, (2, 5)),))
