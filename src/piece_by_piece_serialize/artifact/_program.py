"""The strict reader of a program document: what torch's deserializer may be given, decided before it sees it.

Note [program documents]
~~~~~~~~~~~~~~~~~~~~~~~~
A program in the archive (``models/<name>.json``) is the JSON form of torch's ``schema.ExportedProgram``
(``torch/_export/serde/schema.py``). torch's deserializer turns it into an FX graph and FX turns the graph into
Python source, which it compiles: every name in the document (input and node names, the keys of the value tables,
``forward_arg_names``, keyword names of the operators' arguments, the keys in the pytree specs, weight names)
ends up in that source, most of them unquoted. :func:`check_program` walks the document against the schema's
own dataclasses (read from the installed torch, so the reference cannot drift) and refuses:

* a field the schema does not have, a missing field without a default, a union with other than one member, a
  value of another JSON type, an enum value torch does not define, an integer outside 64 bits;
* a name that is not an ASCII identifier (and not a Python keyword), or, for the dotted names of weights,
  buffers, constants and submodules (``fqn``), not a dotted path of ASCII identifiers and indices: ``é`` or a
  full-width letter passes ``str.isidentifier`` but Python NFKC-normalizes it, so two names could meet in the
  generated code;
* what this library never writes: custom objects, tokens, nested graphs (higher-order operators), operator
  arguments, loss and gradient outputs, named-tuple definitions, a pytree spec of another type than tuple,
  list or dict (each key an identifier), metadata keys other than torch's own;
* a document larger than :data:`MAX_PROGRAM_BYTES`, a string longer than :data:`MAX_STRING`, a tensor of
  more than :data:`MAX_RANK` dimensions, values nested deeper than :data:`MAX_DEPTH`.

What torch's deserializer would resolve by name from metadata (``torch_fn``, ``source_fn_stack``: debugging
aids) is dropped before it sees the document; a stack trace is kept (FX writes it as a comment, split on
newlines: it must hold no other line break). The operator a node calls and the symbolic expressions are
checked by the archive reader (Note [safe loading] in :mod:`._archive`), the keys of ``range_constraints``
(expressions such as ``s13 + 4``) among them.

Imports: :mod:`._errors`; torch on use (its serde schema).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import keyword
import types
import typing
from typing import Any

from ._errors import ArtifactError

# The largest program document read (bytes): json holds about six times its text in memory.
MAX_PROGRAM_BYTES = 64 << 20
MAX_STRING = 1 << 16  # a stack trace, an operator's string argument, a pytree spec
MAX_NAME = 256
MAX_RANK = 64
MAX_DEPTH = 16  # nested string-to-argument dicts, pytree specs

# (schema class, field) whose string is a plain identifier, and those that are a dotted path of them
_IDENTIFIER_FIELDS = {
    ("TensorArgument", "name"), ("TokenArgument", "name"), ("CustomObjArgument", "name"), ("GraphArgument", "name"),
    ("SymIntArgument", "as_name"), ("SymFloatArgument", "as_name"), ("SymBoolArgument", "as_name"),
    ("NamedArgument", "name"), ("Node", "name"), ("InputToConstantInputSpec", "name"), ("Device", "type"),
}  # fmt: skip
_DOTTED_FIELDS = {
    ("InputToParameterSpec", "parameter_name"), ("InputToBufferSpec", "buffer_name"),
    ("InputToTensorConstantSpec", "tensor_constant_name"), ("BufferMutationSpec", "buffer_name"),
    ("ParameterMutationSpec", "parameter_name"), ("UserInputMutationSpec", "user_input_name"), ("Node", "target"),
}  # fmt: skip
# (schema class, field) this library never writes; refused when present (a union member) or not empty
_NEVER = {
    ("Argument", "as_custom_obj"), ("Argument", "as_graph"), ("Argument", "as_operator"), ("InputSpec", "custom_obj"),
    ("InputSpec", "token"), ("OutputSpec", "token"), ("OutputSpec", "loss_output"),
    ("OutputSpec", "gradient_to_parameter"), ("OutputSpec", "gradient_to_user_input"),
    ("Graph", "custom_obj_values"), ("GraphModule", "treespec_namedtuple_fields"),
}  # fmt: skip
# metadata torch writes: kept as text, or dropped (the deserializer would look its values up by name)
_METADATA_KEPT = frozenset({"stack_trace", "nn_module_stack"})
_METADATA_DROPPED = frozenset({"torch_fn", "source_fn_stack", "custom"})
_SPEC_TYPES = frozenset({"builtins.tuple", "builtins.list", "builtins.dict"})
_FLOAT_WORDS = frozenset({"Infinity", "-Infinity", "NaN"})


def identifier(name: Any) -> bool:
    """A plain ASCII identifier that is not a keyword: what FX may write unquoted."""
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


def dotted(name: Any) -> bool:
    """A dotted path of ASCII identifiers and indices (``layers.0.weight``)."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isascii():
        return False
    return all(p.isidentifier() or p.isdigit() for p in name.split("."))  # a module path, not one of our languages


class _Reader:
    def __init__(self, source: str, member: str) -> None:
        self.source, self.member = source, member
        self.hints: dict[type, dict[str, Any]] = {}

    def fail(self, where: str, message: str) -> ArtifactError:
        return ArtifactError(self.source, f"{self.member} at {where or '.'}: {message}")

    def fields(self, cls: type) -> dict[str, Any]:
        found = self.hints.get(cls)
        if found is None:
            found = self.hints[cls] = typing.get_type_hints(cls)
        return found

    def value(self, data: Any, hint: Any, where: str, depth: int = 0) -> None:
        """``data`` is a value of the schema type ``hint``."""
        if depth > MAX_DEPTH:
            raise self.fail(where, f"values nested more than {MAX_DEPTH} deep")
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(hint) if a is not type(None)]
            if data is None and len(options) < len(typing.get_args(hint)):
                return
            (hint,) = options  # the schema's unions with None are Optional[T]
            origin = typing.get_origin(hint)
        if origin is list:
            if not isinstance(data, list):
                raise self.fail(where, f"expected a list, got {_kind(data)}")
            (item,) = typing.get_args(hint)
            for i, x in enumerate(data):
                self.value(x, item, f"{where}[{i}]", depth)
        elif origin is dict:
            if not isinstance(data, dict):
                raise self.fail(where, f"expected an object, got {_kind(data)}")
            _, item = typing.get_args(hint)
            for key, x in data.items():
                self.value(x, item, f"{where}.{key}", depth)
        elif isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            if type(data) is not int or data not in hint._value2member_map_:
                raise self.fail(where, f"expected a {hint.__name__} value, got {_shown(data)}")
        elif hint is bool:
            if type(data) is not bool:
                raise self.fail(where, f"expected a boolean, got {_kind(data)}")
        elif hint is int:
            if type(data) is not int or not -(2**63) <= data < 2**63:
                raise self.fail(where, f"expected a 64-bit integer, got {_shown(data)}")
        elif hint is float:
            if not (type(data) in (int, float) or data in _FLOAT_WORDS):
                raise self.fail(where, f"expected a number, got {_shown(data)}")
        elif hint is str:
            if not isinstance(data, str) or len(data) > MAX_STRING:
                raise self.fail(where, f"expected a string of at most {MAX_STRING} characters, got {_kind(data)}")
        elif dataclasses.is_dataclass(hint):
            self.record(data, hint, where, depth)
        else:  # pragma: no cover - a schema type this reader does not know: a newer torch
            raise self.fail(where, f"the schema type {hint!r} is not known to this reader")

    def record(self, data: Any, cls: Any, where: str, depth: int) -> None:
        from torch._export.serde.union import _Union

        if not isinstance(data, dict):
            raise self.fail(where, f"expected an object ({cls.__name__}), got {_kind(data)}")
        hints = self.fields(cls)
        unknown = [k for k in data if k not in hints]
        if unknown:
            raise self.fail(where, f"{cls.__name__} has no field {unknown[0]!r}")
        if issubclass(cls, _Union):
            if len(data) != 1:
                raise self.fail(where, f"a {cls.__name__} holds exactly one of its members, got {len(data)}")
        else:
            required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            missing = [k for k in required if k not in data]
            if missing:
                raise self.fail(where, f"{cls.__name__} without its field {missing[0]!r}")
        name = cls.__name__
        for key, value in data.items():
            at = f"{where}.{key}"
            if (name, key) in _NEVER and (issubclass(cls, _Union) or value):
                raise self.fail(at, "holds what this library never writes (custom objects, tokens, nested graphs, gradients); refused")
            self.value(value, hints[key], at, depth + 1 if key == "as_string_to_argument" else depth)
            if (name, key) in _IDENTIFIER_FIELDS and not (value is None or identifier(value)):
                raise self.fail(at, f"{_shown(value)} is not an ASCII identifier")
            if (name, key) in _DOTTED_FIELDS and not dotted(value):
                raise self.fail(at, f"{_shown(value)} is not a dotted path of ASCII identifiers")
        self.extra(data, name, where)

    def extra(self, data: dict[str, Any], name: str, where: str) -> None:
        """The checks of one record beyond its types: names in keys and lists, specs, metadata, ranks."""
        if name == "Graph":
            for table in ("tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values"):
                bad = next((k for k in data.get(table, {}) if not identifier(k)), None)
                if bad is not None:
                    raise self.fail(f"{where}.{table}", f"the key {_shown(bad)} is not an ASCII identifier")
        elif name == "TensorMeta":
            if len(data["sizes"]) > MAX_RANK or len(data["sizes"]) != len(data["strides"]):
                raise self.fail(where, f"a tensor has at most {MAX_RANK} dimensions, as many strides as sizes")
        elif name == "ModuleCallEntry":
            if data["fqn"] != "" and not dotted(data["fqn"]):
                raise self.fail(f"{where}.fqn", f"{_shown(data['fqn'])} is not a dotted path of ASCII identifiers")
        elif name == "ModuleCallSignature":
            names = data.get("forward_arg_names") or []
            bad = next((n for n in names if not identifier(n)), None)
            if bad is not None:
                raise self.fail(f"{where}.forward_arg_names", f"{_shown(bad)} is not an ASCII identifier")
            for key in ("in_spec", "out_spec"):
                self.spec(data[key], f"{where}.{key}")
        elif name == "Node":
            for key, text in data["metadata"].items():
                if key not in _METADATA_KEPT and key not in _METADATA_DROPPED:
                    raise self.fail(f"{where}.metadata", f"the metadata {_shown(key)} is not torch's")
                allowed = "\n" if key == "stack_trace" else ""
                if any(not (" " <= c <= "~" or c in allowed) for c in text):
                    raise self.fail(f"{where}.metadata.{key}", "holds a character other than printable ASCII")

    def spec(self, text: str, where: str) -> None:
        """A pytree spec as torch writes it (``[1, {"type": ..., "context": ..., "children_spec": [...]}]``)."""
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            raise self.fail(where, "not a pytree spec (JSON)") from None
        if not isinstance(parsed, list) or len(parsed) != 2 or parsed[0] != 1:
            raise self.fail(where, "not a pytree spec of version 1")
        stack = [(parsed[1], 0)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH or not isinstance(node, dict) or set(node) != {"type", "context", "children_spec"}:
                raise self.fail(where, f"not a pytree spec node nested at most {MAX_DEPTH} deep")
            kind, context, children = node["type"], node["context"], node["children_spec"]
            if not isinstance(children, list):
                raise self.fail(where, "a pytree spec node without a list of children")
            if kind is None:
                ok = context is None and not children
            elif kind in ("builtins.tuple", "builtins.list"):
                ok = context == "null"
            elif kind == "builtins.dict":
                keys = json.loads(context) if isinstance(context, str) and len(context) <= MAX_STRING else None
                ok = isinstance(keys, list) and len(keys) == len(children) and all(identifier(k) for k in keys)
            else:
                raise self.fail(where, f"a pytree spec of a {_shown(kind)}: only tuples, lists and dicts are read")
            if not ok:
                raise self.fail(where, f"a pytree spec node of {kind or 'a leaf'} with the context {_shown(context)}")
            stack.extend((c, depth + 1) for c in children)


def check_program(data: Any, source: str, member: str) -> Any:
    """``data`` (a parsed program document) checked against torch's schema (Note [program documents]); returns
    it with the metadata torch would resolve by name removed. Raises :class:`ArtifactError` naming ``member``."""
    from torch._export.serde import schema

    reader = _Reader(source, member)
    try:
        reader.record(data, schema.ExportedProgram, "", 0)
    except RecursionError:
        raise reader.fail("", "nested too deep") from None
    for node in _all_nodes(data["graph_module"]["graph"]):
        for key in _METADATA_DROPPED & node["metadata"].keys():
            del node["metadata"][key]
    return data


def _all_nodes(graph: dict[str, Any]) -> list[dict[str, Any]]:
    return list(graph["nodes"])  # nested graphs are refused (_NEVER)


def _kind(data: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number", type(None): "null"}.get(
        type(data), type(data).__name__
    )


def _shown(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."
