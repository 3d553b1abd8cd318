"""A piece with programs by size (Note [programs by size] in :mod:`..export._by_size`) as one ONNX function that
calls the function of the program whose domain holds for its inputs, and refuses the inputs no domain holds for.

Note [pieces by size]
~~~~~~~~~~~~~~~~~~~~~
Each program by size is pruned and written as any piece's program is (one function per distinct program, Note
[identical pieces]). The piece's function, ``<operator>__by_size``, takes every input of the operator; it
computes each program's domain from its inputs' sizes (:func:`..domains._onnx.domain_nodes`) and runs a chain of
``If`` nodes: the first program whose domain holds computes the call. Where none holds, the last branch reshapes
the shape of an input of dynamic size to one element more than it has, which no input can satisfy, so
onnxruntime raises there, and its error names the node, which says what happened: ``refused: <piece> has no
program for these input sizes``. ONNX has no node that raises, and the alternative, a program run outside its
domain, computes a wrong answer without a word.

Each output of the operator that every program passes through from the same input stays an input passed
through (as a pruned piece's, in the main graph); any other is an output of the piece's function, which a
program that passes it through gives with ``Identity``.

Imports: :mod:`..domains`; onnx, on use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..domains import Domain
from ..domains._onnx import domain_nodes
from ._functions import DOMAIN
from ._pieces import PrunedPiece


@dataclass
class Variant:
    """One program by size, pruned, with its domain and the name of its function."""

    cut: PrunedPiece
    domain: Domain
    function: str
    n_outputs: int


def _torch_to_onnx(dtype: Any) -> int:
    """ONNX's element type of a torch dtype (onnx_ir's reading of a tensor of it)."""
    import onnx_ir
    import torch

    return int(onnx_ir.tensor(torch.zeros(0, dtype=dtype)).dtype.value)


def merged_outputs(variants: Sequence[Variant]) -> tuple[tuple[bool, int], ...]:
    """Per operator output: (False, i), input i passed through by every program; or (True, k), output k of the
    piece's function (Note [pieces by size])."""
    out: list[tuple[bool, int]] = []
    computed = 0
    for j, first in enumerate(variants[0].cut.outputs):
        if not first[0] and all(v.cut.outputs[j] == first for v in variants):
            out.append(first)
        else:
            out.append((True, computed))
            computed += 1
    return tuple(out)


def by_size_function(name: str, variants: Sequence[Variant], n_inputs: int, dtypes: Sequence[Any], opsets: Any,
                     refusal: str) -> tuple[Any, tuple[tuple[bool, int], ...]]:  # fmt: skip
    """The function ``pbp.pieces::<name>`` of a piece by size (Note [pieces by size]), or of a piece's own program
    checked (Note [a piece's own sizes] in :mod:`.`), over the operator's ``n_inputs`` flat inputs, and the
    operator's outputs as it gives them (:func:`merged_outputs`); ``dtypes`` are the operator's output dtypes,
    ``opsets`` the programs' functions' opset imports, ``refusal`` the name of the node that refuses, which
    onnxruntime's error shows."""
    import onnx

    inputs = [f"x{i}" for i in range(n_inputs)]
    merged = merged_outputs(variants)
    wanted = [j for j, (computed, _) in enumerate(merged) if computed]
    outputs = [f"y{k}" for k in range(len(wanted))]
    nodes: list[Any] = []
    conditions = []
    for v, variant in enumerate(variants):
        made, condition = domain_nodes(variant.domain, inputs, f"d{v}_")
        nodes += made
        conditions.append(condition)
    types = [_torch_to_onnx(dtypes[j]) for j in wanted]
    branch = _refuse(inputs[_dynamic_input(variants)], types, refusal)
    for v in reversed(range(len(variants))):
        then = _call(variants[v], inputs, wanted, types, f"b{v}_")
        if v == 0:
            nodes.append(onnx.helper.make_node("If", [conditions[v]], outputs, then_branch=then, else_branch=branch))
        else:
            outs = [f"e{v}_{k}" for k in range(len(wanted))]
            node = onnx.helper.make_node("If", [conditions[v]], outs, then_branch=then, else_branch=branch)
            branch = onnx.helper.make_graph([node], f"else{v}", [], [onnx.helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, types, strict=True)])
    function = onnx.helper.make_function(DOMAIN, name, inputs, outputs, nodes, opset_imports=list(opsets))
    return function, merged


def _call(variant: Variant, inputs: list[str], wanted: list[int], types: list[int], prefix: str) -> Any:
    """The branch that runs one program's function and gives the piece's function's outputs."""
    import onnx

    results = [f"{prefix}r{k}" for k in range(variant.n_outputs)]
    nodes = [onnx.helper.make_node(variant.function, [inputs[i] for i in variant.cut.inputs], results, domain=DOMAIN)]
    outs = []
    for j in wanted:
        computed, k = variant.cut.outputs[j]
        out = f"{prefix}o{j}"
        nodes.append(onnx.helper.make_node("Identity", [results[k] if computed else inputs[k]], [out]))
        outs.append(out)
    return onnx.helper.make_graph(nodes, f"{prefix}then", [], [onnx.helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, types, strict=True)])


def _refuse(tensor: str, types: list[int], name: str) -> Any:
    """The branch that makes onnxruntime raise, naming why (Note [pieces by size]); ``tensor`` is one of a shape
    onnxruntime cannot fold."""
    import onnx

    shape = onnx.helper.make_node("Shape", [tensor], ["refuse_shape"])
    rank = onnx.helper.make_node("Size", ["refuse_shape"], ["refuse_rank"])
    one = onnx.helper.make_node("Constant", [], ["refuse_one"], value=onnx.helper.make_tensor("refuse_one_v", onnx.TensorProto.INT64, [1], [1]))
    more = onnx.helper.make_node("Add", ["refuse_rank", "refuse_one"], ["refuse_more"])
    fail = onnx.helper.make_node("Reshape", ["refuse_shape", "refuse_more"], ["refuse_never"], name=name)
    outs = [f"refuse_out{k}" for k in range(len(types))]
    casts = [onnx.helper.make_node("Cast", ["refuse_never"], [o], to=t) for o, t in zip(outs, types, strict=True)]
    return onnx.helper.make_graph(
        [shape, rank, one, more, fail, *casts], "refuse", [], [onnx.helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, types, strict=True)]
    )  # fmt: skip


def _dynamic_input(variants: Sequence[Variant]) -> int:
    """An input with a size of dynamic size: its shape is not a constant, which onnxruntime could fold, and refuse
    when it loads the model."""
    return next((v.domain.free[0].input for v in variants if v.domain.free), 0)


def check_main_graph(graph: Any, domain: Domain, why: str) -> None:
    """The main graph's outputs given only where ``domain`` (the top program's, Note [domains]) holds for its
    inputs, as torch's check of the program gives them: one ``If`` after everything, whose other branch refuses
    by name (``refused: <why>``). An output that is an input passed through is left as it is."""
    import onnx

    inputs = [i.name for i in graph.input]
    nodes, condition = domain_nodes(domain, inputs, "pbp_domain_")
    passed = set(inputs)
    checked = [o for o in graph.output if o.name not in passed]
    if not checked:
        return
    renamed = {o.name: f"{o.name}__unchecked" for o in checked}
    rename_values(graph, renamed)
    sources = _skip_identities(graph, [renamed[o.name] for o in checked])
    types = [o.type.tensor_type.elem_type for o in checked]
    then = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", [source], [f"{o.name}__checked"]) for o, source in zip(checked, sources, strict=True)], "domain_holds", [],
        [onnx.helper.make_tensor_value_info(f"{o.name}__checked", t, None) for o, t in zip(checked, types, strict=True)],
    )  # fmt: skip
    refuse = _refuse(inputs[domain.free[0].input] if domain.free else inputs[0], types, f"refused: {why}")
    graph.node.extend([*nodes, onnx.helper.make_node("If", [condition], [o.name for o in checked], then_branch=then, else_branch=refuse)])


def _skip_identities(graph: Any, names: list[str]) -> list[str]:
    """Each of ``names`` traced back through the ``Identity`` nodes of ``graph`` that make it, and those nodes
    removed: onnxruntime removes an ``Identity`` itself, but not one whose output a subgraph reads (the ``If``'s
    branch), and it warned at every session, once per such output (a cache written back is an ``Identity`` of
    the cache returned)."""
    made = {out: node for node in graph.node for out in node.output}
    read = {name for node in graph.node for name in node.input}
    out = []
    skipped = set()
    for name in names:
        while name in made and made[name].op_type == "Identity" and name not in read:
            skipped.add(id(made[name]))
            name = made[name].input[0]
        out.append(name)
    kept = [node for node in graph.node if id(node) not in skipped]
    del graph.node[:]
    graph.node.extend(kept)
    return out


def rename_values(graph: Any, renamed: dict[str, str], io: bool = False) -> None:
    """Values renamed wherever a node of ``graph`` or of its subgraphs names them, and, with ``io``, where the
    graphs' inputs and outputs name them."""
    for value in (*graph.input, *graph.output, *graph.value_info) if io else graph.value_info:
        value.name = renamed.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, n) for n in node.output]
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                rename_values(sub, renamed, io)
