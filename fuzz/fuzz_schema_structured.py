"""Fuzz harness, structure-aware: bytes -> a schema AST -> its text -> every schema property and torch.

Run: ``python fuzz/fuzz_schema_structured.py [libFuzzer flags] [corpus dirs]``.

The bytes are read as choices (:class:`_fuzzlib.ByteReader`) that build a ``FunctionSchema`` out of the
library's own AST classes: every type form (builtins, type variables, registered custom classes,
``T?``, ``T[]``, ``T[N]``, tuples, ``Dict``, ``Union``, ``Future``/``Await``/``RRef``), alias annotations
(sets, ``!`` writes, ``->`` after-sets, wildcards, the ``!`` shorthand), keyword-only arguments, varargs,
named and tuple returns, and a default of the right kind for each type (numbers across the whole double
and int64 ranges, strings with any characters, devices, dtype codes, lists). libFuzzer's byte mutations
thus become structural mutations that stay mostly valid and reach deep grammar paths a text mutator rarely
assembles.

Properties, for ``text = str(ast)``:

* everything ``fuzz_schema.check_text`` checks: only ``SchemaError`` escapes, linear call count, printing is
  a fixed point, names, and the differential against ``torch._C.parse_schema`` with the documented
  differences checked by rule;
* the builder only makes schemas that are valid and already in normal form unless it says otherwise
  (``normal``): for those, ``parse_schema(text)`` must accept the text and give back an AST equal to ``ast``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_schema  # noqa: E402
from _fuzzlib import ByteReader, Stats, fail, reporting, start  # noqa: E402

TARGET = "schema_structured"

# Findings reported and not yet fixed (fuzz/pending/schema/<name>.md): the builder avoids the construct
# so that a campaign keeps looking for new problems. Empty the set once fixed.
OPEN_FINDINGS: set[str] = set()
STATS = Stats(TARGET)

MAX_TYPE_NESTING = 5

_BASE_NAMES = (
    "Tensor", "Tensor", "Tensor", "int", "SymInt", "float", "complex", "bool", "str", "Scalar", "ScalarType",
    "Layout", "MemoryFormat", "Device", "Generator", "Quantizer", "Storage", "Stream", "QScheme", "Capsule",
    "Any", "AnyClassType", "AnyEnumType", "SymBool", "NoneType",
)  # fmt: skip
_FAKE_INT = frozenset(("SymInt", "ScalarType", "Layout", "MemoryFormat"))
_DICT_KEYS = ("int", "float", "complex", "Tensor", "Device", "str", "SymInt", "ScalarType", "bool")
_TYPEVARS = ("t", "t1", "k_v", "foo.Bar", "a.b.c")
# TorchBind classes registered by torch itself (torch checks registration; so do we, on request).
_CLASSES = (
    ("quantized", "Conv2dPackedParamsBase"), ("quantized", "LinearPackedParamsBase"), ("c10d", "ProcessGroup"),
    ("c10d", "Work"), ("rnn", "CellParamsBase"), ("sparse", "LinearPackedParamsBase"),
)  # fmt: skip
_ALIAS_NAMES = ("a", "b", "c", "k_new", "a0", "A", "_")
_IDENTS = ("self", "other", "x", "out", "input", "dim", "keepdim", "dtype", "alpha", "is_", "Nonex", "weight")
_IDENT_HEAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_IDENT_TAIL = _IDENT_HEAD + "0123456789"
_RESERVED = frozenset(
    "def if else elif while return is and or not in for global raise assert break continue del pass class "
    "import with as True False None Ellipsis NoneType".split()
)
_DEVICE_TYPES = ("cpu", "cuda", "meta", "xpu", "mps")
_FLOATS = (0.0, 1.0, -3.0, 0.5, 1e-05, 0.1, 1e300, 2.5e-308, 5e-324, -0.0, 9.3e18, 123456789.125)


class _Builder:
    """One schema from the reader. ``normal`` turns False when it builds something the parser rewrites."""

    def __init__(self, reader: ByteReader, ast: object) -> None:
        self.r = reader
        self.a = ast
        self.fresh = 0  # "!" shorthands are numbered in printing order, as the parser numbers them
        self.normal = True

    # -- names -----------------------------------------------------------------------------------------

    def ident(self) -> str:
        r = self.r
        if r.flag():
            return r.pick(_IDENTS)  # type: ignore[return-value]
        name = r.pick(_IDENT_HEAD) + r.text(8, _IDENT_TAIL)  # type: ignore[operator]
        return name if name not in _RESERVED else name + "_"

    def operator_name(self) -> object:
        r = self.r
        namespace = r.pick(("", "aten", "ns", "my_lib", ""))
        overload = r.pick(("", "", "out", "Tensor", "x1", "Scalar_out"))
        return self.a.OperatorName(namespace, self.ident(), overload)  # type: ignore[attr-defined]

    # -- aliases ---------------------------------------------------------------------------------------

    def alias(self, allowed: bool) -> object | None:
        r = self.r
        if not allowed or r.below(4) != 0:
            return None
        a = self.a
        if r.below(4) == 0:
            name = f"${self.fresh}"
            self.fresh += 1
            return a.AliasInfo((name,), (), True)  # type: ignore[attr-defined]

        def alias_set() -> tuple[str, ...]:
            names: list[str] = []
            for _ in range(1 + r.below(2)):
                name = r.pick(_ALIAS_NAMES)
                if name not in names:
                    names.append(name)  # type: ignore[arg-type]
            if r.below(4) == 0:
                names.append("*")  # a wildcard may only follow the names
            return tuple(names)

        before = alias_set()
        after = alias_set() if r.flag() else before
        return a.AliasInfo(before, after, r.flag())  # type: ignore[attr-defined]

    # -- types -----------------------------------------------------------------------------------------

    def type(self, depth: int, alias_ok: bool, size_ok: bool = False, in_container: bool = False) -> object:
        """A type; ``alias_ok`` where torch keeps annotations, ``size_ok`` at the top of an argument,
        ``in_container`` below a tuple, Dict, Union, Future, Await or RRef."""
        r, a = self.r, self.a
        kind = r.below(14) if depth < MAX_TYPE_NESTING else 0
        if kind <= 4:
            name = r.pick(_BASE_NAMES)
            if in_container and name in _FAKE_INT:
                self.normal = False  # torch (and the parser) store these as int inside container members
            return a.BaseType(name, self.alias(alias_ok))  # type: ignore[attr-defined]
        if kind == 5:
            return a.TypeVar(r.pick(_TYPEVARS), self.alias(alias_ok))  # type: ignore[attr-defined]
        if kind == 6:
            return a.ClassType(*r.pick(_CLASSES))  # type: ignore[attr-defined,misc]
        if kind == 7:
            elem = self.type(depth + 1, alias_ok, in_container=in_container)
            while isinstance(elem, a.OptionalType):  # type: ignore[attr-defined]
                elem = elem.elem  # T?? is written T? (and its alias numbering stays in order)
            if isinstance(elem, a.BaseType) and elem.name == "NoneType":  # type: ignore[attr-defined]
                return elem  # NoneType? is not a type
            return a.OptionalType(elem)  # type: ignore[attr-defined]
        if kind <= 9:
            elem = self.type(depth + 1, alias_ok, in_container=in_container)
            size = 1 + r.below(4) if size_ok and r.below(3) == 0 else None
            return a.ListType(elem, size, self.alias(alias_ok))  # type: ignore[attr-defined]
        if kind == 10:
            return a.TupleType(tuple(self.type(depth + 1, False, in_container=True) for _ in range(r.count(3))))  # type: ignore[attr-defined]
        if kind == 11:
            # torch: "only int, float, complex, Tensor, device and string keys are supported"
            key = a.BaseType(r.pick(_DICT_KEYS))  # type: ignore[attr-defined]
            if key.name in _FAKE_INT:
                self.normal = False
            value = self.type(depth + 1, False, in_container=True)
            return a.DictType(key, value, self.alias(alias_ok))  # type: ignore[attr-defined]
        if kind == 12:
            self.normal = False  # the parser normalises unions (flattening, order, None -> optional)
            members = tuple(self.type(depth + 1, False, in_container=True) for _ in range(2 + r.below(2)))
            if "union_scalar_optional" in OPEN_FINDINGS:
                members = tuple(m for m in members if not (isinstance(m, a.BaseType) and m.name == "Scalar"))  # type: ignore[attr-defined]
                if len(members) < 2:
                    members = (*members, a.BaseType("str"), a.BaseType("Tensor"))  # type: ignore[attr-defined]
            return a.UnionType(members, self.alias(alias_ok))  # type: ignore[attr-defined]
        wrapper = r.pick((a.FutureType, a.AwaitType, a.RRefType))  # type: ignore[attr-defined]
        return wrapper(self.type(depth + 1, False, in_container=True))  # type: ignore[operator]

    # -- defaults --------------------------------------------------------------------------------------

    def number(self, kind: str) -> object:
        r, a = self.r, self.a
        if kind == "int":
            value = r.signed()
            return a.IntValue(max(-(2**63), min(2**63 - 1, value)))  # type: ignore[attr-defined]
        if kind == "float":
            if r.flag():
                return a.FloatValue(r.pick(_FLOATS))  # type: ignore[attr-defined]
            mantissa, exponent = r.signed(), r.below(600) - 300
            return a.FloatValue(float(mantissa) * 10.0**exponent if abs(exponent) < 300 else float(mantissa))  # type: ignore[attr-defined]
        if kind == "complex":
            return a.ComplexValue(float(r.pick(_FLOATS)) * (1 if r.flag() else -1))  # type: ignore[attr-defined]
        return a.BoolValue(r.flag())  # type: ignore[attr-defined]

    def single(self) -> object:
        """Any single constant (for optional types)."""
        r, a = self.r, self.a
        kind = r.below(6)
        if kind == 0:
            return a.NoneValue()  # type: ignore[attr-defined]
        if kind == 1:
            return a.StrValue(r.text(12))  # type: ignore[attr-defined]
        return self.number(("int", "float", "complex", "bool")[kind - 2])

    def default(self, t: object) -> object | None:
        """A default that the parser reads back as the same value, or None when the type takes none."""
        r, a = self.r, self.a
        if isinstance(t, a.OptionalType):  # type: ignore[attr-defined]
            inner = t.elem  # type: ignore[attr-defined]
            if isinstance(inner, a.BaseType) and inner.name == "Device" and r.flag():  # type: ignore[attr-defined]
                return a.StrValue(r.pick(_DEVICE_TYPES))  # type: ignore[attr-defined]
            return self.single()
        if isinstance(t, a.ListType):  # type: ignore[attr-defined]
            elem = t.elem  # type: ignore[attr-defined]
            if not isinstance(elem, a.BaseType) or elem.alias is not None:  # type: ignore[attr-defined]
                return None
            kind = {"int": "int", "SymInt": "int", "float": "float", "bool": "bool", "complex": "complex"}.get(elem.name)
            if kind is None:
                return None
            n = t.size if t.size is not None and r.flag() else r.count(4)  # type: ignore[attr-defined]
            return a.ListValue(tuple(self.number(kind) for _ in range(n)))  # type: ignore[attr-defined]
        if not isinstance(t, a.BaseType):  # type: ignore[attr-defined]
            return None
        name = t.name  # type: ignore[attr-defined]
        if name in ("int", "SymInt", "ScalarType", "Layout", "MemoryFormat"):
            value = self.number("int")
            if name != "int" and name != "SymInt":
                value = a.IntValue(r.below(46))  # type: ignore[attr-defined]
            return value
        if name in ("float", "complex", "bool"):
            return self.number(name)
        if name == "Scalar":
            return self.number(r.pick(("int", "float", "complex", "bool")))  # type: ignore[arg-type]
        if name == "str":
            return a.StrValue(r.text(16))  # type: ignore[attr-defined]
        if name == "Device":
            index = r.below(8) if r.flag() else None
            return a.DeviceValue(r.pick(_DEVICE_TYPES), index)  # type: ignore[attr-defined]
        if name in ("Tensor", "Generator", "Quantizer"):
            return a.NoneValue()  # type: ignore[attr-defined]
        return None

    # -- the schema ------------------------------------------------------------------------------------

    def schema(self) -> object:
        r, a = self.r, self.a
        name = self.operator_name()
        arguments = []
        kwarg_only = False
        defaulted = False
        n_args = r.count(6)
        want_vararg = r.below(6) == 0
        for _ in range(n_args):
            t = self.type(0, True, size_ok=True)
            kwarg_only = kwarg_only or r.below(5) == 0
            default = None if want_vararg or r.flag() else self.default(t)
            is_list = isinstance(t, a.ListType)  # type: ignore[attr-defined]
            if default is None and defaulted and not kwarg_only and not is_list:
                kwarg_only = True  # torch: no positional non-default after a default (lists are exempt)
            defaulted = defaulted or (default is not None and not kwarg_only)
            arguments.append(a.Argument(self.ident(), t, default, kwarg_only))  # type: ignore[attr-defined]
        returns = []
        for _ in range(r.count(3)):
            t = self.type(0, True, size_ok=True)
            returns.append(a.Return(t, self.ident() if r.flag() else None))  # type: ignore[attr-defined]
        is_varret = r.below(8) == 0
        return a.FunctionSchema(name, tuple(arguments), tuple(returns), want_vararg, is_varret)  # type: ignore[attr-defined]


def build_schema(data: bytes) -> tuple[object | None, bool]:
    """``(schema AST, normal)`` for ``data``; ``(None, False)`` if the AST refuses the combination."""
    from piece_by_piece_serialize.schema import _ast as _schema_ast

    builder = _Builder(ByteReader(data), _schema_ast)
    try:
        schema = builder.schema()
    except ValueError:  # a dataclass refusing a value (e.g. nesting) is the AST's own validation
        return None, False
    return schema, builder.normal


def check(data: bytes) -> None:
    """The properties for the schema ``data`` describes; raises Finding on failure."""
    with reporting(data):
        fuzz_schema._targets()
        schema, normal = build_schema(data)
        if schema is None:
            STATS.add("not built")
            return
        text = str(schema)
        ours = fuzz_schema.check_text(data, text, STATS)
        if not normal:
            STATS.add("built (normalised by the parser)")
            return
        STATS.add("built (normal form)")
        if ours is None:
            raise fail(data, f"we reject the printed text of a valid AST: {text!r}")
        if ours != schema:
            raise fail(data, f"the printed text parses to a different AST:\n  text: {text}\n  built:  {schema!r}\n  parsed: {ours!r}")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()
    start(
        sys.argv,
        TestOneInput,
        ["piece_by_piece_serialize.schema", "piece_by_piece_serialize.schema._transform", "piece_by_piece_serialize.schema._ast"],
        warm_up=lambda: (fuzz_schema._targets(), check(b"\x01\x02\x03\x04\x05\x06\x07\x08")),
    )


if __name__ == "__main__":
    main()
