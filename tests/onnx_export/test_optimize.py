"""Note [a linear optimizer]: onnxscript's optimizer less its rules of several output nodes, which make it quadratic;
the same values in onnxruntime, and only that rewrite lost."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnxscript = pytest.importorskip("onnxscript")
ort = pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402

from piece_by_piece_serialize.onnx_export._optimize import linear_rules, optimize  # noqa: E402


def test_the_rules_are_onnxscripts_defaults_less_those_of_several_outputs() -> None:
    from onnxscript import rewriter

    defaults = list(rewriter._DEFAULT_REWRITE_RULES)
    kept = linear_rules()
    dropped = [rule for rule in defaults if rule not in kept]
    assert kept == [rule for rule in defaults if rule in kept]  # in onnxscript's order
    assert [type(rule._target_pattern).__name__ for rule in dropped] == ["GraphPattern"]
    assert [rule.name for rule in dropped] == ["SlicesSplit"]  # the one rule of onnxscript 0.7 that pairs nodes
    assert all(rule._target_pattern.has_single_output_node for rule in kept)


def _halves() -> Any:
    """A model taking the two halves of its input's last dimension with two Slices: what ``SlicesSplit`` rewrites."""
    from onnx import TensorProto, helper

    ints = lambda name, values: helper.make_tensor(name, TensorProto.INT64, [len(values)], values)  # noqa: E731
    nodes = [
        # the high half first: onnxscript pairs a node with the first Slice of the graph and gives up if the pair
        # fails its check, so with the low half first (a Slice paired with itself) it never rewrites
        helper.make_node("Slice", ["x", "half", "end", "last"], ["high"]),
        helper.make_node("Slice", ["x", "zero", "half", "last"], ["low"]),
        helper.make_node("Neg", ["high"], ["minus"]),
        helper.make_node("Concat", ["minus", "low"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "halves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        initializer=[ints("zero", [0]), ints("half", [4]), ints("end", [8]), ints("last", [1])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_the_same_values_as_onnxscripts_optimizer_and_only_the_split_lost() -> None:
    import onnx_ir as ir
    import onnxscript.optimizer

    ours, theirs = ir.serde.deserialize_model(_halves()), ir.serde.deserialize_model(_halves())
    optimize(ours)
    onnxscript.optimizer.optimize_ir(theirs)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    expected = np.concatenate([-x[:, 4:], x[:, :4]], axis=-1)
    for model in (ours, theirs):
        session = ort.InferenceSession(ir.serde.serialize_model(model).SerializeToString(), providers=["CPUExecutionProvider"])
        assert np.array_equal(session.run(None, {"x": x})[0], expected)
    assert sorted(node.op_type for node in theirs.graph) == ["Concat", "Neg", "Split"]
    assert sorted(node.op_type for node in ours.graph) == ["Concat", "Neg", "Slice", "Slice"]
