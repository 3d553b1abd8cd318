"""export_piece_by_piece on small hand-made models: where the cut falls, what the result is, what the user keeps.

Each model hides one thing torch.export refuses at a known place (a data-dependent branch three levels down, a
plain function called from a forward, a guard that breaks a declared dynamic range, the model's own forward).
The tests check that exactly the module to blame goes behind an operator, that the program equals eager on both
sides of the branch and at sizes the example did not have, and that the model, its hooks and its parameters are
left as they were.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import PieceByPieceExportError, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import CallStructureError  # noqa: E402
from piece_by_piece_serialize.export import FAILURE_KINDS, PieceStatus  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=64)
Branchy, _deep = toy.Branchy, toy.deep


def _snapshot(model: torch.nn.Module) -> Any:
    return (
        [(n, id(m), type(m), dict(m._forward_hooks), dict(m._forward_pre_hooks)) for n, m in model.named_modules()],
        {k: (id(v), v.clone()) for k, v in model.state_dict(keep_vars=True).items()},
    )


def _same_snapshot(a: Any, b: Any) -> None:
    assert a[0] == b[0]
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        assert a[1][k][0] == b[1][k][0] and torch.equal(a[1][k][1], b[1][k][1]), k


def test_a_data_dependent_branch_three_levels_down_cuts_exactly_that_module() -> None:
    model = _deep()
    before = _snapshot(model)
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.report.behind_operators == ["top.mid.leaf"]
    statuses = {p: piece.status for p, piece in result.pieces.items()}
    assert statuses == {
        "top": PieceStatus.CHILDREN_BEHIND_OPERATORS,
        "top.mid": PieceStatus.CHILDREN_BEHIND_OPERATORS,
        "top.mid.before": PieceStatus.IN_GRAPH,
        "top.mid.leaf": PieceStatus.BEHIND_OPERATOR,
        "top.head": PieceStatus.IN_GRAPH,
        "norm": PieceStatus.IN_GRAPH,
    }
    leaf = result.pieces["top.mid.leaf"]
    assert leaf.module_class is Branchy and leaf.failure is not None and leaf.failure.kind == "data-dependent guard"
    assert leaf.max_abs_diff == 0.0 and leaf.checked_calls == 2 and leaf.operator is not None
    calls = [n for n in result.program.graph.nodes if n.op == "call_function" and str(n.target).startswith(leaf.operator.replace("::", "."))]
    assert len(calls) == 1
    runnable = result.module()
    with torch.no_grad():
        for x in (torch.randn(5, 4) + 3, torch.randn(7, 4) - 3):  # one input per side of the branch
            h = model.top.mid.leaf.lin(model.top.mid.before(x))
            assert bool(h.sum() > 0) == (x.mean() > 0)
            torch.testing.assert_close(runnable(x), model(x), rtol=0, atol=0)
    _same_snapshot(before, _snapshot(model))


def _helper(h: Any) -> Any:
    # data-dependent: a plain function, not a module
    return h * 2 if h.sum() > 0 else h - 1


class CallsAFunction(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return _helper(self.lin(x))


class FunctionModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.inner = CallsAFunction()

    def forward(self, x: Any) -> Any:
        return self.inner(self.first(x)).relu()


def test_a_failing_plain_function_is_cut_at_the_smallest_module_that_calls_it() -> None:
    torch.manual_seed(0)
    model = FunctionModel().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.report.behind_operators == ["inner"]
    assert result.pieces["first"].status is PieceStatus.IN_GRAPH
    for x in (torch.randn(4, 4) * 5, -torch.randn(6, 4) * 5):
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


class Chunked(torch.nn.Module):
    """Right for any length, but its code branches on the length: a guard the declared range breaks."""

    def forward(self, x: Any) -> Any:
        if x.shape[1] > 8:
            return torch.cat([x[:, :8] * 2, x[:, 8:] * 3], 1)
        return x * 2


class WithChunks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)
        self.chunks = torch.nn.ModuleList([Chunked(), Chunked()])

    def forward(self, x: Any) -> Any:
        h = self.proj(x)
        return self.chunks[1](self.chunks[0](h)) + h


def test_a_guard_that_breaks_a_declared_range_cuts_the_module_that_added_it() -> None:
    model = WithChunks().eval()
    seq = torch.export.Dim("seq", min=2, max=32)
    with pytest.raises(Exception, match="seq"):  # the negative control: torch.export refuses it whole
        torch.export.export(model, (torch.randn(2, 5, 3),), dynamic_shapes=({1: seq},), strict=False)
    result = export_piece_by_piece(model, (torch.randn(2, 5, 3),), dynamic_shapes=({1: seq},))
    assert result.report.behind_operators == ["chunks.0", "chunks.1"]
    failure = result.pieces["chunks.0"].failure
    assert failure is not None and failure.kind == "dynamic dimension constraint violated"
    assert "seq" in failure.detail and "false at seq=" in failure.detail
    # the second module's guard is the first's, which the shape environment holds once: it shows in the next try
    assert [a.cut for a in result.report.attempts] == [("chunks.0",), ("chunks.1",), ()]
    assert result.report.attempts[2].failure is None
    for n in (2, 8, 9, 31):
        x = torch.randn(2, n, 3)
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)
    assert "chunks.0-1 (x2)" in str(result.report)


class OwnCode(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        h = self.lin(x)
        return h if h.sum() > 0 else -h  # in the model's own forward: no submodule to cut


def test_a_failure_in_the_models_own_forward_is_an_error_with_the_report() -> None:
    with pytest.raises(PieceByPieceExportError, match="model's own forward, outside its submodules") as info:
        export_piece_by_piece(OwnCode().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    report = info.value.report
    assert report is not None and report.attempts[0].failure.kind == "data-dependent guard"
    assert report.behind_operators == []


def test_the_report_of_a_failed_export_says_nothing_of_checks_that_never_ran() -> None:
    # classes= puts lin behind an operator and the model's own branch fails: no piece was checked, and the report
    # must not give a reason for one piece's check not running (it said "no call of it was recorded")
    with pytest.raises(PieceByPieceExportError, match="the rest of the model fails to export in the model") as info:
        export_piece_by_piece(OwnCode().eval(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=torch.nn.Linear)
    report = info.value.report
    assert report is not None and report.behind_operators == ["lin"]
    assert report.pieces["lin"].not_checked is None and "not run" not in str(report) and "not run" not in report.to_markdown()


def test_a_model_that_exports_whole_has_no_piece_and_equals_eager() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.pieces == {} and result.report.behind_operators == [] and len(result.report.attempts) == 1
    assert not any(n.op == "call_function" and str(n.target).startswith("pbp_") for n in result.program.graph.nodes)
    for batch in (1, 2, 9):
        x = torch.randn(batch, 4)
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)


def test_two_exports_in_one_process_have_their_own_operators_and_free_them() -> None:
    first = export_piece_by_piece(_deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    second = export_piece_by_piece(_deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    a, b = first.pieces["top.mid.leaf"].operator, second.pieces["top.mid.leaf"].operator
    assert a != b and a.endswith("::top__mid__leaf") and b.endswith("::top__mid__leaf")
    assert torch._C._jit_get_schemas_for_operator(a) and torch._C._jit_get_schemas_for_operator(b)
    x = torch.randn(4, 4)
    torch.testing.assert_close(first.module()(x), second.module()(x), rtol=0, atol=0)
    first.close()
    assert not torch._C._jit_get_schemas_for_operator(a) and torch._C._jit_get_schemas_for_operator(b)
    namespace = b.partition("::")[0]
    del second
    import gc

    gc.collect()
    assert not any(name.startswith(namespace + "::") for name in torch._C._dispatch_get_all_op_names())


def test_the_report_reads_and_serializes() -> None:
    result = export_piece_by_piece(_deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    text = str(result.report)
    lines = text.splitlines()
    assert lines[0].startswith("Deep exported piece by piece in ") and "1 piece behind operators" in lines[0]
    assert lines[1].startswith("  attempt 1: failed in ") and "data-dependent guard" in lines[1]
    assert lines[1].endswith("now behind operators: top.mid.leaf")
    assert lines[2].startswith("  attempt 2: exported in ")
    leaf_line = next(line for line in lines if line.lstrip().startswith("leaf "))
    assert "Branchy" in leaf_line and "behind an operator" in leaf_line and "data-dependent guard" in leaf_line
    data = json.loads(json.dumps(result.report.to_dict()))
    assert data["behind_operators"] == ["top.mid.leaf"]
    assert data["tree"]["children"][0]["path"] == "top" and data["tree"]["status"] == "children behind operators"
    assert data["attempts"][0]["failure"]["kind"] in FAILURE_KINDS and data["attempts"][1]["failure"] is None
    assert data["tree"]["children"][0]["children"][0]["children"][1]["class"].endswith(".Branchy")


def test_bad_arguments_are_refused_before_any_export() -> None:
    model = _deep()
    x = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"expected a torch\.nn\.Module"):
        export_piece_by_piece(lambda x: x, (x,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="args must be a tuple"):
        export_piece_by_piece(model, x)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="does not match the model's forward"):
        export_piece_by_piece(model, (x, x), dynamic_shapes=({0: BATCH}, None))
    with pytest.raises(PieceByPieceExportError, match="names \\['y'\\], which the example does not pass"):
        export_piece_by_piece(model, (x,), dynamic_shapes={"y": {0: BATCH}})
    with pytest.raises(PieceByPieceExportError, match="2 is not a dimension of a 2-d tensor"):
        export_piece_by_piece(model, (x,), dynamic_shapes=({2: BATCH},))
    with pytest.raises(PieceByPieceExportError, match="has 2 entries where the example passes 1"):
        export_piece_by_piece(model, (x,), dynamic_shapes=({0: BATCH}, None))
    with pytest.raises(PieceByPieceExportError, match=r"not a torch\.export\.Dim"):
        export_piece_by_piece(model, (x,), dynamic_shapes=({0: "batch"},))


def test_classes_that_match_nothing_are_an_error_listing_the_models_classes() -> None:
    with pytest.raises(ValueError, match=r"export_piece_by_piece: no submodule of the model is an instance of Conv2d; the model's submodules are Top \(x1\), Mid \(x1\), Linear \(x3\), Branchy \(x1\), LayerNorm \(x1\)"):
        export_piece_by_piece(_deep(), (torch.randn(3, 4),), classes=torch.nn.Conv2d)


def test_classes_by_name_put_every_instance_behind_an_operator() -> None:
    model = _deep()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes="Branchy")
    assert result.report.behind_operators == ["top.mid.leaf"] and result.report.mode == "classes"
    assert result.pieces["top.mid.leaf"].own_export_failure is not None  # it cannot be exported alone either
    assert result.pieces["top.mid.leaf"].program is None
    x = torch.randn(6, 4)
    torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)
    with pytest.raises(PieceByPieceExportError, match=r"the rest of the model fails to export in top\.mid\.leaf"):
        export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=torch.nn.LayerNorm)


def test_the_runnable_module_refuses_another_call_structure() -> None:
    model = _deep()
    result = export_piece_by_piece(model, (torch.randn(3, 4),))
    with pytest.raises(CallStructureError, match=r"^PieceByPieceExport.module\(\): positional argument 0 was a Tensor in the example, here a "):
        result.module()([torch.randn(3, 4)])


def test_progress_is_logged_at_info_for_those_who_turn_it_on(caplog: Any) -> None:
    caplog.set_level("INFO", logger="piece_by_piece_serialize")
    export_piece_by_piece(_deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},)).close()
    lines = [r.getMessage() for r in caplog.records if r.name == "piece_by_piece_serialize.export"]
    lines = [line for line in lines if not line.endswith(" s so far")]  # a slow machine's heartbeats: by time, not by step
    assert lines[0] == "attempt 1: torch.export with 0 pieces behind operators"
    assert lines[1].startswith("attempt 1: failed in ") and lines[1].endswith("(data-dependent guard); next behind operators: top.mid.leaf")
    assert lines[2] == "attempt 2: torch.export with 1 piece behind operators"
    assert lines[3].startswith("attempt 2: exported in ")
    assert lines[-1].startswith("Deep exported piece by piece in ") and lines[-1].endswith(": 1 piece behind operators")


def _table_cells(line: str) -> int:
    return line.replace("\\|", "").count("|") - 1


def test_the_markdown_report_tells_the_story_of_each_cut_piece() -> None:
    result = export_piece_by_piece(_deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    page = result.report.to_markdown()
    result.close()
    lines = page.splitlines()
    assert lines[0] == "# Deep exported piece by piece"
    for heading in ("## Attempts", "## Examples", "## Modules", "## `top.mid.leaf`"):
        assert heading in lines
    assert "| pieces behind operators | 1 |" in lines and "| max \\|diff\\| against eager | 0 on 2 examples |" in lines
    attempts = lines[lines.index("## Attempts") + 2 :]
    assert attempts[2].startswith("| 1 | failed: data-dependent guard: ") and attempts[2].endswith(" | top.mid.leaf |")
    assert attempts[3].startswith("| 2 | exported | ")
    leaf = next(line for line in lines if "`leaf`" in line)
    assert "Branchy | behind an operator | 0 |" in leaf and leaf.startswith("| " + "\u00a0" * 12 + "`leaf`")
    story = "\n".join(lines[lines.index("## `top.mid.leaf`") :])
    assert "- class: `_toy_models.Branchy`" in story and "- cut because: data-dependent guard" in story
    assert "GuardOnDataDependentSymNode" in story and "on 2 recorded calls" in story
    for block in (lines[i : i + 3] for i, line in enumerate(lines) if line.startswith("| ") and lines[i - 1] == ""):
        assert _table_cells(block[0]) == _table_cells(block[1]) == _table_cells(block[2])  # header, rule, first row

