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


class _Bad(Exception):
    """A refusal inside the document; ``path`` is filled, innermost part first, as it propagates (the success path
    builds no path at all)."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(reversed(path))


def _at(bad: _Bad, part: str) -> _Bad:
    bad.path.append(part)
    return bad


Checker = typing.Callable[[Any, int], None]
# one checker per schema type, made once per process from torch's dataclasses (their hints never change)
_CHECKERS: dict[Any, Checker] = {}


def _checker(hint: Any) -> Checker:
    found = _CHECKERS.get(hint)
    if found is None:
        found = _compile(hint)
    return found


def _compile(hint: Any) -> Checker:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]  # the schema's unions are Optional[T]
        item = _checker(inner)

        def optional(data: Any, depth: int) -> None:
            if data is not None:
                item(data, depth)

        return optional
    if origin is list:
        (inner,) = typing.get_args(hint)
        item = _checker(inner)

        def listed(data: Any, depth: int) -> None:
            if type(data) is not list:
                raise _Bad(f"expected a list, got {_kind(data)}")
            for i, x in enumerate(data):
                try:
                    item(x, depth)
                except _Bad as bad:
                    raise _at(bad, f"[{i}]") from None

        return listed
    if origin is dict:
        _, inner = typing.get_args(hint)
        item = _checker(inner)

        def mapping(data: Any, depth: int) -> None:
            if type(data) is not dict:
                raise _Bad(f"expected an object, got {_kind(data)}")
            for key, x in data.items():
                try:
                    item(x, depth)
                except _Bad as bad:
                    raise _at(bad, f".{key}") from None

        return mapping
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        values, name = frozenset(hint._value2member_map_), hint.__name__

        def member(data: Any, depth: int) -> None:
            if type(data) is not int or data not in values:
                raise _Bad(f"expected a {name} value, got {_shown(data)}")

        return member
    if hint in _SCALARS:
        return _SCALARS[hint]
    if dataclasses.is_dataclass(hint):
        return _record(hint)
    raise TypeError(f"the schema type {hint!r} is not known to this reader")  # a newer torch: found by the tests


def _boolean(data: Any, depth: int) -> None:
    if type(data) is not bool:
        raise _Bad(f"expected a boolean, got {_kind(data)}")


def _integer(data: Any, depth: int) -> None:
    if type(data) is not int or not -(2**63) <= data < 2**63:
        raise _Bad(f"expected a 64-bit integer, got {_shown(data)}")


def _number(data: Any, depth: int) -> None:
    if not (type(data) in (int, float) or data in _FLOAT_WORDS):
        raise _Bad(f"expected a number, got {_shown(data)}")


def _string(data: Any, depth: int) -> None:
    if type(data) is not str or len(data) > MAX_STRING:
        raise _Bad(f"expected a string of at most {MAX_STRING} characters, got {_kind(data)}")


_SCALARS: dict[Any, Checker] = {bool: _boolean, int: _integer, float: _number, str: _string}
_PLAIN, _IDENTIFIER, _DOTTED, _REFUSED = range(4)


def _record(cls: Any) -> Checker:
    """The checker of one schema dataclass: its fields, the names among them, and the checks of :func:`_extra`."""
    from torch._export.serde.union import _Union

    fields: dict[str, tuple[Checker, int]] = {}
    name = cls.__name__
    union = issubclass(cls, _Union)
    required = frozenset(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)

    def record(data: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _Bad(f"values nested more than {MAX_DEPTH} deep")
        if type(data) is not dict:
            raise _Bad(f"expected an object ({name}), got {_kind(data)}")
        for key, value in data.items():
            spec = fields.get(key)
            if spec is None:
                raise _Bad(f"{name} has no field {key!r}")
            check, kind = spec
            try:
                if kind == _REFUSED and (union or value):
                    raise _Bad("holds what this library never writes (custom objects, tokens, nested graphs, gradients); refused")
                check(value, depth + 1 if key == "as_string_to_argument" else depth)
                if kind == _IDENTIFIER and not (value is None or identifier(value)):
                    raise _Bad(f"{_shown(value)} is not an ASCII identifier")
                if kind == _DOTTED and not dotted(value):
                    raise _Bad(f"{_shown(value)} is not a dotted path of ASCII identifiers")
            except _Bad as bad:
                raise _at(bad, f".{key}") from None
        if union and len(data) != 1:
            raise _Bad(f"a {name} holds exactly one of its members, got {len(data)}")
        if not union and not required <= data.keys():
            raise _Bad(f"{name} without its field {sorted(required - data.keys())[0]!r}")
        if extra is not None:
            extra(data)

    _CHECKERS[cls] = record  # before its fields: the schema is recursive (an Argument holds Arguments)
    hints = typing.get_type_hints(cls)
    for key in (f.name for f in dataclasses.fields(cls)):
        hint = hints[key]
        kind = _IDENTIFIER if (name, key) in _IDENTIFIER_FIELDS else _DOTTED if (name, key) in _DOTTED_FIELDS else _REFUSED if (name, key) in _NEVER else _PLAIN
        fields[key] = (_checker(hint), kind)
    extra = _EXTRA.get(name)
    return record


def _graph(data: dict[str, Any]) -> None:
    for table in ("tensor_values", "sym_int_values", "sym_bool_values", "sym_float_values"):
        bad = next((k for k in data.get(table, ()) if not identifier(k)), None)
        if bad is not None:
            raise _Bad(f"the key {_shown(bad)} is not an ASCII identifier", f".{table}")


def _tensor_meta(data: dict[str, Any]) -> None:
    if len(data["sizes"]) > MAX_RANK or len(data["sizes"]) != len(data["strides"]):
        raise _Bad(f"a tensor has at most {MAX_RANK} dimensions, as many strides as sizes")


def _module_call_entry(data: dict[str, Any]) -> None:
    if data["fqn"] != "" and not dotted(data["fqn"]):
        raise _Bad(f"{_shown(data['fqn'])} is not a dotted path of ASCII identifiers", ".fqn")


def _module_call_signature(data: dict[str, Any]) -> None:
    bad = next((n for n in data.get("forward_arg_names") or () if not identifier(n)), None)
    if bad is not None:
        raise _Bad(f"{_shown(bad)} is not an ASCII identifier", ".forward_arg_names")
    for key in ("in_spec", "out_spec"):
        _spec(data[key], f".{key}")


def _node(data: dict[str, Any]) -> None:
    for key, text in data["metadata"].items():
        if key not in _METADATA_KEPT and key not in _METADATA_DROPPED:
            raise _Bad(f"the metadata {_shown(key)} is not torch's", ".metadata")
        if not text.isascii() or not (text.isprintable() or (key == "stack_trace" and text.replace("\n", "").isprintable())):
            raise _Bad("holds a character other than printable ASCII", f".metadata.{key}")


_EXTRA: dict[str, typing.Callable[[dict[str, Any]], None]] = {
    "Graph": _graph, "TensorMeta": _tensor_meta, "ModuleCallEntry": _module_call_entry,
    "ModuleCallSignature": _module_call_signature, "Node": _node,
}  # fmt: skip


def _spec(text: str, where: str) -> None:
    """A pytree spec as torch writes it (``[1, {"type": ..., "context": ..., "children_spec": [...]}]``)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        raise _Bad("not a pytree spec (JSON)", where) from None
    if not isinstance(parsed, list) or len(parsed) != 2 or parsed[0] != 1:
        raise _Bad("not a pytree spec of version 1", where)
    stack = [(parsed[1], 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH or not isinstance(node, dict) or set(node) != {"type", "context", "children_spec"}:
            raise _Bad(f"not a pytree spec node nested at most {MAX_DEPTH} deep", where)
        kind, context, children = node["type"], node["context"], node["children_spec"]
        if not isinstance(children, list):
            raise _Bad("a pytree spec node without a list of children", where)
        if kind is None:
            ok = context is None and not children
        elif kind in ("builtins.tuple", "builtins.list"):
            ok = context == "null"
        elif kind == "builtins.dict":
            try:
                keys = json.loads(context) if isinstance(context, str) else None
            except (ValueError, RecursionError):
                keys = None
            ok = isinstance(keys, list) and len(keys) == len(children) and all(identifier(k) for k in keys)
        else:
            raise _Bad(f"a pytree spec of a {_shown(kind)}: only tuples, lists and dicts are read", where)
        if not ok:
            raise _Bad(f"a pytree spec node of {kind or 'a leaf'} with the context {_shown(context)}", where)
        stack.extend((c, depth + 1) for c in children)


def check_program(data: Any, source: str, member: str) -> Any:
    """``data`` (a parsed program document) checked against torch's schema (Note [program documents]); returns
    it with the metadata torch would resolve by name removed. Raises :class:`ArtifactError` naming ``member``."""
    from torch._export.serde import schema

    try:
        _checker(schema.ExportedProgram)(data, 0)
    except _Bad as bad:
        raise ArtifactError(source, f"{member} at {''.join(reversed(bad.path)) or '.'}: {bad.message}") from None
    except RecursionError:
        raise ArtifactError(source, f"{member}: nested too deep") from None
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
