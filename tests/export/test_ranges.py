"""Every declared range honoured (Note [a second example], Note [every declared range]): dimensions equal by chance
in the example are never tied, the program is checked at the ends of each range and between, a static dimension
declared dynamic is an error with torch's suggested fix, and an unbounded ``Dim`` does not crash the blame."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import PieceByPieceExportError, dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import ExportMismatchError  # noqa: E402

Dim = torch.export.Dim


class Gate(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x * 2 if x.sum() > 0 else x - 1  # data-dependent: cut


class SumsRows(torch.nn.Module):
    """A cut piece, then a reduction over dimension 1: the output's shape follows dimension 0 only."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()

    def forward(self, x: Any) -> Any:
        return self.gate(x).sum(1, keepdim=True) + x.mean()


class LinearRows(torch.nn.Module):
    """The same with a Linear on dimension 1, which is therefore static."""

    def __init__(self) -> None:
        super().__init__()
        self.leaf = toy.Branchy()

    def forward(self, x: Any) -> Any:
        return self.leaf(x).sum(1, keepdim=True) + x.mean()


@pytest.mark.parametrize("hint", [Dim.AUTO, Dim.DYNAMIC], ids=["AUTO", "DYNAMIC"])
def test_two_hinted_dimensions_of_equal_size_are_not_tied(hint: Any) -> None:
    torch.manual_seed(0)
    model = SumsRows().eval()
    result = export_piece_by_piece(model, (torch.randn(4, 4),), dynamic_shapes=({0: hint, 1: hint},))
    assert "a second example was made from the first (x dim 0: 4 -> 5, x dim 1: 4 -> 6)" in result.report.notes
    runnable = result.module()
    for shape in ((3, 5), (5, 3), (7, 7)):  # before: Guard failed: tensors_0.size()[1] == tensors_0.size()[0]
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(runnable(x), model(x), rtol=0, atol=1e-6)


def test_auto_on_a_static_dimension_equal_to_a_dynamic_one_leaves_it_and_moves_the_other() -> None:
    torch.manual_seed(0)
    model = LinearRows().eval()
    result = export_piece_by_piece(model, (torch.randn(4, 4),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    assert "a second example was made from the first (x dim 0: 4 -> 5)" in result.report.notes
    with pytest.raises(PieceByPieceExportError, match=r"declares x dim 1 dynamic \(DimHint\(DYNAMIC\)\), but the model runs at no other size"):
        export_piece_by_piece(model, (torch.randn(4, 4),), dynamic_shapes=({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},))
    for n in (2, 3, 9):
        x = torch.randn(n, 4)
        with torch.no_grad():
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=1e-6)


def test_the_docs_decode_step_with_gpt2_blocks_keeps_batch_and_new_tokens_apart() -> None:
    from transformers import AutoModelForCausalLM

    from _tiny_models import config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config("gpt2", n_embd=32, n_layer=1, n_head=4, vocab_size=64, n_positions=64)).eval()

    def prefill(n: int, batch: int) -> Any:
        with torch.no_grad():
            return model(torch.randint(0, 64, (batch, n)), cache=None, use_cache=True).cache

    shapes = dynamic_shapes_from_examples(model, [
        ((torch.randint(0, 64, (2, 2)),), {"cache": prefill(5, 2)}),
        ((torch.randint(0, 64, (3, 3)),), {"cache": prefill(8, 3)}),
    ])  # fmt: skip
    result = export_piece_by_piece(model, (torch.randint(0, 64, (2, 2)),), {"cache": prefill(5, 2)}, dynamic_shapes=shapes, classes="GPT2Block")
    assert result.report.passed
    cache = prefill(9, 3)
    reference = copy.deepcopy(cache)
    x = torch.randint(0, 64, (3, 5))  # batch 3, 5 new tokens: apart, where the example had both at 2
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x, cache=cache).logits, model(x, cache=reference).logits, rtol=0, atol=1e-5)


class Halve(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        h = x[: x.shape[0] // 2]
        return h * 2 if h.sum() > 0 else h - 1  # data-dependent: cut


class UsesHalfLength(torch.nn.Module):
    """The piece's output length, n // 2, is 2 on both examples (4 and 5 rows): its operator learns a constant,
    and the program slices 4 rows where eager slices 2 * (n // 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.halve, self.lin = Halve(), torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.lin(x[: 2 * self.halve(x).shape[0]])


def test_a_program_wrong_inside_its_declared_range_fails_the_verdict() -> None:
    batch = Dim("batch", min=4, max=64)
    # before: "max |diff| against eager 0", and a program giving 4 rows where eager gives 64
    result = export_piece_by_piece(UsesHalfLength().eval(), (torch.randn(4, 4),), dynamic_shapes=({0: batch},), strict=False)
    assert "the program checked at 2 more points of the declared ranges (batch: 34, 64)" in result.report.notes  # 4: the example
    assert result.report.passed is False and result.report.refused == [
        "at batch=34 the program's output tensor 0 is torch.float32 (4, 4) where eager gives torch.float32 (34, 4)",
        "at batch=64 the program's output tensor 0 is torch.float32 (4, 4) where eager gives torch.float32 (64, 4)",
    ]
    with pytest.raises(ExportMismatchError, match=r"\(model\) at batch=34 the program's output tensor 0 is"):
        export_piece_by_piece(UsesHalfLength().eval(), (torch.randn(4, 4),), dynamic_shapes=({0: batch},))


def test_a_static_dimension_declared_dynamic_is_an_error_with_torchs_suggested_fix() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    with pytest.raises(PieceByPieceExportError) as caught:  # before: every Linear behind an operator, "exported"
        export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch"), 1: Dim("feat", max=64)},))
    message = str(caught.value)
    assert message.startswith("export_piece_by_piece: dynamic_shapes declares feat dynamic (Dim('feat', min=0, max=64)), but the model runs at no "
                              "other size than the example's 4: it refuses 1, 32, 64 (RuntimeError: mat1 and mat2 shapes cannot be multiplied")  # fmt: skip
    assert message.endswith("the dimension is static: torch's suggested fix: feat = 4, or give Dim.AUTO")


def test_an_unbounded_dim_whose_constraint_breaks_is_blamed_without_crashing() -> None:
    class Guarded(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2 if x.shape[0] <= 100 else x - 1

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.guarded, self.lin = Guarded(), torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            return self.lin(self.guarded(x))

    model = Model().eval()
    # before: AttributeError: 'Infinity' object has no attribute '_mpf_' (torch's int_oo says is_finite)
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},))
    assert result.report.behind_operators == ["guarded"]
    assert result.pieces["guarded"].failure.detail == "guard batch <= 100 is false at batch=127"
    x = torch.randn(200, 4)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


def test_a_point_whose_inputs_exceed_check_bytes_is_checked_at_the_largest_size_within_it() -> None:
    batch = Dim("batch", min=4, max=64)
    x = torch.randn(4, 4)  # 16 bytes a row: 64 rows take 1 KiB, over a limit of 640 B (40 rows)
    result = export_piece_by_piece(UsesHalfLength().eval(), (x,), dynamic_shapes=({0: batch},), strict=False, check_bytes=640)
    assert result.report.notes[-1] == (
        "the program checked at 2 more points of the declared ranges (batch: 34, 40); batch=64 not checked: its "
        "inputs would take 1.0 KiB, over the checks' limit of 640 B (give a larger check_bytes= to check it); "
        "checked at batch=40 instead"
    )
    assert result.report.refused[1] == "at batch=40 the program's output tensor 0 is torch.float32 (4, 4) where eager gives torch.float32 (40, 4)"
    whole = export_piece_by_piece(UsesHalfLength().eval(), (x,), dynamic_shapes=({0: batch},), strict=False, check_bytes=1024)
    assert "the program checked at 2 more points of the declared ranges (batch: 34, 64)" in whole.report.notes  # 1 KiB: within


def test_a_limit_below_the_example_moves_every_larger_point_nowhere_and_says_so() -> None:
    batch = Dim("batch", min=2, max=16)
    result = export_piece_by_piece(SumsRows().eval(), (torch.randn(4, 4),), dynamic_shapes=({0: batch},), check_bytes=32)
    assert result.report.notes[-1] == (
        "the program checked at 1 more point of the declared ranges (batch: 2); batch=9 not checked: its inputs "
        "would take 144 B, over the checks' limit of 32 B (give a larger check_bytes= to check it); batch=16 not "
        "checked: its inputs would take 256 B, over the checks' limit of 32 B (give a larger check_bytes= to check it)"
    )


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1 GB"])
def test_check_bytes_must_be_a_count_of_bytes(bad: Any) -> None:
    with pytest.raises(PieceByPieceExportError, match=r"check_bytes must be an int >= 0 \(bytes\) or None, not"):
        export_piece_by_piece(SumsRows().eval(), (torch.randn(4, 4),), check_bytes=bad)


class MeanRows(torch.nn.Module):
    def forward(self, y: Any) -> Any:
        return y.sum(0) / y.shape[0]


class HalfThenMean(torch.nn.Module):
    """A program that fails at the far points before it reaches its second piece: the first piece's operator
    learns 2 rows (n // 2 at 4 and 5 rows), so the program adds x[:2] to the 17 rows it returns at batch=34."""

    def __init__(self) -> None:
        super().__init__()
        self.halve, self.mean = Halve(), MeanRows()

    def forward(self, x: Any) -> Any:
        h = self.halve(x)
        return self.mean(h + x[: h.shape[0]])


def test_an_own_program_the_failed_program_never_reached_is_still_judged_at_the_point() -> None:
    # MeanRows exported alone from its calls of 2 rows holds 2 rows only; the program fails before it calls the
    # piece's operator, so no call of it is seen there, and the piece is judged on a recording of the model instead
    batch = Dim("batch", min=4, max=64)
    result = export_piece_by_piece(HalfThenMean().eval(), (torch.randn(4, 4),), dynamic_shapes=({0: batch},),
                                   classes=(Halve, MeanRows), strict=False)  # fmt: skip
    assert result.report.refused[0].startswith("at batch=34 the program fails where eager runs")
    failure = result.pieces["mean"].own_export_failure
    assert failure is not None and failure.message.startswith(
        "its program, exported alone from its recorded calls, fails at batch=34, a size of the declared range: RuntimeError"
    )


class Window(torch.nn.Module):
    """Takes its input with 4 positions before it (a sliding window's keys): its own program's second input has
    ``new + 4`` positions, an expression torch ranges from 6 when ``new`` is a hint (Note [sizes of one])."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: Any, padded: Any) -> Any:
        return self.proj(x) + padded[:, 4:]


class Windowed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.window = Window()

    def forward(self, x: Any) -> Any:
        return self.window(x, torch.cat([torch.zeros(x.shape[0], 4, 4), x], dim=1))


class OneIsSpecial(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x * 2 if x.shape[1] == 1 else x + 1  # traced at 2 and up, where the test is statically false


def _two_examples(first: Any, second: Any) -> Any:
    other = torch.export.AdditionalInputs()
    other.add((second,))
    return first, other


def test_one_new_token_given_to_a_program_exported_from_two_and_three_loads_and_runs(tmp_path: Any) -> None:
    from piece_by_piece_serialize import load_piece_by_piece

    torch.manual_seed(0)
    model = Windowed().eval()
    first, other = _two_examples(torch.randn(2, 3, 4), torch.randn(3, 2, 4))
    result = export_piece_by_piece(model, (first,), dynamic_shapes=other, classes=Window)
    assert "x dim 1: 1, 2, 4, 7" in result.report.notes[-1]  # one new token checked, besides the range's 2 and up
    assert result.pieces["window"].program is not None
    result.save(tmp_path / "windowed.pt2")
    loaded = load_piece_by_piece(tmp_path / "windowed.pt2")
    x = torch.randn(2, 1, 4)
    # before: "Expected input at *args[3].shape[1] to be >= 6, but got 5", after an export that passed
    assert torch.equal(loaded(x), model(x))


def test_a_program_that_computes_otherwise_at_one_fails_and_an_own_program_so_is_dropped() -> None:
    first, other = _two_examples(torch.randn(2, 3), torch.randn(3, 2))
    with pytest.raises(ExportMismatchError, match=r"output: max \|diff\| 1\.\d+"):  # at 1 eager doubles, the program adds 1
        export_piece_by_piece(OneIsSpecial().eval(), (first,), dynamic_shapes=other)
    wrapped = torch.nn.Sequential(OneIsSpecial()).eval()
    result = export_piece_by_piece(wrapped, (first,), dynamic_shapes=other, classes=OneIsSpecial)
    piece = result.pieces["0"]
    assert piece.program is None and "differs from its module at" in piece.own_export_failure.message
    assert "dim 1=1" in piece.own_export_failure.message


class Prefix(torch.nn.Module):
    def forward(self, x: Any, y: Any) -> Any:
        return x[:, : y.shape[1]] * 2 + y  # guards y's length <= x's; at x's 1, eager broadcasts the one column


def test_a_program_refusing_one_below_a_hints_range_is_no_failure_and_the_report_says_so() -> None:
    other = torch.export.AdditionalInputs()
    other.add((torch.randn(3, 7), torch.randn(3, 4)))
    result = export_piece_by_piece(Prefix().eval(), (torch.randn(2, 5), torch.randn(2, 3)), dynamic_shapes=other)
    assert result.report.passed and result.report.refused == []
    assert result.report.notes[-1].endswith(
        "at x dim 1=1 the program fails where eager runs: AssertionError: Guard failed: tensors_1.size()[1] <= "
        "tensors_0.size()[1] (below the range torch gives a dimension declared by a hint)"
    )


def test_a_guard_on_a_hint_is_searched_again_with_the_hint_named_and_otherwise_says_how(tmp_path: Any) -> None:
    """Note [guards on a hint]: the sequence declared by AdditionalInputs' hint, the program takes the padding guard
    and refuses 4 and 7 tokens; the automatic search then runs again with the hint named, and puts the padding module
    behind an operator. With ``classes=`` (no search), the refusal says what to change; the named Dim it asks for
    gives the same export as the search's second run."""
    torch.manual_seed(0)
    model = toy.Chunked().eval()
    x = torch.randn(2, 3, 8)
    hinted = torch.export.AdditionalInputs()
    hinted.add((torch.randn(3, 6, 8),))
    searched = export_piece_by_piece(model, (x,), dynamic_shapes=hinted)
    assert searched.report.passed and searched.report.behind_operators == ["chunks"]
    assert any(n.startswith("x dim 1 declared by hints, on which the program took a guard") for n in searched.report.notes)
    with pytest.raises(ExportMismatchError) as failed:
        export_piece_by_piece(model, (x,), dynamic_shapes=hinted, classes=torch.nn.Linear)
    assert str(failed.value).splitlines()[0].startswith(
        "export_piece_by_piece: the program of the Chunked refuses sizes of the declared ranges that eager runs, as "
        "chunks (PadToFour), not behind an operator with classes=(Linear), guards x dim 1, declared by a hint (Dim.DYNAMIC, "
        "Dim.AUTO, or AdditionalInputs): guard "
    )
    advice = [r for r in failed.value.report.refused if "declared by a hint" in r]
    assert len(advice) == 1 and advice[0].startswith("at x dim 1=4 the program fails where eager runs: AssertionError: Guard failed")
    assert "declare it with a named torch.export.Dim" in str(failed.value)
    named = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
    result = export_piece_by_piece(model, (x,), dynamic_shapes=named)
    assert result.report.passed and result.report.behind_operators == ["chunks"]
    for seq in (4, 7, 9):
        y = torch.randn(3, seq, 8)
        torch.testing.assert_close(result.module()(y), model(y), rtol=0, atol=1e-6)
        torch.testing.assert_close(searched.module()(y), model(y), rtol=0, atol=1e-6)
    # the padding module has no program of its own (its guard is in its own code), but programs by size, which
    # tests/onnx_export/test_by_size.py runs in onnxruntime
    for export in (result, searched):
        assert export.pieces["chunks"].program is None and "programs by size" in (export.pieces["chunks"].by_size or "")


def _llama4_step() -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    """The tiny Llama 4 at a decode step, as bench/families.py gives it: 3 new tokens after 6 past (batch 2), and by
    AdditionalInputs 2 after 8 (batch 3)."""
    import _tiny_models as tiny

    model = tiny.llama4()
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    return model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, other


@pytest.mark.slow
def test_a_guard_on_a_hint_outside_the_classes_is_refused_by_the_module_and_the_line_that_took_it() -> None:
    """Issue 31, Llama 4's decode step with its decoder layers behind operators: every output matches eager on both
    examples (|d| 0), but the chunked attention's mask, made in the Llama4TextModel's own forward, asks its sliding
    cache layer whether it is full (``cumulative_length >= sliding_window``, 16): a guard on the past length, a hint
    of AdditionalInputs, which torch.export keeps, and the program refuses 16 past tokens, which eager runs. The
    refusal names the dimension, the module and the line that took the guard, and torch's fix; that fix, a named
    Dim up to 15, gives an export that passes."""
    from transformers.models.llama4.modeling_llama4 import Llama4TextDecoderLayer

    model, args, kwargs, other = _llama4_step()
    with pytest.raises(ExportMismatchError) as failed:
        export_piece_by_piece(model, args, kwargs, dynamic_shapes=other, classes=Llama4TextDecoderLayer)
    report = failed.value.report
    assert report.root.max_abs_diff == 0 and all(o.passed for o in report.root.outputs)  # no value differs
    assert len(report.refused) == 1 and report.refused[0].startswith(
        "at past.layers.0.cumulative_length dim 0=16 (the dimensions that move with it at 15) the program fails where "
        "eager runs: AssertionError: Guard failed: tensors_3.size()[0] <= 15"
    )
    first = str(failed.value).splitlines()[0]
    assert first.startswith(
        "export_piece_by_piece: the program of the Llama4ForCausalLM refuses sizes of the declared ranges that eager "
        "runs, as model (Llama4TextModel), not behind an operator with classes=(Llama4TextDecoderLayer), guards "
        "past.layers.0.keys dim 2, declared by a hint (Dim.DYNAMIC, Dim.AUTO, or AdditionalInputs): guard "
        "past_layers_0_keys_dim_2 < 16 is false at past_layers_0_keys_dim_2=16, taken at transformers/cache_utils.py:"
    )
    assert " in get_mask_sizes; " in first
    assert first.endswith(
        "(torch's suggested fix: past_layers_0_keys_dim_2 = Dim('past_layers_0_keys_dim_2', max=15)), add "
        "Llama4TextModel to classes, or pass classes=None to find the cut automatically"
    )
    assert failed.value.result.report.notes[-1] == first.partition("that eager runs, as ")[2]
    batch, past = Dim("batch", max=8), Dim("past", max=15)
    kv = {0: batch, 2: past}
    named = {"input_ids": {0: batch, 1: Dim("seq", max=16)}, "cache": [kv, kv, {0: past}, kv, kv, {0: past}]}
    result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=named, classes=Llama4TextDecoderLayer)
    assert result.report.passed and result.report.refused == []
