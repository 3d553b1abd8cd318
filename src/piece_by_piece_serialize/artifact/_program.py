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
newlines: it must hold no other line break). In the same walk, each symbolic expression is read by our own
grammar and replaced by the object it builds (Note [expressions as objects]), each guard is checked against the
rule of Note [guard cost], and the keys of ``range_constraints`` (expressions such as ``s13 + 4``) against the
expressions read (Note [range constraint keys]); the operator each node calls is checked by the archive reader
once the load has registered its own (Note [operator allowlist]).

Imports: :mod:`._errors`, :mod:`._rules`, :mod:`..sym_expr`; torch on use (its serde schema).
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import json
import keyword
import types
import typing
from typing import Any

from ..errors import SymExprError
from ..sym_expr import is_symbol_name, read_sym_expr
from ._errors import ArtifactError
from ._rules import guard_ok

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


# Note [expressions as objects]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's deserializer reads every symbolic size, float and boolean of a program with
# GraphModuleDeserializer._parse_sym_expr, the only place it gives file text to sympy.sympify (range constraints are
# keyed by str() of what they bound and looked up, never parsed, but checked here: Note [range constraint keys];
# guards are Python, checked by guard_ok in :mod:`._rules`). sympify returns a sympy object it is given unchanged,
# without parsing anything (sympy's __sympy__ protocol), and _dict_to_dataclass copies a string field's value as it
# is. So the strict reader, on each SymExpr it checks, replaces its expr_str by the object our reader built
# (sym_expr: our grammar, our conversion, bounded cost) before torch sees the document: torch then parses no
# expression text at all, and builds from the same objects sympify would have made (tests/sym_expr checks they
# are equal on every expression of the tiny models' exports). An equal text, which recurs across a program's
# nodes, is read once: the texts read so far in the document being checked are in _READ.
# (the checkers are made once per process: the table of the document under way is the context's, so that loads
# in two threads each see their own)
_READ: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("pbp_expressions_read")


def _sym_expr(data: dict[str, Any]) -> None:
    text, read = data["expr_str"], _READ.get()
    if text not in read:
        try:
            read[text] = read_sym_expr(text)
        except SymExprError as err:
            raise _Bad(f"has an expression that is refused: {err}", ".expr_str") from None
    data["expr_str"] = read[text]


def _exported_program(data: dict[str, Any]) -> None:
    """What the document holds beside its graph: guards of bounded cost, ranges keyed as torch keys them."""
    bad = next((g for g in data.get("guards_code", ()) if not guard_ok(g)), None)
    if bad is not None:
        raise _Bad(f"has the guard {bad[:80]!r}, which is not a comparison of sizes", ".guards_code")
    # after the fields: a range may be keyed by any expression the walk read
    problem = _range_constraints_problem(data.get("range_constraints", {}), _READ.get().values())
    if problem is not None:
        raise _Bad(problem, ".range_constraints")


# Note [range constraint keys]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch keys a program's ranges by str() of what they bound: a symbol (s77, u0) or an expression of a derived
# dimension ("s13 + 4"), and its deserializer only looks them up by the str() of each subexpression it reads, never
# parses them, but for one thing: a key that starts with an unbacked prefix (u, zuf) has its rest read by int() and
# the deserializer's counter bumped that many times, one step at a time ("u1000000000" took minutes; int() also
# reads "u 12" and "u1_0"). So a key is either a symbol's name of the language of at most MAX_RANGE_NAME_LENGTH
# characters (torch's counters name symbols far below that), or the str() of a subexpression of the program's own
# expressions (which holds an operator, so no int() reads it); each bound is a 64-bit integer or null, which the
# schema's types require.
MAX_RANGE_NAME_LENGTH = 8


def _subexpression_names(roots: typing.Iterable[Any]) -> set[str]:
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


def _range_constraints_problem(constraints: dict[str, Any], expressions: typing.Iterable[Any]) -> str | None:
    """What is wrong with a program's range constraints (Note [range constraint keys]), or None."""
    others = [name for name in constraints if not (is_symbol_name(name) and len(name) <= MAX_RANGE_NAME_LENGTH)]
    known = _subexpression_names(expressions) if others else set()
    for name in others:
        if name not in known:
            return (
                f"names {name[:60]!r}, which is neither a symbol's name of at most {MAX_RANGE_NAME_LENGTH} characters "
                "nor an expression of the program"
            )
    return None


_EXTRA: dict[str, typing.Callable[[dict[str, Any]], None]] = {
    "Graph": _graph, "TensorMeta": _tensor_meta, "ModuleCallEntry": _module_call_entry,
    "ModuleCallSignature": _module_call_signature, "Node": _node, "SymExpr": _sym_expr,
    "ExportedProgram": _exported_program,
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

    token = _READ.set({})
    try:
        _checker(schema.ExportedProgram)(data, 0)
    except _Bad as bad:
        raise ArtifactError(source, f"{member} at {''.join(reversed(bad.path)) or '.'}: {bad.message}") from None
    except RecursionError:
        raise ArtifactError(source, f"{member}: nested too deep") from None
    finally:
        _READ.reset(token)
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


# Note [documents as dataclasses]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's deserializer takes a program as its schema's dataclasses, which torch's own _dict_to_dataclass makes from
# the JSON: it reads the type hints of a dataclass (typing.get_type_hints) again for every object it builds, a
# hundred thousand times for the four programs of the Qwen3-Next docs archive (7 s of its 25 s load). The walk
# below builds the same objects from a document the strict reader has checked (so every type is one it knows):
# each schema type's converter is made once per process, as its checker is. What it makes is what torch's makes:
# an optional is None or its type, a list its items (an empty one as it is), a dict its values, a union the member it
# holds (``create``), a dataclass the fields the document has (the others keep their defaults), a float float()
# (which reads "Infinity" and "NaN"), anything else as it is (the enums stay integers, a SymExpr's text the object our
# reader put in its place: Note [expressions as objects]). tests/artifact checks the two equal on every program of
# the test models' archives.
Converter = typing.Callable[[Any], Any]
_CONVERTERS: dict[Any, Converter] = {}


def as_dataclasses(data: dict[str, Any]) -> Any:
    """A checked program document as torch's ``schema.ExportedProgram`` (Note [documents as dataclasses])."""
    from torch._export.serde import schema

    return _converter(schema.ExportedProgram)(data)


def _converter(hint: Any) -> Converter:
    found = _CONVERTERS.get(hint)
    return found if found is not None else _make_converter(hint)


def _same(data: Any) -> Any:
    return data


def _make_converter(hint: Any) -> Converter:
    from torch._export.serde import schema
    from torch._export.serde.union import _Union

    origin = typing.get_origin(hint)
    convert: Converter
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]  # the schema's unions are Optional[T]
        item = _converter(inner)

        def convert(data: Any) -> Any:
            return None if data is None else item(data)
    elif origin is list:
        (inner,) = typing.get_args(hint)
        item = _converter(inner)

        def convert(data: Any) -> Any:
            return [item(x) for x in data] if data else data
    elif origin is dict:
        item = _converter(typing.get_args(hint)[1])

        def convert(data: Any) -> Any:
            return {key: item(x) for key, x in data.items()}
    elif hint is float:
        convert = float
    elif isinstance(hint, type) and (issubclass(hint, _Union) or dataclasses.is_dataclass(hint)):
        cls: Any = hint
        fields: dict[str, Converter] = {}  # filled below, once this converter is known: the schema is recursive
        if issubclass(cls, _Union):

            def convert(data: Any) -> Any:
                ((key, value),) = data.items()
                return cls.create(**{key: fields[key](value)})
        else:

            def convert(data: Any) -> Any:
                return cls(**{key: fields[key](value) for key, value in data.items() if key in fields})
        _CONVERTERS[hint] = convert
        hints = typing.get_type_hints(cls, globalns=vars(schema))
        fields.update((f.name, _converter(hints[f.name])) for f in dataclasses.fields(cls))
    else:
        convert = _same
    _CONVERTERS[hint] = convert
    return convert
