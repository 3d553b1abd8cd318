"""The TreeSpec-name AST (frozen dataclasses) and its two printers: the canonical name and the pretty tree.

The AST mirrors ``grammars/treespec_name.lark`` one to one: :class:`Name` holds one node; nodes are leaf runs
and containers; dict keys and node contexts are constants. Nothing here imports lark or torch, and nothing here
resolves a type: type references are kept as the text of the name (``torch.Size``), so a name can be printed and
pretty-printed on a machine that does not have the classes it mentions.

Invariants:
- ``print_name(parse(s)) == s`` for every canonical ``s`` and ``parse(print_name(a)) == a``; the printer is the
  definition of "canonical". Leaf runs in a child list are maximal (two runs never touch).
- Every walk is iterative (explicit stacks): a name as deep as its length allows prints without recursion.
- ``pos`` fields (0-based offset of the item in the parsed name, -1 when built by the encoder) are not part of
  equality; they place error carets for checks that run after parsing (type resolution, limits).
- Dataclass equality of deeply nested ASTs recurses in CPython; the library itself compares names as strings.

Imports: the standard library only (the parser, the encoder and other packages import this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast, final

__all__: list[str] = []  # private module

# The one definition of the format version: the printer writes PREFIX, the reader (_transform) accepts only
# VERSION_TAG in the grammar's VERSION terminal (/v[0-9]+/, after the "___" of _PREFIX) and names it when refusing.
FORMAT_VERSION = 1
VERSION_TAG = f"v{FORMAT_VERSION}"
PREFIX = f"___{VERSION_TAG}_"


class _Fragment:
    """Base of every AST class: ``str()`` is the canonical spelling of the fragment (tokens joined by ``_``)."""

    __slots__ = ()

    def __str__(self) -> str:
        return "_".join(tokens(self))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- constants


@dataclass(frozen=True, slots=True)
class NoneConst(_Fragment):
    """``None`` (token ``N``)."""


@dataclass(frozen=True, slots=True)
class BoolConst(_Fragment):
    """``True``/``False`` (tokens ``BT``/``BF``)."""

    value: bool


@dataclass(frozen=True, slots=True)
class IntConst(_Fragment):
    """An ``int`` (``I5``, ``Im5`` for -5)."""

    value: int


@dataclass(frozen=True, slots=True)
class FloatConst(_Fragment):
    """A ``float``, spelled as its ``repr`` (``F1d5`` for 1.5); ``text`` is that repr."""

    text: str


@dataclass(frozen=True, slots=True)
class StrConst(_Fragment):
    """A ``str``: a plain identifier key, or ``S`` + escaped body."""

    value: str


@dataclass(frozen=True, slots=True)
class EnumConst(_Fragment):
    """An Enum member by path ``module.qualname.member`` (``M`` + body); resolved only when decoding."""

    path: str
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TupleConst(_Fragment):
    items: tuple[Const, ...]


@dataclass(frozen=True, slots=True)
class ListConst(_Fragment):
    items: tuple[Const, ...]


@dataclass(frozen=True, slots=True)
class DictConst(_Fragment):
    items: tuple[tuple[Const, Const], ...]


Const = NoneConst | BoolConst | IntConst | FloatConst | StrConst | EnumConst | TupleConst | ListConst | DictConst


# ------------------------------------------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class Leaves(_Fragment):
    """A run of ``count`` sibling leaves (``X``, ``X3``)."""

    count: int
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TupleNode(_Fragment):
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ListNode(_Fragment):
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DictNode(_Fragment):
    """``dict``: ``keys[i]`` maps to ``children[i]``, in insertion order."""

    keys: tuple[Const, ...]
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OrderedDictNode(_Fragment):
    keys: tuple[Const, ...]
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DefaultDictNode(_Fragment):
    """``defaultdict``; ``factory`` is a type reference (``list``, ``mod.make``), ``None`` for no factory."""

    factory: str | None
    keys: tuple[Const, ...]
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class DequeNode(_Fragment):
    maxlen: int | None
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class NamedTupleNode(_Fragment):
    """A namedtuple or ``typing.NamedTuple`` instance; ``cls`` is a type reference."""

    cls: str
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CustomNode(_Fragment):
    """Any other registered pytree node; ``context`` is ``None`` when the node's context is ``None``."""

    cls: str
    context: Const | None
    children: tuple[Node, ...]
    pos: int = field(default=-1, compare=False, repr=False)


Node = Leaves | TupleNode | ListNode | DictNode | OrderedDictNode | DefaultDictNode | DequeNode | NamedTupleNode | CustomNode
KEYED = (DictNode, OrderedDictNode, DefaultDictNode)


@final  # so that ``type(ast) is LegacyName`` narrows ``Name | LegacyName`` for mypy
@dataclass(frozen=True, slots=True)
class LegacyName(_Fragment):
    """A name of the original pickle-based scheme: ``___`` + base32 ``body`` (``=`` written ``_``). Never decoded
    by the safe path; kept so that the refusal is precise and the explicit unsafe opt-in can reuse the parse."""

    body: str
    pos: int = field(default=-1, compare=False, repr=False)

    def __str__(self) -> str:
        return "___" + self.body


@dataclass(frozen=True, slots=True)
class Name:
    """A whole name: its root node (the version tag is always :data:`VERSION_TAG`, so it is not stored)."""

    root: Node

    def __str__(self) -> str:
        return print_name(self)


# ------------------------------------------------------------------------------------ bodies and plain keys

_LOWER_DIGIT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ") | _LOWER_DIGIT
_SHORT_ESCAPES = {"_": "Zu", ".": "Zd", "Z": "Zz"}
UNESCAPE = {"Zu": "_", "Zd": ".", "Zz": "Z"}
# Sets of one-character strings: slicing one past the end gives "", which is in no set of these.
_LOWER_DIGIT_STR = frozenset(_LOWER_DIGIT)
_ALNUM_STR = frozenset(_ALNUM)


def is_plain_key(s: str) -> bool:
    """True when ``s`` is written as itself as a dict key (the PLAIN_KEY terminal of the grammar)."""
    if not s or s[0] not in _LOWER_DIGIT or s[0].isdigit():
        return False
    if s.isascii() and s.replace("_", "").isalnum():  # the common case: only the "_" rule left to check
        return _underscores_before_lower_digit(s)
    prev_underscore = False
    for ch in s:
        if ch == "_":
            if prev_underscore:
                return False
            prev_underscore = True
        elif ch in _ALNUM:
            if prev_underscore and ch not in _LOWER_DIGIT:
                return False
            prev_underscore = False
        else:
            return False
    return not prev_underscore


def _underscores_before_lower_digit(s: str) -> bool:
    i = s.find("_")
    while i != -1:
        if s[i + 1: i + 2] not in _LOWER_DIGIT_STR:
            return False
        i = s.find("_", i + 1)
    return True


def _dots_before_alnum(s: str) -> bool:
    i = s.find(".")
    while i != -1:
        if s[i + 1: i + 2] not in _ALNUM_STR:
            return False
        i = s.find(".", i + 1)
    return True


def encode_body(s: str) -> str:
    """Spell ``s`` as a body (see the grammar): the canonical, injective choice of pieces.

    ``_`` is literal only between a character and a following ``[a-z0-9]``; ``.`` is ``__`` only between a
    character and a following character that is neither ``_`` nor ``.`` (so the next piece starts with an
    alphanumeric, as the DOT terminal's look-ahead requires); anything else non-alphanumeric is a Z escape.
    """
    # The common case, spelled as by the loop below: letters and digits stand for themselves, and if every
    # "_" is followed by [a-z0-9] and every "." by a letter or digit, "_" stays and "." is "__".
    if (
        s.isascii() and s[:1] not in ("_", ".") and "Z" not in s and s.replace("_", "").replace(".", "").isalnum()
        and _underscores_before_lower_digit(s) and _dots_before_alnum(s)
    ):
        return s.replace(".", "__")
    out = []
    last = len(s) - 1
    for i, ch in enumerate(s):
        if ch in _ALNUM and ch != "Z":
            out.append(ch)
        elif ch == "_" and 0 < i < last and s[i + 1] in _LOWER_DIGIT:
            out.append("_")
        elif ch == "." and 0 < i < last and s[i + 1] not in "_.":
            out.append("__")
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        else:
            cp = ord(ch)
            if cp < 0x100:
                out.append(f"Zx{cp:02x}")
            elif cp < 0x10000:
                out.append(f"Zy{cp:04x}")
            else:
                out.append(f"Zw{cp:06x}")
    return "".join(out)


def encode_float(text: str) -> str:
    """The token for a float whose ``repr`` is ``text`` (``-1.5e-07`` -> ``Fm1d5em07``)."""
    sign = "m" if text[0] == "-" else ""
    digits = text[1:] if sign else text
    return "F" + sign + digits.replace(".", "d").replace("-", "m").replace("+", "p")


# -------------------------------------------------------------------------------------- canonical printer

_OPEN = {TupleNode: "T", ListNode: "L", DictNode: "D", OrderedDictNode: "O"}


class _Key:
    """Stack marker: print this constant in dict-key position, where plain identifiers stand for themselves."""

    __slots__ = ("const",)

    def __init__(self, const: Const) -> None:
        self.const = const


def _push_entries(stack: list[Any], keys: tuple[Const, ...], children: tuple[Node, ...]) -> None:
    stack.append("E")
    for i in range(len(children) - 1, -1, -1):
        stack.append(children[i])
        stack.append(_Key(keys[i]))


def tokens(item: Name | Node | Const) -> list[str]:
    """The tokens of ``item`` in order (joined with ``_`` they spell it), by an explicit stack. A list, not a
    generator: printing is the canonical check of every decode, and a generator resumes once per token."""
    out: list[str] = []
    emit = out.append
    # str, _Key, nodes and constants, told apart by ``type(top)`` in a local (which mypy does not narrow)
    stack: list[Any] = [item.root if isinstance(item, Name) else item]
    while stack:
        top = stack.pop()
        key_position = False
        if type(top) is str:
            emit(top)
            continue
        if type(top) is _Key:
            top = top.const
            key_position = True
        kind = type(top)
        if kind is Leaves:
            emit("X" if top.count == 1 else f"X{top.count}")
        elif kind is TupleNode or kind is ListNode:
            emit(_OPEN[kind])
            stack.append("E")
            stack.extend(reversed(top.children))
        elif kind is DictNode or kind is OrderedDictNode:
            emit(_OPEN[kind])
            _push_entries(stack, top.keys, top.children)
        elif kind is DefaultDictNode:
            emit("DD")
            emit("N" if top.factory is None else encode_body(top.factory))
            emit("D")
            _push_entries(stack, top.keys, top.children)
        elif kind is DequeNode:
            emit("DQ")
            if top.maxlen is not None:
                emit(f"I{top.maxlen}")
            stack.append("E")
            stack.extend(reversed(top.children))
        elif kind is NamedTupleNode:
            emit("NT")
            emit(encode_body(top.cls))
            stack.append("E")
            stack.extend(reversed(top.children))
        elif kind is CustomNode:
            emit("C")
            emit(encode_body(top.cls))
            if top.context is not None:
                emit("K")
            stack.append("E")
            stack.extend(reversed(top.children))
            if top.context is not None:
                stack.append(top.context)
        elif kind is StrConst:
            emit(top.value if key_position and is_plain_key(top.value) else "S" + encode_body(top.value))
        elif kind is IntConst:
            emit(f"Im{-top.value}" if top.value < 0 else f"I{top.value}")
        elif kind is FloatConst:
            emit(encode_float(top.text))
        elif kind is NoneConst:
            emit("N")
        elif kind is BoolConst:
            emit("BT" if top.value else "BF")
        elif kind is EnumConst:
            emit("M" + encode_body(top.path))
        elif kind is TupleConst or kind is ListConst:
            emit("T" if kind is TupleConst else "L")
            stack.append("E")
            stack.extend(reversed(top.items))
        elif kind is DictConst:
            emit("D")
            stack.append("E")
            for k, v in reversed(top.items):
                stack.append(v)
                stack.append(k)
        else:  # pragma: no cover - the AST is closed
            raise TypeError(f"not a TreeSpec-name AST node: {kind.__name__}")
    return out


def print_name(name: Name) -> str:
    """The canonical text of ``name``."""
    return PREFIX + "_".join(tokens(name))


# ------------------------------------------------------------------------------------------ pretty printer


def const_repr(const: Const) -> str:
    """A Python-like rendering of a constant (``'a'``, ``(1, None)``, ``[...]``, ``mod.Color.RED``), iteratively."""
    # Post-order: each frame is (const, rendered children so far).
    out: list[str] = []
    stack: list[tuple[Any, bool]] = [(const, False)]  # a Const, dispatched on type(c) in a local (which mypy does not narrow)
    while stack:
        c, done = stack.pop()
        kind = type(c)
        if kind is StrConst or kind is IntConst:
            out.append(repr(c.value))
        elif kind is FloatConst:
            out.append(c.text)
        elif kind is NoneConst:
            out.append("None")
        elif kind is BoolConst:
            out.append(repr(c.value))
        elif kind is EnumConst:
            out.append(c.path)
        elif not done:
            stack.append((c, True))
            children = [x for kv in c.items for x in kv] if kind is DictConst else list(c.items)
            stack.extend((x, False) for x in reversed(children))
        else:
            n = 2 * len(c.items) if kind is DictConst else len(c.items)
            parts = out[len(out) - n :] if n else []
            del out[len(out) - n :]
            if kind is TupleConst:
                out.append("(" + parts[0] + ",)" if n == 1 else "(" + ", ".join(parts) + ")")
            elif kind is ListConst:
                out.append("[" + ", ".join(parts) + "]")
            else:
                out.append("{" + ", ".join(f"{parts[i]}: {parts[i + 1]}" for i in range(0, n, 2)) + "}")
    return out[0]


def _header(node: TupleNode | ListNode | DictNode | OrderedDictNode | DefaultDictNode | DequeNode | NamedTupleNode | CustomNode) -> str:
    # pretty_lines's view of a container (never Leaves); the dispatch on ``kind`` does not narrow, hence the casts
    kind = type(node)
    if kind is TupleNode:
        head = "tuple"
    elif kind is ListNode:
        head = "list"
    elif kind is DictNode:
        head = "dict"
    elif kind is OrderedDictNode:
        head = "OrderedDict"
    elif kind is DefaultDictNode:
        head = f"defaultdict({cast(DefaultDictNode, node).factory})"
    elif kind is DequeNode:
        maxlen = cast(DequeNode, node).maxlen
        head = "deque" if maxlen is None else f"deque(maxlen={maxlen})"
    elif kind is NamedTupleNode:
        head = f"namedtuple {cast(NamedTupleNode, node).cls}"
    else:
        custom = cast(CustomNode, node)
        head = custom.cls if custom.context is None else f"{custom.cls} context={const_repr(custom.context)}"
    return head if node.children else head + " (empty)"


def pretty_lines(name: Name, indent: str = "  ") -> list[str]:
    """The indented tree view: one line per node, ``*`` for a leaf, ``* xN`` for a run of N leaves."""
    lines: list[str] = []
    stack: list[tuple[Any, int, str]] = [(name.root, 0, "")]  # (Node, depth, label); dispatch on type(node)
    while stack:
        node, depth, label = stack.pop()
        pad = indent * depth
        if type(node) is Leaves:
            lines.append(f"{pad}{label}*" if node.count == 1 else f"{pad}{label}* x{node.count}")
            continue
        lines.append(f"{pad}{label}{_header(node)}")
        children = node.children
        labels = [const_repr(k) + ": " for k in node.keys] if isinstance(node, KEYED) else [""] * len(children)
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], depth + 1, labels[i]))
    return lines


# --------------------------------------------------------------------------------------------- measuring


def measure(name: Name, max_nodes: int, max_depth: int) -> tuple[str, int] | None:
    """Check the size of a parsed name before anything is built from it, iteratively.

    Nodes count every leaf of a run (``X999999999`` is a billion nodes), every container and every constant;
    depth counts nesting of containers (nodes and tuple/list/dict constants), the root being depth 1; leaves
    and scalar constants end a path and add no level. Returns ``None`` when both are
    within the limits, else ``(message, pos)`` for the first offending item in name order.
    """
    nodes = 0
    stack: list[tuple[Any, int, int]] = [(name.root, 1, 0)]  # (Node or Const, depth, pos); dispatch on type(item) in a local
    while stack:
        item, depth, pos = stack.pop()
        kind = type(item)
        if kind is Leaves:  # leaves end a path, they do not nest
            nodes += item.count
            if nodes > max_nodes:
                return f"name has more than the limit of {max_nodes} nodes (each leaf of a run counts)", item.pos
            continue
        if kind in _SCALARS:  # like leaves, scalar constants end a path
            nodes += 1
            continue
        if kind in _NODE_KINDS:
            pos = item.pos
        if depth > max_depth:
            return f"name nests deeper than the limit of {max_depth} levels", pos
        nodes += 1
        if nodes > max_nodes:
            return f"name has more than the limit of {max_nodes} nodes (each leaf of a run counts)", pos
        depth += 1
        if kind in _NODE_KINDS:
            for c in reversed(item.children):
                stack.append((c, depth, pos))
            if kind in KEYED:
                for k in reversed(item.keys):
                    stack.append((k, depth, pos))
            elif kind is CustomNode and item.context is not None:
                stack.append((item.context, depth, pos))
        elif kind is TupleConst or kind is ListConst:
            stack.extend((c, depth, pos) for c in reversed(item.items))
        elif kind is DictConst:
            stack.extend((c, depth, pos) for kv in reversed(item.items) for c in reversed(kv))
    if nodes > max_nodes:
        return f"name has more than the limit of {max_nodes} nodes (each leaf of a run counts)", pos
    return None


_NODE_KINDS = frozenset(
    {TupleNode, ListNode, DictNode, OrderedDictNode, DefaultDictNode, DequeNode, NamedTupleNode, CustomNode}
)
_SCALARS = frozenset({NoneConst, BoolConst, IntConst, FloatConst, StrConst, EnumConst})


def within_limits(name: Name, length: int, max_nodes: int, max_depth: int) -> bool:
    """A quick sufficient test for ``measure(name, max_nodes, max_depth) is None``, on a name parsed from a text of
    ``length`` characters: True only when ``measure`` would find nothing (when False, ask ``measure``).

    Every container, node or constant, opens with a token of its own of two characters or more ("_T", "_DQ",
    ...), so one at depth d needs 2d characters: a text shorter than ``2 * (max_depth + 1)`` cannot nest too
    deeply, and only the node count (the same count as ``measure``'s) is left to add up, without depths or
    positions."""
    if length >= 2 * (max_depth + 1):
        return False
    nodes = 0
    stack: list[Any] = [name.root]  # nodes and constants; dispatch on type(item) in a local
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is Leaves:
            nodes += item.count
            continue
        nodes += 1
        if kind in _NODE_KINDS:
            extend(item.children)
            if kind in KEYED:
                extend(item.keys)
            elif kind is CustomNode and item.context is not None:
                stack.append(item.context)
        elif kind is TupleConst or kind is ListConst:
            extend(item.items)
        elif kind is DictConst:
            for kv in item.items:
                extend(kv)
    return nodes <= max_nodes


def leaf_count(name: Name) -> int:
    """The number of leaves of a parsed name (each leaf of a run counts), iteratively; constants are not leaves."""
    leaves = 0
    stack: list[Any] = [name.root]
    while stack:
        item = stack.pop()
        if type(item) is Leaves:
            leaves += item.count
        elif type(item) in _NODE_KINDS:  # keys and contexts are constants, never leaves
            stack.extend(item.children)
    return leaves
