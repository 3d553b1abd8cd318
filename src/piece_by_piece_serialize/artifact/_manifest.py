"""The manifest of an artifact: what each operator is, and how its calls are rebuilt, as checked JSON.

Note [manifest]
~~~~~~~~~~~~~~~
One JSON document beside the programs of the archive. It names the operators' namespace, the model's class,
the top program and its call structure (Note [call keys] in :mod:`..custom_op`), and per operator: its name,
the piece it stands for (dotted path and class), the names of the weights it takes, the program that computes
it (None for a piece that could not be exported) or, in ``by_size`` (written only when there are some), its
programs by size (Note [programs by size] in :mod:`..export._by_size`), every call structure it was called with,
with the output structure, dtypes, devices and learned shape rules (Note [learned shapes]), and for a piece
without program the state its class needs to be rebuilt (:class:`ModuleState`). Scalars keep their type: a float is written
``{"float": "1e-05"}`` (its ``repr``, so infinities and NaN survive), a tuple ``{"tuple": [...]}``.

:func:`read_manifest` is the only way in: it accepts exactly what :func:`write_manifest` writes, checks every
field's type, range and count against the others (a call's tensors and constants fill its flat list; a rule
names existing input tensors), and raises :class:`ArtifactError` with the JSON path of the first field that is
wrong. ``read_manifest(write_manifest(m)) == m``. Nothing in it is evaluated or imported; a class is a name.

Imports: :mod:`..type_info` (each type-info string is parsed when read), :mod:`._program` (what a name may be); the
standard library.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from ..errors import TreeSpecNameError
from ..type_info import MAX_CACHE_LAYERS, CacheInfo, parse_type_info
from ._errors import ArtifactError
from ._program import dotted

FORMAT = "piece-by-piece-serialize artifact"
# 2: each program's digest (Note [program digests]); an archive of version 1 is refused: save it again
VERSION = 2
MANIFEST_FILE = "pbp_manifest.json"

# The most programs by size an operator may have (export/_by_size.py makes at most 8).
MAX_BY_SIZE = 64
# The largest manifest read (bytes): far above any real model's, and a bound on what a hostile file can cost.
MAX_MANIFEST_BYTES = 64 * 2**20

Scalar = None | bool | int | float | str
Value = Any  # a Scalar, or a tuple/list/dict of Values (module attributes)

RULE_KINDS = ("dim", "const", "sum", "plus", "min", "none")


@dataclass(frozen=True)
class CallRecord:
    """One call structure of an operator or of the model: its arguments, its output, its shape rules."""

    key: str
    kinds: tuple[str, ...]
    n_positional: int
    keywords: tuple[str, ...]
    constants: tuple[tuple[int, Scalar], ...]
    n_flat: int
    caches: tuple[int, ...]
    out_kinds: tuple[str, ...]
    out_constants: tuple[tuple[int, Scalar], ...]
    out_n_flat: int
    out_aliases: tuple[tuple[Value, int], ...]  # (None: the output itself | (a key or index of it,), cache number)
    out_dtypes: tuple[str, ...]
    out_devices: tuple[str, ...]
    rules: tuple[tuple[tuple[str, tuple[Any, ...]], ...], ...] | None = None
    # the caches the call carries cut to some layers: (argument, its number of layers, the positions carried);
    # Note [cache slices] in serialize/_cache_slice.py
    slices: tuple[tuple[int, int, tuple[int, ...]], ...] = ()

    @property
    def n_tensors(self) -> int:
        return self.n_flat - len(self.constants)

    @property
    def n_out_tensors(self) -> int:
        return self.out_n_flat - len(self.out_constants)


@dataclass(frozen=True)
class ModuleState:
    """What a piece's class needs to be rebuilt without running its ``__init__``: plain attributes, the names of
    parameters and buffers (their tensors are the operator's weights), and the same for each child module."""

    cls: str
    attributes: tuple[tuple[str, Value], ...]
    parameters: tuple[str, ...]
    buffers: tuple[str, ...]
    non_persistent: tuple[str, ...]
    empty: tuple[str, ...]  # parameters and buffers registered as None (a Linear without bias)
    children: tuple[tuple[str, ModuleState], ...]
    unstorable: tuple[tuple[str, str], ...]  # (attribute, its type): what only an instance can give back
    # (attribute, model_type, the config as JSON values): a transformers config, Note [implementations]
    configs: tuple[tuple[str, str, Value], ...] = ()


@dataclass(frozen=True)
class OperatorRecord:
    name: str
    piece: str
    cls: str
    weights: tuple[str, ...]
    program: str | None  # the piece's own program in the archive
    program_key: str | None  # the call structure that program computes
    calls: tuple[CallRecord, ...]
    state: ModuleState | None
    digest: str | None = None  # the SHA-256 of its program's document (Note [program digests])
    # without a program of its own, its programs by size (Note [programs by size] in ..export._by_size): each
    # program's name and digest, the first whose domain holds computing a call of ``program_key``
    by_size: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Manifest:
    namespace: str
    model_class: str
    program: str
    call: CallRecord
    operators: tuple[OperatorRecord, ...]
    torch_version: str
    digest: str = ""  # the SHA-256 of the top program's document (Note [program digests])


# ---------------------------------------------------------------------------------------------------
# writing


def _value(v: Value) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, tuple):
        return {"tuple": [_value(x) for x in v]}
    if isinstance(v, list):
        return {"list": [_value(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[k, _value(x)] for k, x in v.items()]}
    raise TypeError(f"not a manifest value: {type(v).__qualname__}")


def _call(c: CallRecord) -> dict[str, Any]:
    return {
        "key": c.key, "kinds": list(c.kinds), "n_positional": c.n_positional, "keywords": list(c.keywords),
        "constants": [[i, _value(v)] for i, v in c.constants], "n_flat": c.n_flat, "caches": list(c.caches),
        "out_kinds": list(c.out_kinds), "out_constants": [[i, _value(v)] for i, v in c.out_constants],
        "out_n_flat": c.out_n_flat, "out_aliases": [[_value(w), i] for w, i in c.out_aliases],
        "out_dtypes": list(c.out_dtypes), "out_devices": list(c.out_devices),
        "rules": None if c.rules is None else [[[kind, _value(cands)] for kind, cands in out] for out in c.rules],
    } | ({"slices": [[arg, n, list(positions)] for arg, n, positions in c.slices]} if c.slices else {})  # fmt: skip


def _state(s: ModuleState) -> dict[str, Any]:
    return {
        "class": s.cls, "attributes": [[k, _value(v)] for k, v in s.attributes], "parameters": list(s.parameters),
        "buffers": list(s.buffers), "non_persistent": list(s.non_persistent), "empty": list(s.empty),
        "children": [[k, _state(c)] for k, c in s.children], "unstorable": [list(u) for u in s.unstorable],
    } | ({"configs": [[k, t, _value(v)] for k, t, v in s.configs]} if s.configs else {})  # fmt: skip


def write_manifest(m: Manifest) -> str:
    """The manifest as JSON text (Note [manifest])."""
    data = {
        "format": FORMAT, "version": VERSION, "torch_version": m.torch_version, "namespace": m.namespace,
        "model_class": m.model_class, "program": m.program, "program_digest": m.digest, "call": _call(m.call),
        "operators": [
            {"name": o.name, "piece": o.piece, "class": o.cls, "weights": list(o.weights), "program": o.program,
             "program_digest": o.digest, "program_key": o.program_key, "calls": [_call(c) for c in o.calls],
             "state": None if o.state is None else _state(o.state)}
            | ({"by_size": [{"program": n, "program_digest": d} for n, d in o.by_size]} if o.by_size else {})
            for o in m.operators
        ],
    }  # fmt: skip
    return json.dumps(data, indent=1, allow_nan=False)


# ---------------------------------------------------------------------------------------------------
# reading


class _Reader:
    """Typed access to parsed JSON; every refusal names the file and the JSON path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> ArtifactError:
        return ArtifactError(self.source, f"manifest {path}: {message}")

    def obj(self, data: Any, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail(path, f"expected an object, got {_kind(data)}")
        if set(data) != set(keys):
            missing, extra = sorted(set(keys) - set(data)), sorted(set(data) - set(keys))
            raise self.fail(path, f"expected the keys {list(keys)}" + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
        return data

    def seq(self, data: Any, path: str) -> list[Any]:
        if not isinstance(data, list):
            raise self.fail(path, f"expected a list, got {_kind(data)}")
        return data

    def string(self, data: Any, path: str) -> str:
        if not isinstance(data, str):
            raise self.fail(path, f"expected a string, got {_kind(data)}")
        return data

    def integer(self, data: Any, path: str, low: int = 0, high: int = 2**31) -> int:
        if type(data) is not int or not low <= data <= high:
            raise self.fail(path, f"expected an integer in [{low}, {high}], got {_shown(data)}")
        return data

    def strings(self, data: Any, path: str) -> tuple[str, ...]:
        return tuple(self.string(x, f"{path}[{i}]") for i, x in enumerate(self.seq(data, path)))

    def integers(self, data: Any, path: str, high: int) -> tuple[int, ...]:
        return tuple(self.integer(x, f"{path}[{i}]", 0, high) for i, x in enumerate(self.seq(data, path)))

    def value(self, data: Any, path: str, depth: int = 0) -> Value:
        if depth > 32:
            raise self.fail(path, "values nested more than 32 deep")
        if data is None or isinstance(data, (bool, int, str)):
            return data
        if isinstance(data, dict) and len(data) == 1:
            (tag, inner), = data.items()
            if tag == "float":
                return self._float(inner, f"{path}.float")
            if tag in ("tuple", "list"):
                items = [self.value(x, f"{path}.{tag}[{i}]", depth + 1) for i, x in enumerate(self.seq(inner, f"{path}.{tag}"))]
                return tuple(items) if tag == "tuple" else items
            if tag == "dict":
                out = {}
                for i, pair in enumerate(self.seq(inner, f"{path}.dict")):
                    if not isinstance(pair, list) or len(pair) != 2:
                        raise self.fail(f"{path}.dict[{i}]", "expected a [key, value] pair")
                    out[self.string(pair[0], f"{path}.dict[{i}][0]")] = self.value(pair[1], f"{path}.dict[{i}][1]", depth + 1)
                return out
        raise self.fail(path, f"expected a value (null, a boolean, an integer, a string or a tagged float, tuple, list or dict), got {_shown(data)}")

    def scalar(self, data: Any, path: str) -> Scalar:
        v = self.value(data, path)
        if isinstance(v, (tuple, list, dict)):
            raise self.fail(path, "expected a scalar")
        return v  # type: ignore[no-any-return]

    def _float(self, data: Any, path: str) -> float:
        text = self.string(data, path)
        try:
            x = float(text)  # float() reads a number's spelling; it runs nothing
        except ValueError:
            raise self.fail(path, f"{text!r} is not a float") from None
        if repr(x) != text and not math.isnan(x):
            raise self.fail(path, f"{text!r} is not the canonical spelling of a float")
        return x


def _kind(data: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number", type(None): "null"}.get(type(data), type(data).__name__)


def _shown(data: Any) -> str:
    text = json.dumps(data)
    return text if len(text) <= 60 else text[:57] + "..."


_CALL_KEYS = ("key", "kinds", "n_positional", "keywords", "constants", "n_flat", "caches", "out_kinds", "out_constants",
              "out_n_flat", "out_aliases", "out_dtypes", "out_devices", "rules")  # fmt: skip


def _read_call(r: _Reader, data: Any, path: str) -> CallRecord:
    d = r.obj(data, path, (*_CALL_KEYS, "slices") if isinstance(data, dict) and "slices" in data else _CALL_KEYS)
    kinds = _read_kinds(r, d["kinds"], f"{path}.kinds")
    n_positional = r.integer(d["n_positional"], f"{path}.n_positional", 0, len(kinds))
    keywords = r.strings(d["keywords"], f"{path}.keywords")
    if n_positional + len(keywords) != len(kinds):
        raise r.fail(path, f"{n_positional} positional and {len(keywords)} keyword arguments for {len(kinds)} kinds")
    n_flat = r.integer(d["n_flat"], f"{path}.n_flat", 0, 2**20)
    constants = _read_constants(r, d["constants"], f"{path}.constants", n_flat)
    caches = r.integers(d["caches"], f"{path}.caches", max(len(kinds) - 1, 0))
    out_kinds = _read_kinds(r, d["out_kinds"], f"{path}.out_kinds")
    if len(out_kinds) != 1 + len(caches):
        raise r.fail(f"{path}.out_kinds", f"expected the output's kind then one per cache ({1 + len(caches)}), got {len(out_kinds)}")
    out_n_flat = r.integer(d["out_n_flat"], f"{path}.out_n_flat", 0, 2**20)
    out_constants = _read_constants(r, d["out_constants"], f"{path}.out_constants", out_n_flat)
    aliases = []
    for i, pair in enumerate(r.seq(d["out_aliases"], f"{path}.out_aliases")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"{path}.out_aliases[{i}]", "expected a [where, cache] pair")
        where = r.value(pair[0], f"{path}.out_aliases[{i}][0]")
        if not (where is None or (isinstance(where, tuple) and len(where) == 1 and type(where[0]) in (str, int))):
            raise r.fail(f"{path}.out_aliases[{i}][0]", "expected null or a tuple of one key or index")
        aliases.append((where, r.integer(pair[1], f"{path}.out_aliases[{i}][1]", 0, max(len(caches) - 1, 0))))
    n_out = out_n_flat - len(out_constants)
    dtypes, devices = r.strings(d["out_dtypes"], f"{path}.out_dtypes"), r.strings(d["out_devices"], f"{path}.out_devices")
    if len(dtypes) != n_out or len(devices) != n_out:
        raise r.fail(path, f"{len(dtypes)} dtypes and {len(devices)} devices for {n_out} output tensors")
    n_in = n_flat - len(constants)
    rules = None if d["rules"] is None else _read_rules(r, d["rules"], f"{path}.rules", n_out, n_in)
    slices = _read_slices(r, d["slices"], f"{path}.slices", kinds, caches) if "slices" in d else ()
    record = CallRecord(
        r.string(d["key"], f"{path}.key"), kinds, n_positional, keywords, constants, n_flat, caches, out_kinds,
        out_constants, out_n_flat, tuple(aliases), dtypes, devices, rules, slices,
    )  # fmt: skip
    if record.key != call_key(record.kinds, record.keywords, record.constants, record.slices):
        raise r.fail(f"{path}.key", "does not match the call structure it keys")
    return record


def _read_slices(r: _Reader, data: Any, path: str, kinds: tuple[str, ...], caches: tuple[int, ...]) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    """The cut caches of a call: each a cache argument, its number of layers, and the positions its kind describes."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for i, entry in enumerate(r.seq(data, path)):
        where = f"{path}[{i}]"
        if not isinstance(entry, list) or len(entry) != 3:
            raise r.fail(where, "expected an [argument, layers, positions] triple")
        arg = r.integer(entry[0], f"{where}[0]", 0, max(len(kinds) - 1, 0))
        n = r.integer(entry[1], f"{where}[1]", 1, MAX_CACHE_LAYERS)
        positions = r.integers(entry[2], f"{where}[2]", n - 1)
        info = parse_type_info(kinds[arg])
        if arg not in caches or not isinstance(info, CacheInfo):
            raise r.fail(f"{where}[0]", f"argument {arg} is not a cache argument")
        if list(positions) != sorted(set(positions)) or len(positions) != info.n_layers or len(positions) >= n:
            raise r.fail(f"{where}[2]", f"expected {info.n_layers} increasing positions below {n}, fewer than {n}")
        if any(arg == a for a, _, _ in out):
            raise r.fail(f"{where}[0]", f"argument {arg} is cut twice")
        out.append((arg, n, positions))
    return tuple(out)


def call_key(kinds: tuple[str, ...], keywords: tuple[str, ...], constants: tuple[tuple[int, Scalar], ...],
             slices: tuple[tuple[int, int, tuple[int, ...]], ...] = ()) -> str:  # fmt: skip
    """The key of a call structure, spelled as the operators spell it (Note [call keys]); a call carrying cut
    caches names them too (Note [cache slices])."""
    base = (kinds, keywords, tuple(sorted(constants)))
    return repr((*base, slices) if slices else base)


def _read_kinds(r: _Reader, data: Any, path: str) -> tuple[str, ...]:
    kinds = r.strings(data, path)
    for i, kind in enumerate(kinds):
        try:
            factory = _unlisted_factory(parse_type_info(kind))
        except TreeSpecNameError as exc:
            raise r.fail(
                f"{path}[{i}]",
                f"not a type-info string this process can rebuild: {exc.msg} (a class it names must be imported before "
                "loading, as the model's code imports it: the loader imports nothing by name)",
            ) from None
        if factory is not None:
            raise r.fail(
                f"{path}[{i}]",
                f"a defaultdict whose factory is {factory}: a factory is a builtin container or number type or a class "
                "registered as a pytree node, never another class found by name",
            )
    return kinds


def _unlisted_factory(info: Any) -> str | None:
    """The first defaultdict factory in a parsed type-info string that is not allowed, by name, or None: the
    factory runs whenever the rebuilt dict misses a key, so it comes from an allowlist (builtins, and classes
    registered as pytree nodes), not from any module that happens to be loaded."""
    import collections

    import torch.utils._pytree as pytree

    allowed = {None, list, dict, set, frozenset, tuple, int, float, complex, str, bytes, bool, collections.OrderedDict, collections.deque, collections.Counter}
    stack, seen = [info], 0
    while stack and seen < 1 << 16:
        item = stack.pop()
        seen += 1
        if isinstance(item, pytree.TreeSpec):
            if item.type is collections.defaultdict:
                factory = item.context[0]
                if factory not in allowed and factory not in pytree.SUPPORTED_NODES:
                    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', factory)}"
            stack.extend(item.children())
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        elif isinstance(item, tuple):
            stack.extend(item)
    return None


def _read_constants(r: _Reader, data: Any, path: str, n_flat: int) -> tuple[tuple[int, Scalar], ...]:
    out = []
    for i, pair in enumerate(r.seq(data, path)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"{path}[{i}]", "expected an [index, value] pair")
        out.append((r.integer(pair[0], f"{path}[{i}][0]", 0, max(n_flat - 1, 0)), r.scalar(pair[1], f"{path}[{i}][1]")))
    if len({i for i, _ in out}) != len(out) or (out and n_flat == 0):
        raise r.fail(path, "constants at the same or no flat position")
    return tuple(out)


def _read_rules(r: _Reader, data: Any, path: str, n_out: int, n_in: int) -> tuple[tuple[tuple[str, tuple[Any, ...]], ...], ...]:
    outs = r.seq(data, path)
    if len(outs) != n_out:
        raise r.fail(path, f"{len(outs)} rules for {n_out} output tensors")
    rules = []
    for k, dims in enumerate(outs):
        per_dim = []
        for d, rule in enumerate(r.seq(dims, f"{path}[{k}]")):
            where = f"{path}[{k}][{d}]"
            if not isinstance(rule, list) or len(rule) != 2 or rule[0] not in RULE_KINDS:
                raise r.fail(where, f"expected [kind, candidates] with a kind among {list(RULE_KINDS)}")
            cands = r.value(rule[1], f"{where}[1]")
            if not isinstance(cands, tuple) or not _rule_ok(rule[0], cands):
                raise r.fail(f"{where}[1]", f"not the candidates of a {rule[0]!r} rule")
            # the tensor a rule names is checked here; its dimension's rank is known only from a call's tensors,
            # which the fake kernel checks
            beyond = next((i for i, _ in _dims_of(rule[0], cands) if i >= n_in), None)
            if beyond is not None:
                raise r.fail(f"{where}[1]", f"names input tensor {beyond}, where its call has {n_in} (numbered from 0)")
            per_dim.append((rule[0], cands))
        rules.append(tuple(per_dim))
    return tuple(rules)


def _dim(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and all(type(v) is int and 0 <= v < 2**20 for v in x)


def _dims_of(kind: str, cands: tuple[Any, ...]) -> list[tuple[int, int]]:
    """The input dimensions a rule's (checked) candidates name."""
    if kind == "dim":
        return list(cands)
    # sum: (dim, dim); plus: (dim, constant); min: (dim, dim or None, cap)
    return [] if kind == "const" else [x for c in cands for x in c[:2] if isinstance(x, tuple)]


def _rule_ok(kind: str, cands: tuple[Any, ...]) -> bool:
    if kind == "dim":
        return bool(cands) and all(_dim(c) for c in cands)
    if kind == "const":
        return len(cands) == 1 and type(cands[0]) is int and cands[0] >= 0
    if kind == "sum":
        return bool(cands) and all(isinstance(c, tuple) and len(c) == 2 and _dim(c[0]) and _dim(c[1]) for c in cands)
    if kind == "plus":
        return bool(cands) and all(isinstance(c, tuple) and len(c) == 2 and _dim(c[0]) and type(c[1]) is int for c in cands)
    if kind == "min":  # an input dimension, or a sum of two, capped at a size
        return bool(cands) and all(
            isinstance(c, tuple) and len(c) == 3 and _dim(c[0]) and (c[1] is None or _dim(c[1])) and type(c[2]) is int and 0 <= c[2] < 2**62
            for c in cands
        )
    return cands == ()


def _read_state(r: _Reader, data: Any, path: str, depth: int = 0) -> ModuleState:
    if depth > 64:
        raise r.fail(path, "modules nested more than 64 deep")
    keys = ("class", "attributes", "parameters", "buffers", "non_persistent", "empty", "children", "unstorable")
    d = r.obj(data, path, (*keys, "configs") if isinstance(data, dict) and "configs" in data else keys)
    attributes = []
    for i, pair in enumerate(r.seq(d["attributes"], f"{path}.attributes")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"{path}.attributes[{i}]", "expected a [name, value] pair")
        attributes.append((r.string(pair[0], f"{path}.attributes[{i}][0]"), r.value(pair[1], f"{path}.attributes[{i}][1]")))
    children = []
    for i, pair in enumerate(r.seq(d["children"], f"{path}.children")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"{path}.children[{i}]", "expected a [name, module] pair")
        children.append((r.string(pair[0], f"{path}.children[{i}][0]"), _read_state(r, pair[1], f"{path}.children[{i}][1]", depth + 1)))
    unstorable = []
    for i, pair in enumerate(r.seq(d["unstorable"], f"{path}.unstorable")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise r.fail(f"{path}.unstorable[{i}]", "expected an [attribute, type] pair")
        unstorable.append((r.string(pair[0], f"{path}.unstorable[{i}][0]"), r.string(pair[1], f"{path}.unstorable[{i}][1]")))
    configs = []
    for i, triple in enumerate(r.seq(d.get("configs", []), f"{path}.configs")):
        if not isinstance(triple, list) or len(triple) != 3:
            raise r.fail(f"{path}.configs[{i}]", "expected an [attribute, model_type, config] triple")
        config = r.value(triple[2], f"{path}.configs[{i}][2]")
        if not isinstance(config, dict):
            raise r.fail(f"{path}.configs[{i}][2]", "expected a dict")
        configs.append((r.string(triple[0], f"{path}.configs[{i}][0]"), r.string(triple[1], f"{path}.configs[{i}][1]"), config))
    return ModuleState(
        _class_name(r, d["class"], f"{path}.class"), tuple(attributes), r.strings(d["parameters"], f"{path}.parameters"),
        r.strings(d["buffers"], f"{path}.buffers"), r.strings(d["non_persistent"], f"{path}.non_persistent"),
        r.strings(d["empty"], f"{path}.empty"), tuple(children),
        tuple(unstorable), tuple(configs),
    )  # fmt: skip


def _read_operator(r: _Reader, data: Any, path: str) -> OperatorRecord:
    keys = ("name", "piece", "class", "weights", "program", "program_digest", "program_key", "calls", "state")
    d = r.obj(data, path, (*keys, "by_size") if isinstance(data, dict) and "by_size" in data else keys)
    program = None if d["program"] is None else _identifier(r, d["program"], f"{path}.program")
    digest = None if d["program_digest"] is None else _digest(r, d["program_digest"], f"{path}.program_digest")
    if (program is None) != (digest is None):
        raise r.fail(f"{path}.program_digest", "a program needs its digest, and only a program has one")
    by_size = tuple(_read_by_size(r, e, f"{path}.by_size[{i}]") for i, e in enumerate(r.seq(d.get("by_size", []), f"{path}.by_size")))
    if "by_size" in d and (not by_size or program is not None or len(by_size) > MAX_BY_SIZE):
        raise r.fail(f"{path}.by_size", f"programs by size are 1 to {MAX_BY_SIZE}, only of an operator without a program of its own")
    # the writer names each program once, and the reader accepts exactly what it writes (as for operators and calls)
    if len({name for name, _ in by_size}) != len(by_size):
        raise r.fail(f"{path}.by_size", "a program is named twice among the programs by size")
    calls = tuple(_read_call(r, c, f"{path}.calls[{i}]") for i, c in enumerate(r.seq(d["calls"], f"{path}.calls")))
    if len({c.key for c in calls}) != len(calls):
        raise r.fail(f"{path}.calls", "two call structures with the same key")
    program_key = None if d["program_key"] is None else r.string(d["program_key"], f"{path}.program_key")
    if (program is None and not by_size) != (program_key is None) or (program_key is not None and program_key not in {c.key for c in calls}):
        raise r.fail(f"{path}.program_key", "a program (or programs by size) needs the key of one of the operator's call structures, and only a program has one")
    state = None if d["state"] is None else _read_state(r, d["state"], f"{path}.state")
    weights = tuple(_dotted_name(r, w, f"{path}.weights[{i}]") for i, w in enumerate(r.seq(d["weights"], f"{path}.weights")))
    return OperatorRecord(
        _identifier(r, d["name"], f"{path}.name"), _dotted_name(r, d["piece"], f"{path}.piece"),
        _class_name(r, d["class"], f"{path}.class"), weights, program, program_key, calls, state, digest, by_size,
    )  # fmt: skip


def _read_by_size(r: _Reader, data: Any, path: str) -> tuple[str, str]:
    d = r.obj(data, path, ("program", "program_digest"))
    return _identifier(r, d["program"], f"{path}.program"), _digest(r, d["program_digest"], f"{path}.program_digest")


def _dotted_name(r: _Reader, data: Any, path: str) -> str:
    """A module path or a weight's name: ASCII identifiers and indices joined by dots (Note [program documents])."""
    text = r.string(data, path)
    if not dotted(text):
        raise r.fail(path, f"{_shown(text)} is not a dotted path of ASCII identifiers and indices")
    return text


def _class_name(r: _Reader, data: Any, path: str) -> str:
    """A class's qualified name (``module.Class``, ``<locals>`` for a class made in a function): compared with the
    names of the classes the user passes, never imported, but ASCII so that two spellings never name one class."""
    text = r.string(data, path)
    if not (text.isascii() and 0 < len(text) <= 512 and all(p.isidentifier() or p == "<locals>" for p in text.split("."))):  # a qualified name, not our language
        raise r.fail(path, f"{_shown(text)} is not a qualified class name of ASCII identifiers")
    return text


def _digest(r: _Reader, data: Any, path: str) -> str:
    text = r.string(data, path)
    if len(text) != 64 or not all(c in "0123456789abcdef" for c in text):
        raise r.fail(path, f"{_shown(text)} is not a SHA-256 digest (64 lowercase hexadecimal digits)")
    return text


def _identifier(r: _Reader, data: Any, path: str) -> str:
    text = r.string(data, path)
    if not text.isidentifier() or not text.isascii():
        raise r.fail(path, f"{text!r} is not an ASCII identifier")
    return text


def read_manifest(data: bytes, source: str) -> Manifest:
    """The manifest in ``data`` (the bytes of the archive's manifest file), checked (Note [manifest]); ``source``
    names the archive in errors. Raises :class:`ArtifactError` for anything but a manifest of this version."""
    r = _Reader(source)
    if len(data) > MAX_MANIFEST_BYTES:
        raise r.fail("", f"is {len(data)} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have")
    try:
        parsed = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise r.fail("", f"is not JSON: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("format") != FORMAT:
        raise r.fail("format", f"this is not a {FORMAT} manifest")
    if parsed.get("version") != VERSION:
        older = type(parsed.get("version")) is int and 0 < parsed["version"] < VERSION
        again = ": save the model again with this version of the library" if older else ""
        raise r.fail("version", f"format version {_shown(parsed.get('version'))}, where this library reads version {VERSION}{again}")
    d = r.obj(parsed, "", ("format", "version", "torch_version", "namespace", "model_class", "program", "program_digest", "call", "operators"))
    operators = tuple(_read_operator(r, o, f"operators[{i}]") for i, o in enumerate(r.seq(d["operators"], "operators")))
    if len({o.name for o in operators}) != len(operators):
        raise r.fail("operators", "two operators with the same name")
    return Manifest(
        _identifier(r, d["namespace"], "namespace"), _class_name(r, d["model_class"], "model_class"), _identifier(r, d["program"], "program"),
        _read_call(r, d["call"], "call"), operators, r.string(d["torch_version"], "torch_version"), _digest(r, d["program_digest"], "program_digest"),
    )  # fmt: skip


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
