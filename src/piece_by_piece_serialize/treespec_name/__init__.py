"""TreeSpec names: a readable, identifier-safe, canonical spelling of a ``torch.utils._pytree.TreeSpec``.

``tree_spec_as_name(spec, n)`` prints a spec as a name such as ``___v1_T_X2_E`` (a tuple of two leaves) or
``___v1_D_input_ids_X_attention_mask_X_E``; ``tree_spec_from_name(name)`` reads it back as ``(n, spec)``.
The language is defined by ``grammars/treespec_name.lark``; ``docs/treespec_names.md`` has the tour.

Invariants:
- Canonical: ``tree_spec_as_name(*reversed(tree_spec_from_name(s))) == s`` for every accepted ``s``; any other
  spelling of the same spec is refused, so a name can be compared, hashed and cached as a string.
- Safe: decoding never runs pickle, eval, exec or an import. A type is found only through torch's pytree
  registry (its serialized type names) or as ``module.qualname`` of a module already in ``sys.modules``,
  walking ``__dict__`` entries (no ``getattr`` hooks, so lazy modules are not triggered; :mod:`._resolve`). The
  only code a decode can run is a ``from_dumpable_context`` hook that the process registered itself, as torch
  does.
- Bounded: a name longer than ``NameLimits.max_length``, nesting deeper than ``max_depth`` or holding more than
  ``max_nodes`` nodes (every leaf of a run ``X<k>`` counts) is refused before anything is built; parsing, checks
  and building are iterative, so time and memory are proportional to the name and nothing recurses.
- Decoding is cached (bounded), so a warm decode is one dictionary lookup; a name encoded in this process is
  cached as it is made.

Imports: the AST and printers (:mod:`._ast`), the type lookup (:mod:`._resolve`) and the error class at import
time; the parser (:mod:`._transform`) on the first decode; torch on the first encode or decode. Never lark, and
nothing of this package outside ``treespec_name`` but :mod:`..errors`.
"""

from __future__ import annotations

import enum
import json
from collections import OrderedDict, defaultdict, deque, namedtuple
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import TreeSpecNameError
from ._ast import (
    BoolConst,
    Const,
    CustomNode,
    DefaultDictNode,
    DequeNode,
    DictConst,
    DictNode,
    EnumConst,
    FloatConst,
    IntConst,
    Leaves,
    LegacyName,
    ListConst,
    ListNode,
    Name,
    NamedTupleNode,
    Node,
    NoneConst,
    OrderedDictNode,
    StrConst,
    TupleConst,
    TupleNode,
    leaf_count,
    measure,
    pretty_lines,
    print_name,
    tokens,
    within_limits,
)
from ._resolve import (
    _HOW_ENUM,
    _HOW_FACTORY,
    _HOW_NAMEDTUPLE,
    _HOW_NODE,
    _check_ref,
    _encode_error,
    _path_of,
    _pytree,
    _ref_for,
    _resolve_ref,
)

if TYPE_CHECKING:
    from torch.utils._pytree import TreeSpec
    from torch.utils._pytree import TreeSpec as _TreeSpec  # for _build, whose local TreeSpec is the class itself

__all__ = [
    "CACHE_SIZE",
    "DEFAULT_LIMITS",
    "NameLimits",
    "clear_name_cache",
    "name_leaf_count",
    "pretty_name",
    "tree_spec_as_name",
    "tree_spec_from_legacy_name_unsafe",
    "tree_spec_from_name",
]


@dataclass(frozen=True, slots=True)
class NameLimits:
    """Resource limits applied to every name before it is decoded (and to every spec before it is encoded).

    ``max_length``: characters in the name. ``max_nodes``: leaves (each leaf of a run counts), containers and
    constants. ``max_depth``: nesting of containers and constants, the root being level 1. The defaults accept
    any tree that torch's recursive ``tree_flatten`` can produce under the default recursion limit.
    """

    max_length: int = 100_000
    max_nodes: int = 100_000
    max_depth: int = 1_000


DEFAULT_LIMITS = NameLimits()

LEGACY_MESSAGE = (
    "legacy pickle-based TreeSpec name: decoding it would unpickle its bytes, which can run arbitrary code, so it "
    "is refused; call tree_spec_from_legacy_name_unsafe(name) only for a name from a trusted source"
)

# Node types spelled with their own kind letter ("C" never names them), and those whose children are dict values.
_NATIVE_TYPES: tuple[Any, ...] = (tuple, list, dict, OrderedDict, defaultdict, deque, namedtuple)
_KEYED_TYPES: tuple[Any, ...] = (dict, OrderedDict, defaultdict)


# ------------------------------------------------------------------------------------- constants <-> values


def _to_const(value: Any, what: str, how: str = "") -> Const:
    """A plain value (None, bool, int, float, str, Enum member, tuple, list, dict of these) as a constant AST."""
    # Post-order over an explicit stack: containers are rebuilt once their items are converted.
    out: list[Const] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    depth_guard = 0
    while stack:
        v, done = stack.pop()
        t = type(v)
        if done:
            if t is dict:
                n = 2 * len(v)
                flat = out[len(out) - n:]
                del out[len(out) - n:]
                out.append(DictConst(tuple(zip(flat[0::2], flat[1::2]))))  # noqa: B905 - equal halves; strict= doubles zip's cost
            else:
                n = len(v)
                items = tuple(out[len(out) - n:])
                del out[len(out) - n:]
                out.append(TupleConst(items) if t is tuple else ListConst(items))
            continue
        if isinstance(v, enum.Enum):
            cls_ref = _ref_for(t, "Enum class", _HOW_ENUM)
            out.append(EnumConst(f"{cls_ref}.{v.name}"))
        elif v is None:
            out.append(NoneConst())
        elif t is bool:
            out.append(BoolConst(v))
        elif t is int:
            try:
                str(v)
            except ValueError:
                raise _encode_error(f"cannot encode {what}: integer has more than 4300 digits", "int") from None
            out.append(IntConst(v))
        elif t is float:
            out.append(FloatConst(repr(v)))
        elif t is str:
            out.append(StrConst(v))
        elif t is tuple or t is list or t is dict:
            depth_guard += 1
            if depth_guard > 100_000:
                raise _encode_error(f"cannot encode {what}: more than 100000 containers", t.__name__)
            stack.append((v, True))
            children = [x for kv in v.items() for x in kv] if t is dict else list(v)
            stack.extend((x, False) for x in reversed(children))
        else:
            raise _encode_error(
                f"cannot encode {what}: a value of type {_path_of(t)} is not a plain value (None, bool, int, float, "
                f"str, Enum member, or a tuple, list or dict of these){'; ' + how if how else ''}", _path_of(t))
    return out[0]


def _from_const(const: Const, text: str, pos: int) -> Any:
    """The Python value of a constant, iteratively; an Enum member is looked up, never imported."""
    out: list[Any] = []
    stack: list[tuple[Any, bool]] = [(const, False)]
    while stack:
        c, done = stack.pop()
        t = type(c)
        if t is StrConst or t is IntConst or t is BoolConst:
            out.append(c.value)
        elif t is NoneConst:
            out.append(None)
        elif t is FloatConst:
            out.append(float(c.text))
        elif t is EnumConst:
            out.append(_resolve_enum(c, text))
        elif not done:
            stack.append((c, True))
            items = [x for kv in c.items for x in kv] if t is DictConst else list(c.items)
            stack.extend((x, False) for x in reversed(items))
        else:
            n = 2 * len(c.items) if t is DictConst else len(c.items)
            items = out[len(out) - n:]
            del out[len(out) - n:]
            if t is TupleConst:
                out.append(tuple(items))
            elif t is ListConst:
                out.append(items)
            else:
                try:
                    out.append(dict(zip(items[0::2], items[1::2])))  # noqa: B905 - equal halves; strict= doubles zip's cost
                except TypeError:
                    raise TreeSpecNameError("a dict constant has an unhashable key", text, pos) from None
    return out[0]


def _resolve_enum(c: EnumConst, text: str) -> Any:
    path = c.path
    if "." in path:
        cls_path, _, member = path.rpartition(".")  # Python dotted path decoded by the grammar
        cls = _resolve_ref(cls_path)
        if isinstance(cls, type) and issubclass(cls, enum.Enum):
            value = cls.__members__.get(member)
            if value is not None:
                if f"{_ref_for(cls, 'Enum class', _HOW_ENUM)}.{value.name}" != path:
                    raise TreeSpecNameError(f"non-canonical Enum member reference '{path}'", text, c.pos)
                return value
    raise TreeSpecNameError(f"unknown Enum member '{path}': no loaded Enum class has it", text, c.pos)


# --------------------------------------------------------------------------------------------- encoding


def _keys_ast(keys: Any, what: str) -> tuple[Const, ...]:
    # str keys are by far the most common: skip the general converter for them.
    return tuple(StrConst(k) if type(k) is str else _to_const(k, what) for k in keys)


def _custom_context(spec: TreeSpec, node_type: Any, where: str) -> Const | None:
    entry = _pytree().SUPPORTED_SERIALIZED_TYPES.get(node_type)
    context = spec.context
    if entry is not None and entry.to_dumpable_context is not None:
        try:
            dumped = entry.to_dumpable_context(context)
            # Exactly what torch's treespec_dumps/treespec_loads would hand to from_dumpable_context.
            plain = json.loads(json.dumps(dumped))
            back = entry.from_dumpable_context(plain)
        except Exception as exc:  # a user hook failed: report it with the type it belongs to
            raise _encode_error(f"cannot encode the context of {where}: its dumpable-context hooks raised "
                               f"{type(exc).__name__}: {exc}", where) from exc
        if back != context:
            raise _encode_error(f"cannot encode the context of {where}: from_dumpable_context(to_dumpable_context("
                               "context)) does not give the context back", where)
        return None if plain is None else _to_const(plain, f"the context of {where}")
    if context is None:
        return None
    return _to_const(context, f"the context of {where}", _HOW_NODE)


_ONE_LEAF = Leaves(1)


def _spec_to_ast(spec: TreeSpec) -> Node:
    """TreeSpec -> AST, post-order over an explicit stack; leaf children never touch the stack."""
    if spec.type is None:
        return _ONE_LEAF
    pytree = _pytree()
    supported = pytree.SUPPORTED_NODES
    tuple_t, list_t, dict_t, odict_t, ddict_t, deque_t, ntuple_f = _NATIVE_TYPES
    out: list[Node] = []  # results of finished non-leaf nodes, in visiting order
    stack: list[tuple[Any, bool]] = [(spec, False)]
    while stack:
        s, done = stack.pop()
        children = s._children
        if not done:
            stack.append((s, True))
            for c in reversed(children):
                if c.type is not None:
                    stack.append((c, False))
            continue
        t = s.type
        m = 0
        for c in children:
            if c.type is not None:
                m += 1
        results = iter(out[len(out) - m:])
        del out[len(out) - m:]
        kids: list[Node] = []
        if t in _KEYED_TYPES:  # each dict value is one node
            for c in children:
                kids.append(_ONE_LEAF if c.type is None else next(results))
        else:  # sequences: sibling leaves merge into runs X<k>
            run = 0
            for c in children:
                if c.type is None:
                    run += 1
                    continue
                if run:
                    kids.append(_ONE_LEAF if run == 1 else Leaves(run))
                    run = 0
                kids.append(next(results))
            if run:
                kids.append(_ONE_LEAF if run == 1 else Leaves(run))
        ctx = s.context
        if t is tuple_t:
            node: Node = TupleNode(tuple(kids))
        elif t is list_t:
            node = ListNode(tuple(kids))
        elif t is dict_t:
            node = DictNode(_keys_ast(ctx, "a dict key"), tuple(kids))
        elif t is odict_t:
            node = OrderedDictNode(_keys_ast(ctx, "an OrderedDict key"), tuple(kids))
        elif t is ddict_t:
            factory, keys = ctx
            if factory is None:  # no factory: nothing can run, spelled N
                node = DefaultDictNode(None, _keys_ast(keys, "a defaultdict key"), tuple(kids))
            elif not isinstance(factory, type):
                # A name may only hand back classes: a function factory would run on the first missing key.
                where = _path_of(factory)
                raise _encode_error(f"cannot encode defaultdict factory {where}: it is not a class; {_HOW_FACTORY}",
                                    where)
            else:
                node = DefaultDictNode(_ref_for(factory, "defaultdict factory", _HOW_FACTORY),
                                       _keys_ast(keys, "a defaultdict key"), tuple(kids))
        elif t is deque_t:
            node = DequeNode(ctx, tuple(kids))
        elif t is ntuple_f:
            node = NamedTupleNode(_ref_for(ctx, "namedtuple class", _HOW_NAMEDTUPLE), tuple(kids))
        else:
            if t not in supported:
                where = _path_of(t)
                raise _encode_error(f"cannot encode a node of type {where}: it is not a registered pytree node; "
                                   f"{_HOW_NODE}", where)
            ref = _ref_for(t, "pytree node type", _HOW_NODE)
            node = CustomNode(ref, _custom_context(s, t, ref), tuple(kids))
        out.append(node)
    return out[0]


def tree_spec_as_name(tree_spec: TreeSpec, n_elements: int | None = None, *, limits: NameLimits | None = None) -> str:
    """Spell a TreeSpec as a canonical, identifier-safe name.

    Accepts a ``torch.utils._pytree.TreeSpec`` (a C++ pytree spec is converted) and, optionally, its number of
    leaves (the original module's signature; the spec knows it, so ``None`` means ``tree_spec.num_leaves``).
    Returns a name matching ``[A-Za-z0-9_]+`` that starts with ``___v1_``; the same spec always gives the same
    name and :func:`tree_spec_from_name` reads it back as ``(number of leaves, equal spec)``.
    Raises ``ValueError`` when a given ``n_elements`` is not the spec's leaf count, :class:`TreeSpecNameError` when a
    node, key or context has no encoding (the message names the type and how to register it) or when the spec
    is beyond ``limits`` (default :data:`DEFAULT_LIMITS`), and ``TypeError`` for a non-TreeSpec.
    """
    pytree = _pytree()
    if not isinstance(tree_spec, pytree.TreeSpec):
        if not pytree._is_pytreespec_instance(tree_spec):
            raise TypeError(f"tree_spec must be a TreeSpec, got {type(tree_spec).__name__}")
        tree_spec = pytree._ensure_python_treespec_instance(tree_spec)
    if n_elements is None:
        n_elements = tree_spec.num_leaves
    elif type(n_elements) is not int or n_elements != tree_spec.num_leaves:
        raise ValueError(f"n_elements={n_elements!r} but the TreeSpec has {tree_spec.num_leaves} leaves")
    limits = DEFAULT_LIMITS if limits is None else limits
    name = Name(_spec_to_ast(tree_spec))
    problem = measure(name, limits.max_nodes, limits.max_depth)
    text = print_name(name)
    if problem is not None:
        raise TreeSpecNameError(f"cannot encode this TreeSpec: {problem[0]}", text, 0)
    if len(text) > limits.max_length:
        raise TreeSpecNameError(f"cannot encode this TreeSpec: the name would be longer than the limit of "
                                f"{limits.max_length} characters", text, limits.max_length)
    if limits == DEFAULT_LIMITS and text not in _CACHE:
        _remember(text, (n_elements, tree_spec))
    return text


# --------------------------------------------------------------------------------------------- decoding


def _parse_canonical(name: str, limits: NameLimits) -> Name:
    """Parse, bound and canonicality-check a name (everything but resolving types)."""
    if type(name) is not str:
        raise TypeError(f"a TreeSpec name must be a str, got {type(name).__name__}")
    if len(name) > limits.max_length:
        raise TreeSpecNameError(f"name is longer than the limit of {limits.max_length} characters",
                                name, limits.max_length)
    from ._transform import parse, parse_if_canonical

    ast = parse_if_canonical(name)  # Note [piecewise canonical check] in _treespec_transform
    checked = ast is not None
    if ast is None:
        ast = parse(name)
    if type(ast) is LegacyName:
        raise TreeSpecNameError(LEGACY_MESSAGE, name, ast.pos)
    if not within_limits(ast, len(name), limits.max_nodes, limits.max_depth):
        problem = measure(ast, limits.max_nodes, limits.max_depth)
        if problem is not None:
            raise TreeSpecNameError(problem[0], name, problem[1])
    if checked:
        return ast
    canonical = print_name(ast)
    if canonical != name:
        i = next((k for k, (a, b) in enumerate(zip(canonical, name, strict=False)) if a != b), min(len(canonical), len(name)))
        shown = canonical if len(canonical) <= 80 else "..." + canonical[max(0, i - 20): i + 40] + "..."
        raise TreeSpecNameError(f"not the canonical spelling of this TreeSpec, which is '{shown}'", name, i)
    return ast


def _dict_keys(keys: tuple[Const, ...], text: str, pos: int) -> list[Any]:
    values = []
    for k in keys:
        if type(k) is StrConst:  # the common case, always hashable
            values.append(k.value)
            continue
        v = _from_const(k, text, pos)
        try:
            hash(v)
        except TypeError:
            raise TreeSpecNameError("a dict key must be hashable", text, pos) from None
        values.append(v)
    return values


def _build(ast: Name, text: str) -> TreeSpec:
    pytree = _pytree()
    TreeSpec = pytree.TreeSpec
    leaf = pytree.treespec_leaf()
    tuple_t, list_t, dict_t, odict_t, ddict_t, deque_t, ntuple_f = _NATIVE_TYPES
    out: list[_TreeSpec] = []
    stack: list[tuple[Any, bool]] = [(ast.root, False)]
    while stack:
        node, done = stack.pop()
        t = type(node)
        if t is Leaves:
            out.extend([leaf] * node.count)
            continue
        children = node.children
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children))
            continue
        width = 0
        for c in children:
            width += c.count if type(c) is Leaves else 1
        kids = out[len(out) - width:]
        del out[len(out) - width:]
        pos = node.pos
        if t is TupleNode:
            spec = TreeSpec(tuple_t, None, kids)
        elif t is ListNode:
            spec = TreeSpec(list_t, None, kids)
        elif t is DictNode:
            spec = TreeSpec(dict_t, _dict_keys(node.keys, text, pos), kids)
        elif t is OrderedDictNode:
            spec = TreeSpec(odict_t, _dict_keys(node.keys, text, pos), kids)
        elif t is DefaultDictNode:
            factory = None  # N: a defaultdict without a factory
            if node.factory is not None:
                factory = _resolve_ref(node.factory)
                if not isinstance(factory, type):  # only classes: a function would run on the first missing key
                    raise TreeSpecNameError(f"unknown defaultdict factory '{node.factory}': no loaded module "
                                            "defines a class by that name", text, pos)
                _check_ref(factory, node.factory, "defaultdict factory", _HOW_FACTORY, text, pos)
            spec = TreeSpec(ddict_t, [factory, _dict_keys(node.keys, text, pos)], kids)
        elif t is DequeNode:
            spec = TreeSpec(deque_t, node.maxlen, kids)
        elif t is NamedTupleNode:
            cls = _resolve_ref(node.cls)
            if not (isinstance(cls, type) and pytree.is_namedtuple_class(cls)):
                raise TreeSpecNameError(f"unknown namedtuple class '{node.cls}': no loaded module or pytree "
                                        "registration defines it", text, pos)
            _check_ref(cls, node.cls, "namedtuple class", _HOW_NAMEDTUPLE, text, pos)
            # is_namedtuple_class is no TypeGuard: mypy knows cls only as a type, the check above says it has _fields
            if len(cls._fields) != len(kids):  # type: ignore[attr-defined]
                raise TreeSpecNameError(f"namedtuple {node.cls} has {len(cls._fields)} fields but the name gives "  # type: ignore[attr-defined]
                                        f"{len(kids)} children", text, pos)
            spec = TreeSpec(ntuple_f, cls, kids)
        else:
            spec = TreeSpec(*_custom_type_and_context(node, text), kids)
        out.append(spec)
    return out[0]


def _custom_type_and_context(node: CustomNode, text: str) -> tuple[Any, Any]:
    pytree = _pytree()
    pos = node.pos
    cls = _resolve_ref(node.cls)
    if cls is None or cls not in pytree.SUPPORTED_NODES:
        raise TreeSpecNameError(f"unknown pytree node type '{node.cls}': it is not registered in this process",
                                text, pos)
    if any(cls is native for native in _NATIVE_TYPES):
        raise TreeSpecNameError(f"'C' cannot name the built-in node type '{node.cls}', which has its own kind "
                                "letter", text, pos)
    _check_ref(cls, node.cls, "pytree node type", _HOW_NODE, text, pos)
    value = None if node.context is None else _from_const(node.context, text, pos)
    entry = pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
    if entry is None or entry.from_dumpable_context is None:
        return cls, value
    try:
        context = entry.from_dumpable_context(value)
        again = entry.to_dumpable_context(context)
        again = json.loads(json.dumps(again))
    except Exception as exc:  # the registration's own hook refused the value
        raise TreeSpecNameError(f"the context of {node.cls} was refused by its from_dumpable_context hook: "
                                f"{type(exc).__name__}: {exc}", text, pos) from None
    spelled = "" if node.context is None else "_".join(tokens(node.context))
    respelled = "" if again is None else "_".join(tokens(_to_const(again, f"the context of {node.cls}")))
    if spelled != respelled:
        raise TreeSpecNameError(f"non-canonical context for {node.cls}: its hooks write it differently", text, pos)
    return cls, context


# Decoded names: (n, spec) by name (default limits) or by (name, limits). Bounded: once full, the oldest entry
# is dropped (FIFO keeps the hit path to one dict lookup). tree_spec_as_name also stores what it encodes, so a
# name made in this process decodes without parsing: the encoder has already checked everything the decoder
# would (type references resolve back to the same objects, hooks round-trip, limits hold).
CACHE_SIZE = 4096
_CACHE: dict[Any, tuple[int, Any]] = {}


def _remember(key: Any, value: tuple[int, Any]) -> None:
    if len(_CACHE) >= CACHE_SIZE:
        try:  # noqa: SIM105 - a plain try costs nothing when nothing is raised; contextlib.suppress is a call
            del _CACHE[next(iter(_CACHE))]
        except (KeyError, RuntimeError, StopIteration):  # another thread evicted first
            pass
    _CACHE[key] = value


def _decode(name: str, limits: NameLimits) -> tuple[int, TreeSpec]:
    """Decode without the cache: parse, check, resolve, build."""
    ast = _parse_canonical(name, limits)
    spec = _build(ast, name)
    return spec.num_leaves, spec


def tree_spec_from_name(name: str, *, limits: NameLimits | None = None) -> tuple[int, TreeSpec]:
    """Read a name made by :func:`tree_spec_as_name` back into ``(number of leaves, TreeSpec)``.

    Accepts a canonical v1 name; ``limits`` (default :data:`DEFAULT_LIMITS`) bound its length, node count and
    depth. Results are cached (at most :data:`CACHE_SIZE` names, see :func:`clear_name_cache`), and so are the
    names :func:`tree_spec_as_name` produced in this process; the spec is shared, do not mutate it.
    Raises :class:`TreeSpecNameError` (position, expected tokens, caret line) on a malformed, non-canonical,
    over-limit or legacy pickle-based name, or when a type it names is not known in this process; ``TypeError``
    for a non-str. Never unpickles, evaluates or imports anything.
    """
    key: Any = name if limits is None or limits == DEFAULT_LIMITS else (name, limits)
    try:
        hit = _CACHE.get(key)
    except TypeError:  # unhashable input: _decode reports the type
        hit = None
    if hit is not None:
        return hit
    result = _decode(name, DEFAULT_LIMITS if limits is None else limits)
    _remember(key, result)
    return result


def clear_name_cache() -> None:
    """Forget cached decodes (for example after re-registering a pytree node type with different hooks)."""
    _CACHE.clear()


def pretty_name(name: str, *, limits: NameLimits | None = None) -> str:
    """An indented tree view of a name, one node per line (``*`` a leaf, ``* xN`` a run of N leaves).

    Accepts any canonical v1 name, even one naming types this process does not know (nothing is resolved).
    Returns the lines joined with newlines. Raises :class:`TreeSpecNameError` like :func:`tree_spec_from_name`
    for a malformed, non-canonical, over-limit or legacy name.
    """
    ast = _parse_canonical(name, DEFAULT_LIMITS if limits is None else limits)
    return "\n".join(pretty_lines(ast))


def name_leaf_count(name: str, *, limits: NameLimits | None = None) -> int:
    """The number of leaves of a canonical v1 name, without torch: nothing is resolved, as in :func:`pretty_name`.

    Raises :class:`TreeSpecNameError` like :func:`pretty_name` for a malformed, non-canonical, over-limit or
    legacy name.
    """
    return leaf_count(_parse_canonical(name, DEFAULT_LIMITS if limits is None else limits))


def tree_spec_from_legacy_name_unsafe(name: str) -> tuple[int, TreeSpec]:
    """UNSAFE: decode a name of the original scheme, ``"___" + base32(zlib(pickle((n, spec))))``.

    Unpickling runs whatever code the bytes ask for: call this only for names you produced yourself or got from
    a source you trust completely. It exists to migrate old names: decode once, then re-encode with
    :func:`tree_spec_as_name`. Accepts a legacy name; returns ``(n, spec)`` as pickled. Raises
    :class:`TreeSpecNameError` when ``name`` is not a legacy name (a v1 name is read with
    :func:`tree_spec_from_name`), and whatever the unpickled data raises.
    """
    import base64
    import warnings
    import zlib

    from ._transform import parse

    ast = parse(name)
    if type(ast) is not LegacyName:
        raise TreeSpecNameError("not a legacy TreeSpec name; read it with tree_spec_from_name", name, 3)
    import pickle  # legacy opt-in only: the one place this package unpickles, by explicit request

    data = zlib.decompress(base64.b32decode(ast.body.replace("_", "=")))
    with warnings.catch_warnings():
        # Legacy pickles reference torch's deprecated LeafSpec class: expected here, not worth a warning per name.
        warnings.simplefilter("ignore", FutureWarning)
        n, spec = pickle.loads(data)  # legacy, unsafe by contract (see docstring)
    return n, spec
