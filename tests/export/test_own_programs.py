"""Automatic mode exports each piece it cuts alone, from its recorded calls (issue 31): a piece cut for a reason
that held only in the model's context gets a program of its own, which a saved archive runs with nothing else; a
program a size of the declared range breaks is dropped, saying where; a piece cut for a guard of its own code is
not exported alone; the report says per piece which."""

from __future__ import annotations

import inspect
import os
import linecache
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import FAILURE_KINDS  # noqa: E402

Dim = torch.export.Dim


class Rows(torch.nn.Module):
    """Branches on how many rows it is given: a size alone, but a data-dependent count in the model."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, y: Any) -> Any:
        return self.lin(y) * 2 if y.shape[0] > 1 else y - 1


class Select(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rows = Rows()

    def forward(self, x: Any) -> Any:
        keep = (x[:, 0] > -1e9).nonzero().squeeze(1)  # every row, but torch.export cannot know how many
        return self.rows(x[keep]).sum(0)


class Chunked(torch.nn.Module):
    """A guard on the length in its own code, as a chunked attention's: a second chunk past 8."""

    def forward(self, x: Any) -> Any:
        return x.cumsum(1) if x.shape[1] <= 8 else x.cumsum(1) - x[:, :8].sum(1, keepdim=True)


class WithChunked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.chunked = Chunked()

    def forward(self, x: Any) -> Any:
        return self.chunked(x * 2)


def _own_column(report: Any) -> list[str]:
    """The end of each line of the report's tree that is a piece: what it says of the piece's own program."""
    return [line.rpartition("; ")[2] for line in str(report).splitlines() if "behind an operator" in line]


def test_a_piece_cut_only_in_the_models_context_gets_its_own_program_and_the_archive_loads_alone(tmp_path: Path) -> None:
    model = Select().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch", min=2, max=64)},))
    piece = result.pieces["rows"]
    assert piece.failure is not None and piece.failure.kind == "data-dependent guard"  # in the model: a count u0
    assert piece.program is not None and piece.own_export_failure is None  # alone: a size, exported (before: None)
    assert _own_column(result.report) == ["own program"]
    assert "- own program: exported alone" in result.report.to_markdown()
    assert piece.to_dict()["has_program"] is True and piece.to_dict()["own_export_failure"] is None
    result.save(tmp_path / "rows.pt2")
    result.close()
    # a fresh process, no class of the model imported: the piece is its program (before: 'stored without a program')
    code = "import torch; from piece_by_piece_serialize import load_piece_by_piece as l; print(l('rows.pt2')(torch.ones(5, 4)).tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    with torch.no_grad():
        assert out.stdout.strip() == str(model(torch.ones(5, 4)).tolist())


def test_an_own_program_a_size_of_the_declared_range_breaks_is_dropped_saying_where() -> None:
    # alone, from its calls at 3 and 4 rows, its program computes the branch of more than one row, and torch keeps
    # no guard that refuses one row: at batch=1 it silently differs from its module (kept, an archive would too)
    model = Select().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch", min=1, max=64)},))
    piece = result.pieces["rows"]
    assert piece.program is None and piece.own_export_failure is not None and piece.own_export_failure.kind in FAILURE_KINDS
    assert piece.own_export_failure.message.startswith(
        "its program, exported alone from its recorded calls, differs from its module at batch=1, a size of the declared "
        "range: max |diff| "
    )
    assert _own_column(result.report)[0].startswith("no own program: other: its program, exported alone")
    with torch.no_grad():  # the piece still runs its module behind its operator, both branches
        for n in (1, 5):
            x = torch.randn(n, 4)
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


def test_a_piece_cut_for_a_guard_of_its_own_code_is_not_exported_alone() -> None:
    model = WithChunked().eval()
    result = export_piece_by_piece(model, (torch.randn(2, 6),), dynamic_shapes=({1: Dim("seq", min=2, max=32)},))
    piece = result.pieces["chunked"]
    assert piece.failure is not None and piece.failure.kind == "dynamic dimension constraint violated"
    assert piece.program is None and piece.own_export_failure is not None
    assert piece.own_export_failure.message == (
        "not exported alone: the guard that cut it is in its own code"
    )
    line = next(line for line in str(result.report).splitlines() if "behind an operator" in line)
    assert "; no own program: dynamic dimension constraint violated: not exported alone" in line
    # it branches on its sizes: programs by size instead (Note [programs by size]), the end of its line
    assert piece.by_size is not None and line.endswith(piece.by_size) and "programs by size (from calls at" in piece.by_size
    with torch.no_grad():
        for n in (3, 20):
            x = torch.randn(2, n)
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


class Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.lin(x)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner, self.norm = Inner(), torch.nn.LayerNorm(4)

    def forward(self, x: Any) -> Any:
        return self.norm(self.inner(x))


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x: Any) -> Any:
        for block in self.blocks:
            x = block(x)
        return x


def test_the_markdown_page_has_a_section_for_the_pieces_of_folded_modules_and_says_which_program_each_runs() -> None:
    # the tree folds blocks.0-2 into one line; the page's section named blocks.0.inner alone, "exported alone",
    # and said nothing of blocks.1.inner and blocks.2.inner, which run its program
    torch.manual_seed(0)
    result = export_piece_by_piece(Stack().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},), classes="Inner")
    assert result.report.behind_operators == ["blocks.0.inner", "blocks.1.inner", "blocks.2.inner"]
    page = result.report.to_markdown()
    assert "## `blocks.0-2.inner (x3)`" in page and "## `blocks.0.inner`" not in page
    assert "- operators: `" in page and "and 2 more, one per module" in page
    assert "- own programs: the one exported from `blocks.0.inner` runs blocks.0-2.inner (x3)" in page


class Halves(torch.nn.Module):
    """A guard on the length in its own code: doubles from 6 on."""

    def forward(self, x: Any) -> Any:
        return x * 2 if x.shape[1] > 5 else x - 1


class Gated(torch.nn.Module):
    """A guard on the length in its own code, and Halves inside it with another: one attempt blames both."""

    def __init__(self) -> None:
        super().__init__()
        self.halves, self.lin = Halves(), torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        y = self.halves(self.lin(x))
        return y.cumsum(1) if x.shape[1] <= 8 else y + 1


class WithGated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gated = Gated()

    def forward(self, x: Any) -> Any:
        return self.gated(x) * 3


def test_a_module_blamed_with_one_inside_it_goes_behind_one_operator_whose_calls_are_checked() -> None:
    # both guards fail in attempt 1; both modules went behind operators, the inner one inside the outer one, and
    # the calls of neither were recorded: the report said "|d| 0" for gated, checked on 0 calls
    torch.manual_seed(0)
    model = WithGated().eval()
    result = export_piece_by_piece(model, (torch.randn(2, 6, 4),), dynamic_shapes=({1: Dim("seq", min=2, max=32)},))
    assert result.report.attempts[0].cut == ("gated",)
    assert result.report.behind_operators == ["gated"]
    piece = result.pieces["gated"]
    assert piece.checked_calls == 2 and piece.max_abs_diff == 0.0 and piece.passed is True  # one call per example
    assert piece.not_checked is None and piece.to_dict()["not_checked"] is None
    with torch.no_grad():
        for n in (3, 6, 20):
            x = torch.randn(2, n, 4)
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


def test_a_piece_behind_an_operator_with_no_recorded_call_is_reported_not_checked_rather_than_equal() -> None:
    # a difference of 0 on 0 calls is a number computed from nothing: each form of the report says the check
    # did not run, and why
    from piece_by_piece_serialize.export import ExportReport, Piece, PieceStatus

    root = Piece("", WithGated, PieceStatus.CHILDREN_BEHIND_OPERATORS, max_abs_diff=0.0, checked_calls=1, passed=True)
    piece = Piece("gated", Gated, PieceStatus.BEHIND_OPERATOR, "pbp_x::gated", checked_calls=0, not_checked="no call of it was recorded")
    report = ExportReport(WithGated, "automatic", root, {"gated": piece}, {"": ["gated"]})
    line = next(line for line in str(report).splitlines() if "behind an operator" in line)
    assert "not run: no call of it was recorded" in line and "|d| 0" not in line
    assert "- checked through its operator against its module: not run: no call of it was recorded" in report.to_markdown()
    assert report.to_dict()["tree"]["children"][0]["not_checked"] == "no call of it was recorded"


def test_minimaxs_lightning_attention_is_cut_without_its_norm_and_checked_on_its_calls() -> None:
    # MiniMax's lightning attention was cut with its norm inside it, and the calls of neither were recorded (a
    # piece in a piece): exporting it alone raised IndexError, then the report said |d| 0 on 0 calls
    pytest.importorskip("transformers")
    import _tiny_models as tiny

    model = tiny.minimax()
    dims = {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=32)}
    result = export_piece_by_piece(model, (tiny.ids(6, 2),), {"use_cache": False}, dynamic_shapes={"input_ids": dims})
    assert result.report.behind_operators == ["model.layers.0.self_attn", "model.layers.2.self_attn"]
    for path in result.report.behind_operators:
        piece = result.pieces[path]
        assert piece.checked_calls == 2 and piece.max_abs_diff is not None and piece.passed is True
        own = piece.own_export_failure
        assert piece.program is None and own is not None
        assert own.message == "not exported alone: the guard that cut it is in its own code"
    x = tiny.ids(11, 3, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x, use_cache=False).logits, model(x, use_cache=False).logits, rtol=0, atol=1e-5)


def test_a_jamba_mamba_layer_whose_code_specializes_its_sequence_gets_programs_by_size() -> None:
    # with classes=, Jamba's Mamba layer is exported alone with its sequence dynamic (it differs between its calls);
    # its mixer's reference scan loops over the sequence in Python (modeling_jamba.py, mamba_selective_scan), so
    # torch refuses: "your code specialized it to be a constant (6)". Before, the layer then had no program at all
    # (to_onnx refused it, the load needed its classes); automatic mode already gave its mixer programs by size
    pytest.importorskip("transformers")
    import _tiny_models as tiny

    model = tiny.jamba()
    classes = tuple(dict.fromkeys(type(layer) for layer in model.model.layers))
    dims = {0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=12)}
    result = export_piece_by_piece(model, (tiny.ids(6, 2),), {"use_cache": False}, dynamic_shapes={"input_ids": dims}, classes=classes)
    assert result.report.behind_operators == ["model.layers.0", "model.layers.1"]
    piece = result.pieces["model.layers.0"]
    own = piece.own_export_failure
    assert piece.program is None and own is not None and own.kind == "dynamic dimension constraint violated"
    assert "specialized it to be a constant (6)" in own.text
    # said by name: the inputs, and the line of the model's code torch recorded for the guard (before: the flat
    # inputs by their place, L['tensors'][17].size()[1], and no line)
    # and first, the layer's submodule whose code that is (the function belongs to no module): the one whose
    # translation can hold the loop, behind an operator of its own (before: not named)
    assert own.detail.startswith("specialized to 6 in its submodule mamba (JambaMambaMixer) by transformers/models/jamba/modeling_jamba.py:")
    assert own.detail.endswith(" (in mamba_selective_scan): hidden_states dim 1")
    assert own.inside == "mamba (JambaMambaMixer)"
    file, _, line = own.where.rpartition(":")
    assert own.detail.split(" ")[9] == f"transformers/models/jamba/modeling_jamba.py:{line}" and file.endswith("modeling_jamba.py")
    assert linecache.getline(file, int(line)).strip() == "for index in range(seq_len):"
    # a program per sequence length, each checked against the layer on its call: the examples' 6 and 8 tokens and
    # the points of the declared range up to them, 2 and 7 (before: None). Each holds one length, so the range's
    # end, 12, gets none: a program there would hold 12 alone, at a cost that grows with it (Note [one size per
    # program]; a range declared to 4,096 unrolled 4,096 steps)
    assert piece.by_size == (
        "4 programs by size (from calls at 2x6x32 1x6; 3x8x32 1x8; 2x2x32 1x2; 2x7x32 1x7); none made at seq=12 (each "
        "program holds one size of hidden_states dim 1, as a loop over it unrolled in the trace does, and one past its "
        "calls' largest (8) would cost more with each step): calls at those sizes are refused (a translation of its "
        "submodule mamba (JambaMambaMixer)'s, that submodule behind an operator of its own in its place (classes= its "
        "class) can hold the loop: docs/onnx.md, 'A loop in a translation')"
    )  # which tests/onnx_export/test_loop_translations.py does: classes=JambaMambaMixer, its translation given
    assert piece.passed is True and result.report.passed is True
    x = tiny.ids(11, 3, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x, use_cache=False).logits, model(x, use_cache=False).logits, rtol=0, atol=1e-5)
    result.close()


class Scan(torch.nn.Module):
    """A running sum over the sequence in a Python loop, as a Mamba mixer's reference scan: traced, the loop is
    unrolled, so a program computes one length only."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        state, out = torch.zeros_like(x[:, 0]), []
        for i in range(x.shape[1]):
            state = state * 0.5 + self.lin(x[:, i])
            out.append(state)
        return torch.stack(out, 1)


class Scans(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Scan(), Scan()])

    def forward(self, x: Any) -> Any:
        return self.layers[1](self.layers[0](x))


def test_identical_pieces_whose_code_specializes_a_dimension_share_programs_by_size(tmp_path: Any) -> None:
    # layer 1 takes layer 0's failed export alone (Note [shared programs]) and, as layer 0, programs by size: its
    # calls at each length checked on layer 0's programs (before: neither had any)
    torch.manual_seed(0)
    model = Scans().eval()
    result = export_piece_by_piece(model, (torch.randn(2, 3, 4),), dynamic_shapes=({1: Dim("seq", min=2, max=6)},), classes=Scan)
    failures = [result.pieces[f"layers.{i}"].own_export_failure for i in range(2)]
    assert all(f is not None and f.kind == "dynamic dimension constraint violated" for f in failures)
    assert failures[0] == failures[1]
    loop = inspect.getsourcelines(Scan.forward)[1] + 2  # the line of its loop
    here = os.path.relpath(__file__)  # a file under the working directory is named from it
    assert failures[0].detail == f"specialized to 3 by {__file__ if here.startswith('..') else here}:{loop} (in forward): x dim 1"
    assert failures[0].where == f"{__file__}:{loop}"
    # a program per length of its calls (3 and 4) and of the range's points up to them (2); each holds its length
    # alone, so the range's end, 6, gets none (Note [one size per program]: before, one, at a cost that grows with it)
    sized = [result.pieces[f"layers.{i}"].by_size for i in range(2)]
    assert sized[0] == sized[1] == (
        "3 programs by size (from calls at 2x3x4; 2x4x4; 2x2x4); none made at seq=6 (each program holds one size of x "
        "dim 1, as a loop over it unrolled in the trace does, and one past its calls' largest (4) would cost more "
        "with each step): calls at those sizes are refused (a translation of its operator can hold the loop: docs/onnx.md, "
        "'A loop in a translation')"
    )
    assert result.report.passed is True
    report = result.report.to_markdown()  # the programs by size load without the class: it is asked for only outside them
    assert "- by size: 3 programs by size (from calls at 2x3x4; 2x4x4; 2x2x4); none made at seq=6" in report
    assert "loading a saved artifact needs its class, or an instance" not in report
    with torch.no_grad():
        for n in (2, 5):
            x = torch.randn(2, n, 4)
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)
    result.save(tmp_path / "scans.pt2")
    loaded = load_piece_by_piece(tmp_path / "scans.pt2")
    with torch.no_grad():
        x = torch.randn(2, 4, 4)  # a length of the calls: its program
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
        with pytest.raises(ValueError, match=r"layers\.0 has no program for these input sizes \(2x6x4\)") as refused:
            loaded(torch.randn(2, 6, 4))  # the range's end: refused by name
    # and why by each program, which says the lengths there are programs for (the input x follows the 2 weights)
    assert (
        "(1: (in2.size(1) == 3) is false at in2.size(1)=6; 2: (in2.size(1) == 4) is false at in2.size(1)=6; 3: (in2.size(1) "
        "== 2) is false at in2.size(1)=6; inputs numbered from 0: its 2 weights, then these)"
    ) in str(refused.value)


class Picker(torch.nn.Module):
    """Picks the two largest features of each row with grad off, as LongCat-Flash's router picks its experts."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @torch.no_grad()
    def pick(self, x: Any) -> Any:
        return x.topk(2, dim=-1)[1]

    def forward(self, x: Any) -> Any:
        return self.lin(x).gather(1, self.pick(x))


class WithPicker(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.picker = Picker()

    def forward(self, x: Any) -> Any:
        return self.picker(x * 2) + 1


@pytest.mark.parametrize("classes", [None, "Picker"], ids=["whole", "piece"])
def test_a_model_that_turns_grad_off_inside_itself_saves_an_archive_its_load_accepts(classes: Any, tmp_path: Path) -> None:
    # exported with grad on, the program (the model's, or the piece's own) held torch's wrap_with_set_grad_enabled
    # and its nested graph: save wrote it, and the load refused the file ('"" is not an ASCII identifier')
    from piece_by_piece_serialize import load_piece_by_piece

    torch.manual_seed(0)
    model = WithPicker().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},), classes=classes)
    programs = [result.program] + [p.program for p in result.pieces.values() if p.program is not None]
    assert len(programs) == (1 if classes is None else 2)
    for program in programs:
        assert not any(n.op == "get_attr" for n in program.graph.nodes)  # no nested graph
    result.save(tmp_path / "picker.pt2")
    loaded = load_piece_by_piece(tmp_path / "picker.pt2")
    with torch.no_grad():
        for n in (1, 7):
            x = torch.randn(n, 4)
            torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
    result.close()


class Signed(torch.nn.Module):
    """Branches on the sum of its output against ``threshold``: a data-dependent branch, alone as in the model."""

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.lin, self.threshold = torch.nn.Linear(4, 4), threshold

    def forward(self, x: Any) -> Any:
        h = self.lin(x)
        return h * 2 if h.sum() > self.threshold else h - 1


class Signs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Signed(0.0), Signed(0.0), Signed(0.0), Signed(0.5)])

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


def test_identical_pieces_that_fail_alone_share_one_failed_export(monkeypatch: Any) -> None:
    # layers 0-2 are identical (class, weights' shapes, threshold, calls); layer 3 reads another threshold. Each
    # of the four was exported alone, and failed the same way: now layers 1 and 2 take layer 0's failure
    exports: list[Any] = []
    export = torch.export.export

    def counted(*args: Any, **kwargs: Any) -> Any:
        exports.append(args[0])
        return export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counted)
    torch.manual_seed(0)
    model = Signs().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("batch")},))
    assert result.report.behind_operators == ["layers.0", "layers.1", "layers.2", "layers.3"]
    assert len(exports) - len(result.report.attempts) == 2  # layer 0 and layer 3 alone (before: all four)
    failures = [result.pieces[f"layers.{i}"].own_export_failure for i in range(4)]
    assert all(f is not None and f.kind == "data-dependent guard" for f in failures)
    assert failures[1] == failures[2] == failures[0]
    assert _own_column(result.report)[0] == "no own program: the same failure alone"
    with torch.no_grad():
        for n in (1, 5):
            x = torch.randn(n, 4)
            torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)



def test_a_programs_runnable_is_made_once_kept_to_that_program_and_still_checks_its_inputs() -> None:
    import weakref

    from piece_by_piece_serialize.export._alone import runnable_of

    program = torch.export.export(torch.nn.Linear(4, 4), (torch.ones(2, 4),))
    runnables: dict[int, Any] = {}
    runnable = runnable_of(program, runnables)
    assert runnable_of(program, runnables) is runnable
    for _ in range(2):  # on every call, not only the first: _by_size.judge relies on it to refuse other sizes
        with pytest.raises(Exception, match="Guard failed"):
            runnable(torch.ones(3, 4))
    # what the cache holds under the id of a program freed since, whose id this program now has: not for it
    other = torch.export.export(torch.nn.Linear(4, 4), (torch.ones(2, 4),))
    runnables[id(program)] = (weakref.ref(other), "the other program's runnable")
    fresh = runnable_of(program, runnables)
    assert fresh is not runnable and fresh != "the other program's runnable"
    assert torch.equal(fresh(torch.ones(2, 4)), program.module()(torch.ones(2, 4)))
