"""Complex arithmetic rewritten in real arithmetic, on an exported program, before it is written as ONNX.

Note [complex as real]
~~~~~~~~~~~~~~~~~~~~~~
ONNX computes in real numbers only, and torch.onnx translates few operators on complex tensors (Llama 4's rotary
embedding multiplies queries by ``view_as_complex`` of them and ``unsqueeze``s its complex frequencies: "No ONNX
function found for aten.unsqueeze"). :func:`as_real` rewrites a program so that every complex tensor is its real
view, ``torch.view_as_real``'s layout: the same shape with a last axis of 2 (real, imaginary), of the matching real
dtype. ``view_as_complex`` and ``view_as_real`` become nothing; a complex product is written out
(``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``); ``polar`` is ``abs * (cos, sin)``; an operation that moves axes
(``unsqueeze``, ``slice``, ``reshape``, ``transpose``, ``cat``...) is the same operation with a negative axis moved
one place left and the last axis kept. A complex input of the program (a piece given its rotary frequencies)
is then a real input of that layout, which is what the program's caller (the top program, rewritten the same
way) passes and what onnxruntime is fed (``torch.view_as_real`` of the eager tensor, :mod:`._verify`). An
operation on complex tensors with no rewriting here is refused by name, never written wrong.

Imports: torch, and :mod:`._pieces` for its copy of a program.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from ._errors import OnnxExportError
from ._pieces import graph_copy

aten = torch.ops.aten


def _is_complex(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype.is_complex


def has_complex(program: Any) -> bool:
    """Whether any value of ``program`` is a complex tensor."""
    for node in program.graph.nodes:
        value = node.meta.get("val")
        if any(_is_complex(v) for v in (value if isinstance(value, (list, tuple)) else [value])):
            return True
    return False


def _axis(dim: int) -> int:
    """A complex tensor's axis in its real view: a negative one moves past the new last axis."""
    return dim - 1 if dim < 0 else dim


class _Rewriter:
    def __init__(self, graph: Any, where: str) -> None:
        self.graph = graph
        self.where = where
        self.complex: set[Any] = set()  # nodes whose (rewritten) value is a complex number's real view

    def call(self, target: Any, *args: Any) -> Any:
        """A new node ``target(*args)`` with its value computed on the arguments' fake values."""
        node = self.graph.call_function(target, args)
        fake_args = torch.fx.node.map_arg(args, lambda n: n.meta["val"])
        node.meta["val"] = target(*fake_args)
        return node

    def parts(self, node: Any) -> tuple[Any, Any]:
        return self.call(aten.select.int, node, -1, 0), self.call(aten.select.int, node, -1, 1)

    def pair(self, real: Any, imag: Any) -> Any:
        return self.call(aten.stack.default, [real, imag], -1)

    def rewrite(self, node: Any) -> Any:
        """The node that computes ``node``'s value with complex tensors as their real views, or None to keep it."""
        args = node.args
        c = [isinstance(a, torch.fx.Node) and a in self.complex for a in args]
        target = node.target
        if target is aten.view_as_complex.default:
            return args[0]
        if target is aten.view_as_real.default:  # a node of its own: its users see a real tensor, not a complex one
            return self.call(aten.alias.default, args[0])
        if target is aten._assert_tensor_metadata.default:
            return "erase"
        if target is aten.polar.default:
            magnitude, angle = args
            return self.pair(self.call(aten.mul.Tensor, magnitude, self.call(aten.cos.default, angle)),
                             self.call(aten.mul.Tensor, magnitude, self.call(aten.sin.default, angle)))  # fmt: skip
        if target is aten.mul.Tensor:
            a, b = args
            if c[0] and c[1]:
                (ar, ai), (br, bi) = self.parts(a), self.parts(b)
                return self.pair(
                    self.call(aten.sub.Tensor, self.call(aten.mul.Tensor, ar, br), self.call(aten.mul.Tensor, ai, bi)),
                    self.call(aten.add.Tensor, self.call(aten.mul.Tensor, ar, bi), self.call(aten.mul.Tensor, ai, br)),
                )
            z, other = (a, b) if c[0] else (b, a)
            if isinstance(other, torch.fx.Node):  # a real tensor scales both parts
                other = self.call(aten.unsqueeze.default, other, -1)
            elif isinstance(other, complex):
                raise OnnxExportError(f"to_onnx: {self.where}: a complex constant factor ({other}) is not rewritten in real arithmetic")
            return self.call(aten.mul.Tensor, z, other)
        if target in (aten.add.Tensor, aten.sub.Tensor) and all(c[:2]) and len(args) == 2:
            return self.call(target, *args)
        moves: dict[Any, Callable[..., Any]] = {
            aten.unsqueeze.default: lambda x, d: (x, _axis(d)),
            aten.squeeze.dim: lambda x, d: (x, _axis(d)),
            aten.select.int: lambda x, d, i: (x, _axis(d), i),
            aten.slice.Tensor: lambda x, d=0, *rest: (x, _axis(d), *rest),
            aten.transpose.int: lambda x, d, e: (x, _axis(d), _axis(e)),
            aten.reshape.default: lambda x, shape: (x, [*shape, 2]),
            aten.view.default: lambda x, shape: (x, [*shape, 2]),
            aten.expand.default: lambda x, shape: (x, [*shape, 2]),
            aten.permute.default: lambda x, dims: (x, [*(d % (len(dims)) for d in dims), len(dims)]),
            aten.cat.default: lambda xs, d=0: (xs, _axis(d)),
            aten.clone.default: lambda x: (x,),
            aten.alias.default: lambda x: (x,),
            aten.contiguous.default: lambda x: (x,),
        }
        if target in moves and (c[0] or (target is aten.cat.default and any(n in self.complex for n in args[0]))):
            return self.call(target, *moves[target](*args))
        if target in (aten.to.dtype_layout, aten.to.dtype, aten._to_copy.default) and c[0]:
            wanted = node.meta["val"].dtype
            if wanted == node.args[0].meta["val"].dtype.to_complex():
                return args[0]
        raise OnnxExportError(
            f"to_onnx: {self.where} computes {target} on complex tensors, which has no rewriting in real arithmetic "
            "(Note [complex as real] in onnx_export/_complex.py)"
        )


def as_real(program: Any, where: str) -> Any:
    """A copy of ``program`` with its complex tensors as their real views (Note [complex as real]); ``program``
    itself when it has none."""
    if not has_complex(program):
        return program
    ep = graph_copy(program)  # its tensors shared: only its graph is rewritten
    graph = ep.graph_module.graph
    rewriter = _Rewriter(graph, where)
    fake_mode = next(
        (v.fake_mode for n in graph.nodes for v in [n.meta.get("val")] if isinstance(v, torch.Tensor) and hasattr(v, "fake_mode")),
        None,
    )
    with fake_mode if fake_mode is not None else contextlib.nullcontext():
        for node in list(graph.nodes):
            value = node.meta.get("val")
            if node.op == "placeholder":
                if _is_complex(value):
                    node.meta["val"] = torch.view_as_real(value)
                    rewriter.complex.add(node)
                continue
            if node.op != "call_function":
                continue
            inputs_complex = any(n in rewriter.complex for n in node.all_input_nodes)
            if not inputs_complex and not _is_complex(value):
                continue
            if not isinstance(target := node.target, torch._ops.OpOverload) or target.namespace != "aten":
                if any(_is_complex(v) for v in (value if isinstance(value, (list, tuple)) else [value])):
                    raise OnnxExportError(f"to_onnx: {where}: the operator {target} gives a complex tensor, which is not rewritten in real arithmetic")
                continue  # a piece's operator given real views: its function takes them (Note [complex as real])
            with graph.inserting_before(node):
                new = rewriter.rewrite(node)
            if new == "erase":
                graph.erase_node(node)
                continue
            node.replace_all_uses_with(new)
            graph.erase_node(node)
            if isinstance(new, torch.fx.Node) and new.meta["val"].dtype.is_floating_point and _is_complex(value):
                rewriter.complex.add(new)
    output = next(n for n in graph.nodes if n.op == "output")
    for spec, value in zip(ep.graph_signature.output_specs, output.args[0], strict=True):
        if isinstance(value, torch.fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = value.name  # a complex output is now its real view, a node of another name
    graph.eliminate_dead_code()
    graph.lint()
    ep.graph_module.recompile()
    return ep
