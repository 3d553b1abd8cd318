"""A program's domain (Note [domains]) against torch's own check of the program's guards and ranges, in Python
and in onnxruntime, over every size of a grid: counted, not sampled."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize.domains import DomainError, domain_of  # noqa: E402

# the flat call of a piece as the export makes it: its weights, then its tensors, all one varargs
DYNAMIC = torch.export.Dim.DYNAMIC
SIZES = [(batch, seq) for batch in (1, 2, 3) for seq in range(1, 41)]


class _Flat(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.piece = toy.PadToFour()

    def forward(self, *tensors: Any) -> Any:
        return (self.piece(tensors[1]) + tensors[0].sum(),)


def _program(seq: int) -> Any:
    args = (torch.randn(8), torch.randn(2, seq, 8))
    hints = {"tensors": (None, {0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.DYNAMIC})}
    return torch.export.export(_Flat(), args, dynamic_shapes=hints, strict=False)


def _torch_accepts(runnable: Any, batch: int, seq: int) -> bool:
    try:
        runnable(torch.randn(8), torch.randn(batch, seq, 8))
    except AssertionError:  # "Guard failed: ..." from the program's _guards_fn
        return False
    except RuntimeError as exc:  # a size out of a symbol's range, or two sizes of one symbol that differ
        assert "Expected input" in str(exc) or "to be" in str(exc), exc
        return False
    return True


@pytest.mark.parametrize("seq", [3, 5, 16, 4])
def test_a_domain_holds_exactly_where_torch_runs_the_program(seq: int) -> None:
    program = _program(seq)
    domain = domain_of(program)
    runnable = program.module()
    ours = [domain.holds([(8,), (b, s, 8)]) for b, s in SIZES]
    theirs = [_torch_accepts(runnable, b, s) for b, s in SIZES]
    assert ours == theirs
    # the program's own example is in its domain, and the domain is not everything
    assert domain.holds([(8,), (2, seq, 8)]) and 0 < sum(ours) < len(SIZES)
    # every guard of the program is read (they come in as conditions), beside the shapes' and ranges'
    assert len(domain.conditions) > len(set(program._guards_code)) // 2


def test_the_same_domain_in_onnxruntime() -> None:
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    import numpy

    from piece_by_piece_serialize.domains._onnx import domain_nodes

    agree = 0
    for seq in (3, 5, 16, 4):
        domain = domain_of(_program(seq))
        nodes, out = domain_nodes(domain, ["w", "x"], "d_")
        inputs = [onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, ["n"]),
                  onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "s", "h"])]  # fmt: skip
        graph = onnx.helper.make_graph(nodes, "domain", inputs, [onnx.helper.make_tensor_value_info(out, onnx.TensorProto.BOOL, [])])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
        onnx.checker.check_model(model, full_check=True)
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        for b, s in SIZES:
            got = session.run(None, {"w": numpy.zeros(8, numpy.float32), "x": numpy.zeros((b, s, 8), numpy.float32)})[0]
            assert bool(got) == domain.holds([(8,), (b, s, 8)]), (seq, b, s)
            agree += 1
    assert agree == 4 * len(SIZES) == 480


def test_python_floor_division_and_remainder_by_zero_refuse() -> None:
    from piece_by_piece_serialize.domains import Const, Domain, Op, Size

    size = Size(0, 0)
    # (-7) // 2 == -4 and (-7) % 2 == 1 in Python; a divisor of zero refuses, as it does in ONNX
    floor = Domain((Op("eq", (Op("floordiv", (Op("neg", (size,)), Const(2))), Const(-4))),), 1)
    mod = Domain((Op("eq", (Op("mod", (Op("neg", (size,)), Const(2))), Const(1))),), 1)
    by_zero = Domain((Op("ge", (Op("mod", (Const(5), Op("sub", (size, Const(7))))), Const(0))),), 1)
    assert floor.holds([(7,)]) and mod.holds([(7,)])
    assert by_zero.holds([(8,)]) and not by_zero.holds([(7,)])
    assert not floor.holds([(7,), (1,)])  # not the program's number of inputs


def test_a_guard_this_reader_does_not_know_is_refused_by_name() -> None:
    program = _program(5)
    program._guards_code = [*program._guards_code, "L['tensors'][1].stride()[0] == 8"]
    with pytest.raises(DomainError, match="other than a size"):
        domain_of(program)
    program._guards_code = ["__import__('os').system('true')"]
    with pytest.raises(DomainError, match="does not know"):
        domain_of(program)


def test_a_size_that_first_appears_in_an_expression_is_solved_for_its_symbol() -> None:
    # the first input's size is 2*a + 1, the second's a: the symbol a is first seen inside an expression, which the
    # domain solves for it (as torch's check of the inputs does), then holds the second size to it; the range torch
    # gives the expression (5 to 129) is checked where it appears
    a = torch.export.Dim("a", min=2, max=64)

    class Twice(torch.nn.Module):
        def forward(self, *tensors: Any) -> Any:
            longer, shorter = tensors
            return (longer[1::2] + shorter,)

    args = (torch.randn(9), torch.randn(4))
    program = torch.export.export(Twice(), args, dynamic_shapes={"tensors": ({0: 2 * a + 1}, {0: a})}, strict=False)
    ours, theirs = _two_inputs(program, range(1, 40), range(1, 20))
    assert ours == theirs and sum(ours) == 18  # m = 2..19 with n = 2m + 1 (n < 40)


def _two_inputs(program: Any, first: range, second: range) -> tuple[list[bool], list[bool]]:
    """Whether the domain of a program of two one-dimensional inputs holds, and whether torch runs the program, at
    each pair of their lengths."""
    domain, runnable = domain_of(program), program.module()
    grid = [(n, m) for n in first for m in second]
    theirs = []
    for n, m in grid:
        try:
            runnable(torch.randn(n), torch.randn(m))
            theirs.append(True)
        except (AssertionError, RuntimeError):
            theirs.append(False)
    return [domain.holds([(n,), (m,)]) for n, m in grid], theirs


def test_floor_and_ceil_of_a_division_as_torch_prints_them() -> None:
    program = _program(5)
    base = [g for g in program._guards_code]
    program._guards_code = [*base, "math.floor(L['tensors'][1].size()[1] / 4) >= 2", "math.ceil(L['tensors'][1].size()[1] / 4) <= 3"]
    domain, plain = domain_of(program), domain_of(_program(5))
    for seq in range(1, 41):
        shapes = [(8,), (2, seq, 8)]
        assert domain.holds(shapes) == (plain.holds(shapes) and seq // 4 >= 2 and -(-seq // 4) <= 3), seq


def test_sizes_equal_to_constants_and_to_each_other_are_compared_as_vectors_in_onnxruntime_as_in_python() -> None:
    """Note [one check of the sizes]: ``size == constant`` and ``size == size`` are gathered and compared at once, in
    Python and in ONNX; with the others, over a grid of three inputs' sizes, and ranks checked in Python."""
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    import numpy

    from piece_by_piece_serialize.domains import Const, Domain, Op, Size
    from piece_by_piece_serialize.domains._onnx import domain_nodes

    conditions = (
        Op("eq", (Size(0, 1), Const(4))), Op("eq", (Size(2, 0), Const(3))),  # fixed
        Op("eq", (Size(1, 0), Size(0, 0))), Op("eq", (Size(2, 1), Size(1, 1))),  # pairs
        Op("le", (Size(0, 0), Const(5))),  # another
    )  # fmt: skip
    domain = Domain(conditions, 3, (Size(0, 0),), (2, 2, 2))
    nodes, out = domain_nodes(domain, ["a", "b", "c"], "d_")
    inputs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [f"{n}0", f"{n}1"]) for n in "abc"]
    graph = onnx.helper.make_graph(nodes, "domain", inputs, [onnx.helper.make_tensor_value_info(out, onnx.TensorProto.BOOL, [])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    held = total = 0
    for a0, a1, b0, b1, c0, c1 in itertools.product((3, 4, 6), (4, 5), (3, 4), (1, 2), (3, 2), (1, 2)):
        shapes = [(a0, a1), (b0, b1), (c0, c1)]
        feeds = {n: numpy.zeros(s, numpy.float32) for n, s in zip("abc", shapes, strict=True)}
        want = a1 == 4 and c0 == 3 and b0 == a0 and c1 == b1 and a0 <= 5
        assert bool(session.run(None, feeds)[0]) == domain.holds(shapes) == want, shapes
        held += want
        total += 1
    assert (held, total) == (4, 96)
    assert not domain.holds([(4, 4), (4, 1), (3, 1, 1)])  # a third dimension: no condition would see its size


def test_reading_keeps_the_conditions_that_read_a_later_input() -> None:
    from piece_by_piece_serialize.domains import Const, Domain, Op, Size

    weight, pair, tensor = Op("eq", (Size(0, 0), Const(4))), Op("eq", (Size(1, 0), Size(0, 0))), Op("le", (Size(1, 1), Const(8)))
    domain = Domain((weight, pair, tensor), 2, (Size(1, 1),), (1, 2))
    assert domain.reading(1).conditions == (pair, tensor) and domain.reading(0) == domain
    assert domain.reading(1).holds([(5,), (5, 8)]) and not domain.holds([(5,), (5, 8)])


def test_a_size_against_constants_is_one_range_in_python_as_the_conditions_say() -> None:
    """Note [one check of the sizes]: ``size <= c``, ``c < size`` and the like (the ranges) are merged into one range
    per size for :meth:`Domain.holds`; the same conditions, each hidden in an ``and`` of one (walked as an
    expression), agree with it over every size of a grid, in both orders of operands and with a size bounded twice."""
    from piece_by_piece_serialize.domains import Const, Domain, Op, Size

    a, b = Size(0, 0), Size(1, 0)
    conditions = (
        Op("le", (a, Const(7))), Op("gt", (a, Const(1))), Op("lt", (Const(2), a)), Op("ge", (Const(6), a)),  # 3 <= a <= 6
        Op("ge", (b, Const(2))), Op("lt", (b, Const(9))), Op("le", (Const(0), b)),  # 2 <= b <= 8
        Op("le", (a, b)),  # not a range: walked as an expression
    )  # fmt: skip
    ranges = Domain(conditions, 2, (a, b), (1, 1))
    walked = Domain(tuple(Op("and", (c,)) for c in conditions), 2, (a, b), (1, 1))
    grid = [[(n,), (m,)] for n in range(11) for m in range(11)]
    assert [ranges.holds(s) for s in grid] == [walked.holds(s) for s in grid]
    assert sum(ranges.holds(s) for s in grid) == sum(1 for n in range(3, 7) for m in range(2, 9) if n <= m) == 18


def test_the_one_size_a_domain_holds_for_agrees_with_holds() -> None:
    """:meth:`Domain.one_size` (Note [one size per program] in export/_by_size.py): a size fixed by ``==`` or by a
    range whose ends meet is the one size of the grid the domain holds for; a range of several, or none, gives None."""
    from piece_by_piece_serialize.domains import Const, Domain, Op, Size

    a, b, c = Size(0, 0), Size(1, 0), Size(2, 0)
    conditions = (
        Op("eq", (a, Const(6))),  # one size
        Op("ge", (b, Const(4))), Op("lt", (Const(3), b)), Op("le", (b, Const(4))),  # a range whose ends meet: 4
        Op("ge", (c, Const(2))), Op("le", (c, Const(9))),  # several
    )  # fmt: skip
    domain = Domain(conditions, 3, (a, b, c), (1, 1, 1))
    assert [domain.one_size(i, 0) for i in range(3)] == [6, 4, None]
    grid = [[(n,), (m,), (k,)] for n in range(11) for m in range(11) for k in range(11)]
    held = [s for s in grid if domain.holds(s)]
    assert {s[0][0] for s in held} == {6} and {s[1][0] for s in held} == {4} and len({s[2][0] for s in held}) == 8
    assert Domain((Op("eq", (a, Const(2))), Op("eq", (a, Const(3)))), 1).one_size(0, 0) is None  # none: no one size


def test_why_a_domain_refuses_names_its_first_false_condition_and_the_sizes_it_reads() -> None:
    from piece_by_piece_serialize.domains import Const, Domain, Op, Size

    a, b = Size(0, 0), Size(1, 2)
    domain = Domain((Op("le", (a, Const(15))), Op("eq", (b, a)), Op("eq", (Op("mod", (a, b)), Const(0)))), 2, (a,), (1, 3))
    assert domain.why_not([(4,), (1, 1, 4)]) == "" and domain.holds([(4,), (1, 1, 4)])
    assert domain.why_not([(16,), (1, 1, 16)]) == "(in0.size(0) <= 15) is false at in0.size(0)=16"
    assert domain.why_not([(6,), (1, 1, 5)]) == "(in1.size(2) == in0.size(0)) is false at in1.size(2)=5, in0.size(0)=6"
    assert domain.why_not([(0,), (1, 1, 0)]) == "((in0.size(0) % in1.size(2)) == 0) divides by zero at in0.size(0)=0, in1.size(2)=0"
    assert domain.why_not([(4,), (1, 4)]) == "input 1 has 2 dimensions where the program takes 3"
    assert domain.why_not([(4,)]) == "1 inputs where the program takes 2"


class _SumOf(torch.nn.Module):
    """Doubles where its two inputs' lengths sum to ``total``: a branch on a sum of two sizes, as Llama 4's mask takes."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total

    def forward(self, *tensors: Any) -> Any:
        first, second = tensors
        joined = torch.cat([first, second])
        return (joined * 2 if first.shape[0] + second.shape[0] == self.total else joined,)


def test_a_size_the_trace_gave_as_a_constant_less_a_symbol_is_solved_for_it() -> None:
    # code that branches on a sum of two sizes (Llama 4's mask: past + new == 15) makes torch fix the sum: the first
    # input's size is then 15 - s, of the second input's symbol s, which the domain solves for s (it refused such a
    # form); it holds exactly where torch runs the program
    program = torch.export.export(_SumOf(15), (torch.randn(9), torch.randn(6)), dynamic_shapes={"tensors": ({0: DYNAMIC}, {0: DYNAMIC})}, strict=False)
    assert [str(n.meta["val"].shape[0]).startswith("15 - ") for n in program.graph.nodes if n.op == "placeholder"] == [True, False]
    ours, theirs = _two_inputs(program, range(20), range(20))
    assert ours == theirs and sum(theirs) == 12  # n + m == 15, each 2 to 13


def test_the_edges_of_a_domain_are_the_sizes_on_either_side_of_each_change_of_a_condition() -> None:
    # Note [edges of a domain]: the program of a call of 6 and 3 (a branch on their sum's being 15 or not) takes
    # every sum but 15: moving the first size from 6 (the second at 3), its condition changes between 11 and 12;
    # moving the second from 3, between 8 and 9
    program = torch.export.export(_SumOf(15), (torch.randn(6), torch.randn(3)), dynamic_shapes={"tensors": ({0: DYNAMIC}, {0: DYNAMIC})}, strict=False)
    domain = domain_of(program)
    edges = domain.edges([(6,), (3,)], 0, 1, 200)
    assert {tuple((s.input, s.dim) for s in k): v for k, v in edges.items()} == {((0, 0),): {11, 12}, ((1, 0),): {8, 9}}
    for (at,), values in edges.items():  # on one side of each edge the domain holds, on the other it does not
        holds = {v: domain.holds([(v,), (3,)] if at.input == 0 else [(6,), (v,)]) for v in values}
        assert True in holds.values() and False in holds.values()
    # the sizes it holds equal move together, and a far bound is found by bisection (a named Dim's range up to 5,000)
    tied = torch.export.Dim("tied", min=2, max=5000)
    program = torch.export.export(_SumOf(15), (torch.randn(6), torch.randn(6)), dynamic_shapes={"tensors": ({0: tied}, {0: tied})}, strict=False)
    edges = domain_of(program).edges([(6,), (6,)], 0, 1, 10_000)
    assert {tuple((s.input, s.dim) for s in k): v for k, v in edges.items()} == {((0, 0), (1, 0)): {5000, 5001}}
    # with the first input a weight's (its size fixed), the second moves alone: its sum with 6 reaches 15 at 9
    edges = domain_of(program).edges([(6,), (6,)], 1, 1, 10_000)
    assert {tuple((s.input, s.dim) for s in k): v for k, v in edges.items()} == {((1, 0),): {8, 9, 5000, 5001}}


def test_the_edge_of_an_affine_condition_is_solved_for_at_any_distance() -> None:
    # a branch on a sum of sizes far from the example's (Llama 4's chunk of 8,192 against a call of a few tokens):
    # the one size where its `!=` fails is solved for, where samples at doubling distances stepped over it
    program = torch.export.export(_SumOf(1000), (torch.randn(6), torch.randn(3)), dynamic_shapes={"tensors": ({0: DYNAMIC}, {0: DYNAMIC})}, strict=False)
    domain = domain_of(program)
    edges = domain.edges([(6,), (3,)], 0, 1, 5000)
    assert {tuple((s.input, s.dim) for s in k): v for k, v in edges.items()} == {((0, 0),): {996, 997}, ((1, 0),): {993, 994}}
    assert domain.holds([(996,), (3,)]) and not domain.holds([(997,), (3,)]) and domain.holds([(998,), (3,)])
    # past the sizes the edges may reach, none
    assert domain.edges([(6,), (3,)], 0, 1, 990) == {}
