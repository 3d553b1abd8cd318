"""A piece's program reduced to what it computes, and a key that is the same for identical pieces.

Note [identical pieces]
~~~~~~~~~~~~~~~~~~~~~~~
A decoder layer behind its operator takes the whole cache and gives the whole cache back: layer 3 reads and
updates the keys and values of layer 3, and passes every other layer's tensors through untouched. So the
programs of two layers differ in which inputs they use, not in what they compute. :func:`prune` drops from a
piece's program every input no node reads and every output that is an input passed through, and records how
the remaining inputs and outputs map back to the operator's; the pruned program computes the piece's own
function. :func:`key` describes that function in a form that does not depend on where it was cut from: inputs
numbered in order, symbolic sizes named in their order of first appearance in the inputs' shapes (a size read
from one input or from another of the same size is the same size), every other node numbered in order, each
described by its target, its arguments, and the dtype and shape of its value. Two pieces with the same key get
one ONNX function; each piece is still checked with onnxruntime on its own recorded calls.

Imports: torch (and its sympy) only.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class PrunedPiece:
    """A piece's program without its unread inputs and passed-through outputs."""

    program: Any  # the pruned ExportedProgram
    inputs: tuple[int, ...]  # for each input of the pruned program, its position among the operator's inputs
    outputs: tuple[tuple[bool, int], ...]  # per operator output: (True, k) the pruned program's output k, (False, i) input i
    key: str


def graph_copy(program: Any) -> Any:
    """A copy of ``program`` whose graph may be rewritten, sharing its tensors (weights, constants, example inputs)
    with ``program``: copies of a layer's weights (116 MB in a 1B bfloat16 model) or of a whole model's would be
    held through the whole of ``to_onnx``, and nothing that rewrites a copy changes a tensor in place."""
    from torch.utils._pytree import tree_leaves

    tensors = [*program.state_dict.values(), *program.constants.values(), *tree_leaves(program.example_inputs)]
    with warnings.catch_warnings():
        # torch's own treespecs warn about their own deprecated class when copied; nothing the user can act on
        warnings.simplefilter("ignore", FutureWarning)
        return copy.deepcopy(program, memo={id(t): t for t in tensors if isinstance(t, torch.Tensor)})


def prune(program: Any) -> PrunedPiece:
    """``program`` (a piece's own program: weights, then tensors, as inputs) reduced (Note [identical pieces])."""
    from torch.export.graph_signature import ExportGraphSignature, InputKind
    from torch.utils._pytree import tree_structure

    ep = graph_copy(program)
    # a piece program's examples are its weights (a decoder layer's), which would not fit the pruned inputs, and
    # torch.onnx.export does not read them (only its verify=True does)
    ep.example_inputs = None
    graph = ep.graph_module.graph
    specs = list(ep.graph_signature.input_specs)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    user = [ph for ph, spec in zip(placeholders, specs, strict=True) if spec.kind == InputKind.USER_INPUT]
    position = {ph: i for i, ph in enumerate(user)}
    output = next(n for n in graph.nodes if n.op == "output")
    kept: list[Any] = []
    kept_specs = []
    mapping: list[tuple[bool, int]] = []
    for value, spec in zip(output.args[0], ep.graph_signature.output_specs, strict=True):
        value = _empty_as_input(value, user)
        if isinstance(value, torch.fx.Node) and value in position:
            mapping.append((False, position[value]))
        else:
            mapping.append((True, len(kept)))
            kept.append(value)
            kept_specs.append(spec)
    output.args = (tuple(kept),)
    graph.eliminate_dead_code()  # what only the passed-through outputs needed (a count tensor made anew, say)
    _read_sizes_from_own_inputs(graph, user)
    graph.eliminate_dead_code()
    inputs, input_specs = [], []
    for ph, spec in zip(placeholders, specs, strict=True):
        if spec.kind == InputKind.USER_INPUT and not ph.users:
            graph.erase_node(ph)
            continue
        input_specs.append(spec)
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(position[ph])
    graph.lint()
    ep.graph_module.recompile()
    ep._graph_signature = ExportGraphSignature(input_specs=input_specs, output_specs=kept_specs)
    # the program's guards and its call signature name inputs by position, which pruning shifts: the guards go
    # (an ONNX function has none), the signature is the pruned one
    ep._guards_code = []
    root = ep._module_call_graph[0]
    if root.signature is not None:
        root.signature.in_spec = tree_structure((tuple(range(len(inputs))), {}))
        root.signature.out_spec = tree_structure(tuple(range(len(kept))))
    return PrunedPiece(ep, tuple(inputs), tuple(mapping), key(ep))


def _empty_as_input(value: Any, user: list[Any]) -> Any:
    """An output that holds no data (a count tensor, ``torch.empty((n, 0))``) is only its shape: the input of that
    shape and dtype stands for it, so a layer does not compute the counts of the layers it passes through."""
    meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    if not isinstance(meta, torch.Tensor) or 0 not in [d for d in meta.shape if isinstance(d, int)]:
        return value
    for ph in user:
        other = ph.meta.get("val")
        if isinstance(other, torch.Tensor) and other.dtype == meta.dtype and _same_shape(other.shape, meta.shape):
            return ph
    return value


def _same_shape(a: Any, b: Any) -> bool:
    def expr(d: Any) -> Any:
        return d.node.expr if isinstance(d, torch.SymInt) else d

    return len(a) == len(b) and all(expr(x) == expr(y) for x, y in zip(a, b, strict=True))


def _read_sizes_from_own_inputs(graph: Any, user: list[Any]) -> None:
    """A size another input has too is read from an input the piece computes with (Note [identical pieces]).

    torch gives equal sizes one symbol (the cumulative lengths of two sliding layers), and the trace reads a symbol
    from the first input that has it: layer 1's program reads its own count from layer 0's count tensor, an input it
    otherwise ignores. The program already takes those sizes for equal, so reading them from the piece's own
    input computes the same, and the other input can go.
    """
    import torch

    size_reads = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_size.default}
    essential = [ph for ph in user if any(u.op != "output" and u.target not in size_reads for u in ph.users)]
    for node in list(graph.nodes):
        if node.target not in size_reads or node.args[0] in essential or node.args[0] not in user:
            continue
        wanted = node.meta.get("val")
        if not isinstance(wanted, torch.SymInt):
            continue
        for ph in essential:
            sizes = getattr(ph.meta.get("val"), "shape", ())
            d = next((d for d, size in enumerate(sizes) if isinstance(size, torch.SymInt) and size.node.expr == wanted.node.expr), None)
            if d is not None:
                node.args = (ph, d)
                break


def key(program: Any) -> str:
    """The digest of what ``program`` computes, the same for identical pieces (Note [identical pieces])."""
    canon: dict[Any, Any] = {}
    names: dict[Any, str] = {}
    lines = []
    counter = 0
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder":
            for size in getattr(value, "shape", ()):
                if isinstance(size, torch.SymInt):
                    for s in sorted(size.node.expr.free_symbols, key=str):
                        canon.setdefault(s, _canonical_symbol(len(canon)))
            names[node] = f"p{len(names)}"
            lines.append(f"placeholder {names[node]} {_describe(value, canon)}")
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            # a size is named by what it is, not by the input or the node it was read from
            names[node] = f"sym({value.node.expr.xreplace(canon)})"
        else:
            names[node] = f"v{counter}"
            counter += 1
            args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: names[n])
            lines.append(f"{node.op} {node.target} {args} {_describe(value, canon)}")
    for name, tensor in sorted(program.constants.items()):
        # its bytes, through uint8: numpy has no bfloat16 (a bfloat16 model's rotary table)
        data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        lines.append(f"constant {name} {tensor.dtype} {tuple(tensor.shape)} {hashlib.sha256(data).hexdigest()}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _canonical_symbol(i: int) -> Any:
    import sympy

    return sympy.Symbol(f"size{i}", integer=True, positive=True)


def _describe(value: Any, canon: dict[Any, Any]) -> str:
    if isinstance(value, torch.Tensor):
        dims = [str(d.node.expr.xreplace(canon)) if isinstance(d, torch.SymInt) else str(d) for d in value.shape]
        return f"{value.dtype}[{', '.join(dims)}]"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_describe(v, canon) for v in value) + ")"
    return type(value).__name__
