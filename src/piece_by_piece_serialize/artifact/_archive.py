"""Reading a PT2 archive without running anything in it.

Note [safe loading]
~~~~~~~~~~~~~~~~~~~
``torch.export.load`` trusts its file: a weight or a constant marked as pickled is unpickled, sample inputs
that fail the safe load are unpickled, every symbolic expression is given to ``sympy.sympify`` (which evaluates
Python), the guards are compiled with ``exec``, and the names of weights end up in generated code. So an
artifact is read here instead, with the archive opened by :mod:`zipfile` and torch's deserializer given only
what was checked first:

* weights and constants are raw bytes, each checked against its dtype, shape, strides and offset; anything
  marked as pickled, any custom or opaque object, any legacy ``.pt`` payload is refused; sample inputs are
  not read at all;
* in each program, every node's target is a ``torch.ops`` operator or a function of ``_operator``, ``math`` or
  ``torch.sym_*``; every symbolic expression is read by our own grammar (:mod:`..sym_expr`) and built into its
  sympy object by our own code, and torch is handed that object in place of the text (Note [expressions as
  objects]); every guard only compares sizes, strides and numbers of inputs named by
  identifiers; every name of a weight, buffer or constant is a dotted identifier.

Anything else raises :class:`ArtifactError` naming the archive and the member; a member that torch's
deserializer still refuses is reported the same way.

Imports: :mod:`._errors`, :mod:`._manifest`, :mod:`..sym_expr`; torch and sympy on use.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import SymExprError
from ..sym_expr import Integer, is_symbol_name, read_sym_expr
from ._errors import ArtifactError
from ._manifest import MANIFEST_FILE, Manifest, read_manifest

# The largest program description read (bytes); weights are bounded by their own metadata.
MAX_PROGRAM_BYTES = 1 << 30


class Archive:
    """The members of one PT2 archive, read and checked on demand (Note [safe loading])."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, EOFError, ValueError) as exc:
            raise ArtifactError(path, f"not an archive (a zip file): {exc}") from None
        names = self.zip.namelist()
        tops = {n.partition("/")[0] for n in names}
        if len(tops) != 1 or not all("/" in n for n in names):
            raise ArtifactError(path, "not a PT2 archive: its files are not all in one folder")
        self.prefix = tops.pop() + "/"
        self.names = {n[len(self.prefix) :] for n in names}
        if self.text("archive_format", 16) != "pt2":
            raise ArtifactError(path, "not a PT2 archive: no archive_format 'pt2'")

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, member: str, limit: int) -> bytes:
        if member not in self.names:
            raise ArtifactError(self.path, f"the archive has no {member}")
        info = self.zip.getinfo(self.prefix + member)
        if info.file_size > limit:
            raise ArtifactError(self.path, f"{member} is {info.file_size} bytes, more than {limit}")
        try:
            return self.zip.read(info)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:  # truncated or corrupt member
            raise ArtifactError(self.path, f"{member} cannot be read: {exc}") from None
        except Exception as exc:  # zlib.error and kin, raised by a damaged stream; reported, not swallowed
            raise ArtifactError(self.path, f"{member} cannot be read: {type(exc).__name__}: {exc}") from None

    def text(self, member: str, limit: int) -> str:
        try:
            return self.read(member, limit).decode("utf-8")
        except UnicodeDecodeError:
            raise ArtifactError(self.path, f"{member} is not UTF-8 text") from None

    def manifest(self) -> Manifest:
        return read_manifest(self.read(f"extra/{MANIFEST_FILE}", 1 << 26), self.path)

    def json(self, member: str, limit: int = MAX_PROGRAM_BYTES) -> Any:
        try:
            return json.loads(self.text(member, limit), parse_constant=_no_constant)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise ArtifactError(self.path, f"{member} is not JSON: {exc}") from None

    # ---- a program -------------------------------------------------------------------------------------

    def program(self, name: str) -> Any:
        """The exported program ``name`` of the archive, checked, then deserialized by torch."""
        if not name.isidentifier():
            raise ArtifactError(self.path, f"{name!r} is not a program name")
        if f"data/weights/{name}.pt" in self.names or f"data/constants/{name}.pt" in self.names:
            raise ArtifactError(self.path, f"the program {name} has legacy pickled weights or constants")
        member = f"models/{name}.json"
        serialized = self.json(member)
        _check_program(serialized, self.path, member)
        state_dict = self._payloads(f"data/weights/{name}_weights_config.json", "data/weights/", "weight_")
        constants = self._payloads(f"data/constants/{name}_constants_config.json", "data/constants/", "tensor_")
        from torch._export.serde import schema
        from torch._export.serde.serialize import ExportedProgramDeserializer, _dict_to_dataclass

        try:
            program = _dict_to_dataclass(schema.ExportedProgram, serialized)  # type: ignore[no-untyped-call]  # unannotated in torch
            return ExportedProgramDeserializer(None).deserialize(program, state_dict, constants, None)
        except Exception as exc:  # torch's own refusal of a member that passed the checks above, reported as ours
            raise ArtifactError(self.path, f"{member} does not deserialize: {type(exc).__name__}: {exc}") from None

    def _payloads(self, config_member: str, directory: str, prefix: str) -> dict[str, Any]:
        """The tensors of a weights or constants config: raw bytes only (Note [safe loading])."""
        config = self.json(config_member, 1 << 28)
        if not isinstance(config, dict) or set(config) != {"config"} or not isinstance(config["config"], dict):
            raise ArtifactError(self.path, f"{config_member} is not a payload config")
        bases: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for fqn, meta in config["config"].items():
            where = f"{config_member} entry {fqn!r}"
            if not _dotted(fqn):
                raise ArtifactError(self.path, f"{where}: not a dotted name of identifiers")
            if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
                raise ArtifactError(self.path, f"{where}: a pickled payload, which loading would unpickle; refused")
            path_name = meta.get("path_name")
            if not isinstance(path_name, str) or not path_name.startswith(prefix) or not path_name[len(prefix) :].isdigit():
                raise ArtifactError(self.path, f"{where}: {path_name!r} is not a {prefix}<n> payload")
            out[fqn] = self._tensor(meta, directory + path_name, where, bases)
        return out

    def _tensor(self, meta: dict[str, Any], member: str, where: str, bases: dict[str, Any]) -> Any:
        import torch
        from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

        tm = meta.get("tensor_meta")
        if not isinstance(tm, dict):
            raise ArtifactError(self.path, f"{where}: no tensor_meta")
        dtype = _SERIALIZE_TO_TORCH_DTYPE.get(tm.get("dtype")) if type(tm.get("dtype")) is int else None
        if dtype is None:
            raise ArtifactError(self.path, f"{where}: unknown dtype {tm.get('dtype')!r}")
        sizes, strides, offset = _ints(tm.get("sizes")), _ints(tm.get("strides")), _ints([tm.get("storage_offset")])
        if sizes is None or strides is None or offset is None or len(sizes) != len(strides):
            raise ArtifactError(self.path, f"{where}: sizes, strides and offset must be integers, as many sizes as strides")
        device = tm.get("device")
        if not isinstance(device, dict) or device.get("type") != "cpu":
            raise ArtifactError(self.path, f"{where}: only cpu tensors are read, not {device!r}")
        item = torch.empty((), dtype=dtype).element_size()
        if member not in bases:
            data = self.read(member, 1 << 40)
            if len(data) % item:
                raise ArtifactError(self.path, f"{member}: {len(data)} bytes is not a whole number of {dtype} items")
            bases[member] = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        base = bases[member]
        numel = math.prod(sizes)
        extent = offset[0] + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) + 1 if numel else 0
        if base.dtype != dtype or extent > base.numel() or any(st < 0 for st in strides):
            raise ArtifactError(self.path, f"{where}: the tensor does not fit the {base.numel()} items of {member}")
        tensor = torch.as_strided(base, sizes, strides, offset[0]) if numel else torch.empty(sizes, dtype=dtype)
        if meta.get("is_param") is True:
            return torch.nn.Parameter(tensor, requires_grad=tm.get("requires_grad") is True)
        return tensor


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _ints(values: Any) -> list[int] | None:
    if not isinstance(values, list):
        return None
    out = []
    for v in values:
        if not isinstance(v, dict) or set(v) != {"as_int"} or type(v["as_int"]) is not int or not 0 <= v["as_int"] < 2**48:
            return None
        out.append(v["as_int"])
    return out


def _dotted(name: Any) -> bool:
    """A weight's dotted name: identifiers and indices (``layers.0.weight``), nothing that could leave the quotes
    torch's generated code puts it in."""
    parts = name.split(".") if isinstance(name, str) and name else [""]  # a module path, not one of our languages
    return all(p.isidentifier() or (p.isascii() and p.isdigit()) for p in parts)


# ---------------------------------------------------------------------------------------------------
# what a program may hold (Note [safe loading])


def _walk(data: Any, path: str = "") -> Iterator[tuple[str, str, Any, Any]]:
    """Every (path, key, value, owner) of a parsed JSON document."""
    stack = [(data, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                yield where, key, value, item
                stack.append((value, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{i}]") for i, value in enumerate(item))


# Note [expressions as objects]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's deserializer reads every symbolic size, float and boolean of a program with
# GraphModuleDeserializer._parse_sym_expr, the only place it gives file text to sympy.sympify (range constraints are
# keyed by str() of what they bound and looked up, never parsed, but checked here: Note [range constraint keys];
# guards are Python, checked by _guard_ok). sympify
# returns a sympy object it is given unchanged, without parsing anything (sympy's __sympy__ protocol), and
# _dict_to_dataclass copies a string field's value as it is. So _check_program replaces each expr_str of the parsed
# document by the object our reader built (sym_expr: our grammar, our conversion, bounded cost) before torch
# sees the document: torch then parses no expression text at all, and builds from the same objects sympify would
# have made (tests/sym_expr checks they are equal on every expression of the tiny models' exports). An equal
# text, which recurs across a program's nodes, is read once.


def _check_program(data: Any, source: str, member: str) -> None:
    """Check ``data``, a program's parsed JSON document, and replace each expression text in it by its sympy
    object (Note [expressions as objects])."""
    if not isinstance(data, dict) or not isinstance(data.get("graph_module"), dict):
        raise ArtifactError(source, f"{member} is not an exported program")
    expressions: dict[str, Any] = {}
    for where, key, value, owner in _walk(data):
        bad = None
        if key == "target" and "inputs" in owner and "outputs" in owner:
            bad = None if _allowed_target(value) else f"calls {value!r}, which is not a torch operator"
        elif key in _NAME_KEYS and value is not None and value != "" and not _dotted(value):
            bad = f"names {value!r}, which is not a dotted name"
        elif key == "expr_str":
            bad = _read_expression(value, expressions)
            if bad is None:
                owner[key] = expressions[value]
        elif key == "guards_code":
            guards = value if isinstance(value, list) else [value]
            bad = next((f"has the guard {g!r}, which is not a comparison of sizes" for g in guards if not (isinstance(g, str) and _guard_ok(g))), None)
        elif key in ("as_custom_obj", "custom_obj", "as_opaque_obj"):
            bad = "holds a custom object, which loading would unpickle"
        if bad is not None:
            raise ArtifactError(source, f"{member} at {where or '.'}.{key} {bad}")
    # after the walk: a range may be keyed by any expression read above
    bad = _range_constraints_problem(data.get("range_constraints", {}), expressions.values())
    if bad is not None:
        raise ArtifactError(source, f"{member} at .range_constraints {bad}")


def _read_expression(text: Any, read: dict[str, Any]) -> str | None:
    """Read ``text`` into ``read[text]`` (once per text); what is wrong with it, or None."""
    if not isinstance(text, str):
        return f"has the expression {text!r}, which is not a string"
    if text not in read:
        try:
            read[text] = read_sym_expr(text)
        except SymExprError as err:
            return f"has an expression that is refused: {err}"
    return None


# Note [range constraint keys]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch keys a program's ranges by str() of what they bound: a symbol (s77, u0) or an expression of a derived
# dimension ("s13 + 4"), and its deserializer only looks them up by the str() of each subexpression it reads, never
# parses them, but for one thing: a key that starts with an unbacked prefix (u, zuf) has its rest read by int() and
# the deserializer's counter bumped that many times, one step at a time ("u1000000000" took minutes; int() also
# reads "u 12" and "u1_0"). So a key is either a symbol's name of the language of at most MAX_RANGE_NAME_LENGTH
# characters (torch's counters name symbols far below that), or the str() of a subexpression of the program's own
# expressions (which holds an operator, so no int() reads it), each bound an integer of at most 20 digits or null.
MAX_RANGE_NAME_LENGTH = 8


def _subexpression_names(roots: Iterable[Any]) -> set[str]:
    """str() of every subexpression of ``roots`` that torch looks a range up by (not numbers, not booleans)."""
    seen: set[Any] = set()
    stack = list(roots)
    while stack:
        item = stack.pop()
        if item in seen or item.is_Integer or item.is_Float or item.is_Boolean:
            continue
        seen.add(item)
        stack.extend(item.args)
    return {str(item) for item in seen}


def _range_constraints_problem(constraints: Any, expressions: Iterable[Any]) -> str | None:
    """What is wrong with a program's range constraints (Note [range constraint keys]), or None."""
    if not isinstance(constraints, dict):
        return "is not a table of symbols"
    others = [name for name in constraints if not (is_symbol_name(name) and len(name) <= MAX_RANGE_NAME_LENGTH)]
    known = _subexpression_names(expressions) if others else set()
    for name in others:
        if name not in known:
            return (
                f"names {name!r}, which is neither a symbol's name of at most {MAX_RANGE_NAME_LENGTH} characters nor "
                "an expression of the program"
            )
    for name, bounds in constraints.items():
        if not isinstance(bounds, dict) or not set(bounds) <= {"min_val", "max_val"}:
            return f"bounds {name} by {bounds!r}, which is not a min_val and a max_val"
        for bound in bounds.values():
            if bound is None:
                continue
            if type(bound) is not int:
                return f"bounds {name} by {bound!r}, which is not an integer or null"
            try:
                Integer(bound)  # the language's integers: at most MAX_INTEGER_DIGITS digits
            except ValueError as err:
                return f"bounds {name} by a number too large: {err}"
    return None


# keys whose values name a weight, a buffer, a constant or a submodule: torch puts these names in generated code
_NAME_KEYS = frozenset({"target", "parameter_name", "buffer_name", "tensor_constant_name", "custom_obj_name", "fqn"})


def _allowed_target(target: Any) -> bool:
    import torch

    if not isinstance(target, str):
        return False
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
    parts = rest.split(".")  # torch's dotted target, walked by attribute on torch.ops only
    if not parts or parts[0] != "ops" or not all(p.isidentifier() for p in parts):
        return False
    obj: Any = torch
    for part in parts:
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator))


_GUARD_CALLS = frozenset({"size", "stride", "storage_offset", "dim", "numel"})
# functions torch's guards call on numbers: Python's own arithmetic builtins and torch's sympy interpreter's
_GUARD_FUNCTIONS = frozenset({"min", "max", "abs", "int", "float", "bool", "round", "IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"})


def _math_function(name: str) -> bool:
    return not name.startswith("_") and callable(getattr(math, name, None))


def _guard_call(node: ast.Call) -> bool:
    """``x.size()`` and kin without arguments, or a number function (``min(a, b)``, ``math.floor(a)``)."""
    if node.keywords:
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _GUARD_CALLS:
        return not node.args
    if isinstance(func, ast.Attribute):
        return isinstance(func.value, ast.Name) and func.value.id == "math" and _math_function(func.attr)
    return isinstance(func, ast.Name) and func.id in _GUARD_FUNCTIONS


def _guard_ok(text: str) -> bool:
    """A guard as torch writes it (``L['x'].size()[0] <= 64``): sizes, strides and numbers of inputs named by
    identifiers, compared and combined with arithmetic, nothing else."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    allowed = (
        ast.Expression, ast.Load, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute,
        ast.Call, ast.Name, ast.Constant, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub, ast.Mult,
        ast.FloorDiv, ast.Mod, ast.Pow, ast.Div, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
    )  # fmt: skip
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return False
        if isinstance(node, ast.Name) and node.id not in ("L", "math", *_GUARD_FUNCTIONS):
            return False
        if isinstance(node, ast.Attribute) and not (
            node.attr in _GUARD_CALLS or (isinstance(node.value, ast.Name) and node.value.id == "math" and _math_function(node.attr))
        ):
            return False
        if isinstance(node, ast.Call) and not _guard_call(node):
            return False
        if isinstance(node, ast.Constant) and not (
            isinstance(node.value, (int, float, bool)) or (isinstance(node.value, str) and node.value.isidentifier())
        ):
            return False
    return True
