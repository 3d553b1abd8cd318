"""What a program's node may call and what its guards may say: the rules the loader applies to every program
document (Note [operator allowlist], Note [guard cost]), kept beside each other and apart from the reading.

Imports: the standard library; torch on use.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any


def allowed_target(target: Any, own: str | None) -> bool:
    if not isinstance(target, str):
        return False
    if own is not None and target.startswith(f"torch.ops.{own}."):
        return _allowed(target, own)  # registered by this load: looked up, never remembered
    found = _ALLOWED.get(target)
    if found is None:
        found = _allowed(target, None)
        if len(_ALLOWED) < 1 << 12:
            _ALLOWED[target] = found
    return found


_ALLOWED: dict[str, bool] = {}  # the rule's answer for ATen and library targets: a program calls few, often


def _allowed(target: str, own: str | None) -> bool:
    import torch

    head, _, rest = target.partition(".")
    if head == "_operator":
        fn = getattr(operator, rest, None) if rest.isidentifier() else None
        return callable(fn) and not rest.startswith("_")
    if head == "math":
        fn = getattr(math, rest, None) if rest.isidentifier() else None
        return callable(fn) and not rest.startswith("_")
    if head != "torch":
        return False
    if rest.startswith("sym_") and rest.isidentifier():
        return callable(getattr(torch, rest, None))
    parts = rest.split(".")  # torch's dotted target: torch.ops.<namespace>.<name>.<overload>
    if len(parts) != 4 or parts[0] != "ops" or not all(p.isidentifier() for p in parts):
        return False
    namespace = parts[1]
    if namespace != own and namespace not in _OPERATOR_NAMESPACES:
        return False  # looked up only where the rule may allow it: no torch.ops namespace is loaded by name
    packet = getattr(getattr(torch.ops, namespace), parts[2], None)
    op = getattr(packet, parts[3], None) if isinstance(packet, torch._ops.OpOverloadPacket) else None
    return isinstance(op, torch._ops.OpOverload) and allowed_operator(op, own)


# Note [operator allowlist]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# A node may call an operator of the artifact's own namespace (the one the loader registered it in), or an
# ATen operator that computes on the tensors it is given and writes, if at all, only into the arguments its
# schema declares written (``Tensor(a!)``): every ATen schema says what it writes, so an operator whose schema
# is mutable without such an argument is refused. Refused by name, whatever their schemas say: file I/O
# (``from_file``), views of raw storage (``as_strided`` and its variants, ``_reshape_alias``, whose extents
# ATen does not check against the storage), and what changes a tensor's storage or metadata in place
# (``set_``, ``resize_``; and by tag every ``inplace_view`` and ``out=`` overload). A library's custom
# operator is allowed only when its namespace is in _OPERATOR_NAMESPACES (transformers' ``grouped_mm_fallback``,
# registered by the model's own code) and its schema neither writes nor aliases. Nothing else of ``torch.ops``
# is looked up. tests/artifact/test_operator_allowlist.py checks the rule against every operator the
# exports of the tested model families emit (tests/corpus/artifact/emitted_operators.txt).
_REFUSED_OPERATORS = frozenset({
    "aten::from_file", "aten::_reshape_alias", "aten::_reshape_alias_copy", "aten::as_strided", "aten::as_strided_",
    "aten::as_strided_copy", "aten::as_strided_scatter", "aten::set_", "aten::resize_", "aten::resize_as_",
    "aten::_resize_output_", "aten::_set_", "aten::_unsafe_set_", "aten::set_data", "aten::_nested_view_from_buffer",
    "aten::_nested_view_from_buffer_copy", "aten::_nested_view_from_jagged", "aten::record_stream",
})  # fmt: skip
_OPERATOR_NAMESPACES = frozenset({"aten", "transformers"})


def allowed_operator(op: Any, own: str | None = None) -> bool:
    """Whether a node may call the ``torch._ops.OpOverload`` ``op`` (Note [operator allowlist])."""
    import torch

    schema = op._schema
    if op.namespace == own:
        return True
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if schema.is_mutable and not written:
        return False  # mutates what its schema does not say
    if op.namespace == "aten":
        return not (schema.name in _REFUSED_OPERATORS or torch.Tag.inplace_view in op.tags or torch.Tag.out in op.tags)
    return op.namespace in _OPERATOR_NAMESPACES and not written and all(r.alias_info is None for r in schema.returns)


_GUARD_CALLS = frozenset({"size", "stride", "storage_offset", "dim", "numel"})
# functions torch's guards call on numbers: Python's own arithmetic builtins and torch's sympy interpreter's
_GUARD_FUNCTIONS = frozenset({"min", "max", "abs", "int", "float", "bool", "round", "IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"})
# what torch's Python printer of sympy writes of ``math`` (torch/utils/_sympy/printers.py): functions of one float,
# each computed at once; not ``math.factorial``, ``comb`` or ``perm``, whose cost grows with the numbers they get
_GUARD_MATH = frozenset({"floor", "ceil", "trunc", "sqrt", "exp", "log", "log2", "cos", "cosh", "acos", "sin", "sinh", "asin", "tan", "tanh", "atan"})
_GUARD_MATH_CONSTANTS = frozenset({"inf", "nan"})
# Note [guard cost]: torch compiles a program's guards into a function run at every call (``_guards_fn``) only when
# the program has example inputs, which the loader never reads; a guard is still checked as if it ran, for a torch
# that compiles them anyway or a user who attaches examples, so its cost must not grow with a number written in the
# file or with the sizes it is given. Its text is at most MAX_GUARD_LENGTH characters, an integer in it has at most 20 digits
# (a size is below 2**63), and ``**`` only raises something free of ``**`` to a written constant of at most
# MAX_GUARD_EXPONENT (torch prints PowByNatural as ``**``; ``s ** s`` or ``9 ** 9 ** 9`` would not end).
MAX_GUARD_LENGTH = 4096
MAX_GUARD_EXPONENT = 64


def _guard_call(node: ast.Call) -> bool:
    """``x.size()`` and kin without arguments, or a number function (``min(a, b)``, ``math.floor(a)``)."""
    if node.keywords:
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _GUARD_CALLS:
        return not node.args
    if isinstance(func, ast.Attribute):
        return isinstance(func.value, ast.Name) and func.value.id == "math" and func.attr in _GUARD_MATH and len(node.args) == 1
    return isinstance(func, ast.Name) and func.id in _GUARD_FUNCTIONS


def _guard_power(node: ast.BinOp) -> bool:
    """``base ** exponent`` of bounded cost (Note [guard cost]): a constant exponent, a base without ``**``."""
    exponent = node.right
    if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, (ast.USub, ast.UAdd)):
        exponent = exponent.operand
    value = exponent.value if isinstance(exponent, ast.Constant) else None
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= MAX_GUARD_EXPONENT):
        return False
    return not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(node.left))


_GUARD_NODES = (
    ast.Expression, ast.Load, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute,
    ast.Call, ast.Name, ast.Constant, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult,
    ast.FloorDiv, ast.Mod, ast.Pow, ast.Div, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)  # fmt: skip


def _guard_node_ok(node: ast.AST) -> bool:
    if not isinstance(node, _GUARD_NODES):
        return False
    if isinstance(node, ast.Name):
        return node.id in ("L", "math", *_GUARD_FUNCTIONS)
    if isinstance(node, ast.Attribute):
        return node.attr in _GUARD_CALLS or (
            isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in _GUARD_MATH | _GUARD_MATH_CONSTANTS
        )
    if isinstance(node, ast.Call):
        return _guard_call(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _guard_power(node)
    if isinstance(node, ast.Constant):
        value = node.value
        if type(value) is int:
            return abs(value) < 10**20
        return isinstance(value, (float, bool)) or (isinstance(value, str) and value.isidentifier())
    return True


def guard_ok(text: str) -> bool:
    """A guard as torch writes it (``L['x'].size()[0] <= 64``): sizes, strides and numbers of inputs named by
    identifiers, compared and combined with arithmetic of bounded cost (Note [guard cost]), nothing else. Guards
    are Python, which torch compiles: they are read with Python's own parser, then every node is checked."""
    if len(text) > MAX_GUARD_LENGTH:
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return all(_guard_node_ok(node) for node in ast.walk(tree))
