"""A piece's pruned program as an ONNX local function, and the operator that calls it from the main graph.

Each distinct pruned program (Note [identical pieces]) is exported once with ``torch.onnx.export(dynamo=True)``;
the graph of that model becomes a ``FunctionProto`` of the domain ``pbp.pieces``: its inputs and outputs are the
graph's, its initializers (constants the piece computes with) become ``Constant`` nodes, and the functions the
model itself holds are renamed under the piece's function, so that two pieces' helpers do not collide. The main
graph calls it through an ONNX op of that name with one input per function input and one output per function
output (:func:`callee`, an onnxscript ``Op`` with a schema made for it, which torch's exporter builds nodes of).

Imports: onnx and onnxscript, torch; nothing of the library but the package's error and optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._errors import OnnxExportError
from ._optimize import optimize

DOMAIN = "pbp.pieces"
_TYPES = (
    "tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)", "tensor(int64)", "tensor(int32)",
    "tensor(int16)", "tensor(int8)", "tensor(uint8)", "tensor(bool)", "tensor(complex64)", "tensor(complex128)",
)  # fmt: skip


@dataclass
class Function:
    """One ONNX local function and the standalone model it was made from (which onnxruntime runs to check it)."""

    proto: Any  # onnx.FunctionProto
    helpers: list[Any]  # the functions it calls, renamed under it
    model: Any  # onnx.ModelProto of the pruned piece alone
    n_inputs: int
    n_outputs: int


def export_function(program: Any, name: str, opset: int | None, translations: dict[Any, Any]) -> Function:
    """The pruned ``program`` exported by torch.onnx, with ``translations`` for the operators it does not know,
    and made the function ``pbp.pieces::<name>``."""
    import onnx
    import torch
    from onnxscript.rewriter import onnx_fusions

    exported = torch.onnx.export(
        program, dynamo=True, verbose=False, opset_version=opset, optimize=False, custom_translation_table=translations
    )
    if exported is None:  # pragma: no cover - dynamo=True always returns a program; None is the TorchScript route's
        raise OnnxExportError("to_onnx: torch.onnx.export returned no program")
    # what optimize=True runs, with onnxscript's optimizer in linear time (Note [a linear optimizer])
    optimize(exported.model)
    onnx_fusions.fuse(exported.model)
    model = exported.model_proto
    graph = model.graph
    helpers = _rename_helpers(model, name)
    constants = [onnx.helper.make_node("Constant", [], [init.name], value=init) for init in graph.initializer]
    proto = onnx.helper.make_function(
        DOMAIN, name, [i.name for i in graph.input], [o.name for o in graph.output], [*constants, *graph.node],
        opset_imports=list(model.opset_import),
    )  # fmt: skip
    return Function(proto, helpers, model, len(graph.input), len(graph.output))


def _rename_helpers(model: Any, prefix: str) -> list[Any]:
    """The model's own functions, renamed ``<prefix>__<name>``, and every call of them renamed too."""
    renamed = {(f.domain, f.name): f"{prefix}__{f.name}" for f in model.functions}
    if not renamed:
        return []

    def fix(nodes: Any) -> None:
        for node in nodes:
            new = renamed.get((node.domain, node.op_type))
            if new is not None:
                node.op_type = new
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    fix(attribute.g.node)
                for g in attribute.graphs:
                    fix(g.node)

    fix(model.graph.node)
    for function in model.functions:
        fix(function.node)
        function.name = renamed[(function.domain, function.name)]
    return list(model.functions)


def callee(name: str, n_inputs: int, n_outputs: int) -> Any:
    """The onnxscript op that calls ``pbp.pieces::<name>`` with that many inputs and outputs."""
    import onnxscript
    from onnx.defs import OpSchema

    schema = OpSchema(
        name, DOMAIN, 1,
        inputs=[OpSchema.FormalParameter(f"x{i}", f"T{i}") for i in range(n_inputs)],
        outputs=[OpSchema.FormalParameter(f"y{j}", f"U{j}") for j in range(n_outputs)],
        type_constraints=[(f"T{i}", list(_TYPES), "") for i in range(n_inputs)] + [(f"U{j}", list(_TYPES), "") for j in range(n_outputs)],
    )  # fmt: skip
    return onnxscript.values.Op(onnxscript.values.Opset(DOMAIN, 1), name, schema)
