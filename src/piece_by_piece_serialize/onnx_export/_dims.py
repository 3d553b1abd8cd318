"""Names for the dynamic dimensions of the ONNX file: the user's ``Dim`` names, not torch's ``s87``.

torch.onnx writes a dynamic dimension as the text of its symbolic size in the exported program: ``s14`` for a
size of its own, ``s43 + s85`` for one computed from others (a cache's length after a step). Here each symbol of
the top program's inputs gets a name: the name of the ``Dim`` the user gave that dimension (``batch``) or, when
the user named none (``Dim.DYNAMIC``, ``Dim.AUTO``, sizes found from two examples), the place it first appears,
``<input>.shape[<axis>]`` (``past.layers.0.keys.shape[2]``). Every dimension of the graph's inputs, outputs and
intermediate values whose text is a size of the program is then written again with those names
(``past.layers.0.keys.shape[2] + seq``), built from the symbolic expression, never parsed from its text.

Imports: torch (and its sympy) only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def rename_dims(model: Any, program: Any, input_names: Sequence[str], given: Sequence[Mapping[int, str]]) -> dict[str, str]:
    """Rename the dynamic dimensions of ``model`` (the ONNX model of ``program``, the top program, whose user
    inputs are the flat tensors named ``input_names``), ``given[i][d]`` naming axis ``d`` of input ``i``; returns
    torch's names -> ours."""
    import sympy
    import torch
    from torch.export.graph_signature import InputKind

    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    kinds = [spec.kind for spec in program.graph_signature.input_specs]
    user = [ph for ph, kind in zip(placeholders, kinds, strict=True) if kind == InputKind.USER_INPUT]
    names: dict[Any, str] = {}
    found: dict[Any, str] = {}
    for i, ph in enumerate(user):
        for d, size in enumerate(getattr(ph.meta.get("val"), "shape", ())):
            if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
                continue
            symbol = size.node.expr
            if i < len(given) and d in given[i]:
                names.setdefault(symbol, given[i][d])
            if i < len(input_names):
                found.setdefault(symbol, f"{input_names[i]}.shape[{d}]")
    taken = set(names.values())
    for symbol, name in found.items():
        if symbol not in names and name not in taken:
            names[symbol] = name
    replace = {s: sympy.Symbol(n, integer=True, positive=True) for s, n in names.items()}
    mapping: dict[str, str] = {}
    for node in program.graph.nodes:
        value = node.meta.get("val")
        for tensor in value if isinstance(value, (list, tuple)) else [value]:
            for size in getattr(tensor, "shape", ()) if isinstance(tensor, torch.Tensor) else ():
                if isinstance(size, torch.SymInt):
                    expr = size.node.expr
                    mapping.setdefault(str(expr), str(expr.xreplace(replace)))
    graph = model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in mapping:
                dim.dim_param = mapping[dim.dim_param]
    return mapping
