"""Tokens -> AST for TreeSpec names: the LALR tables of ``grammars/treespec_name.lark`` with these callbacks.

The engine (:mod:`._lalr`, running the tables lark computes from the grammar, contextual lexer) calls the AST
builder below as each rule is reduced, bottom-up, so no parse tree is built and no step recurses, however deeply
the name nests. The callbacks keep no state (one engine serves all threads).

Invariants: engine types never leave this module (tokens are turned into ``str``/``int`` and offsets); every
syntax error and every fault found by a callback becomes ``TreeSpecNameError`` with the position in the name, the
expected tokens and a caret line. Callbacks check what the grammar cannot say but a single token shows (leaf
counts, escapes, floats, integer sizes, merged leaf runs); the caller then checks that the name is the
canonical spelling of its AST (see ``treespec_name``).
"""

from __future__ import annotations

import sys
from typing import Any

from ._lalr import Engine, Failure
from ._lalr_build import load
from ._treespec_ast import (
    UNESCAPE,
    BoolConst,
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
    NoneConst,
    OrderedDictNode,
    StrConst,
    TupleConst,
    TupleNode,
)
from .errors import TreeSpecNameError

__all__: list[str] = []  # private module

# How an expected terminal is shown in an error message.
_SHOWN = {
    "_PREFIX": "'___'",
    "VERSION": "a version tag like 'v1'",
    "LEGACY": "a legacy base32 name",
    "_SEP": "'_'",
    "_END": "'E'",
    "LEAF": "'X'",
    "DIGITS": "digits",
    "TUPLE": "'T'",
    "LIST": "'L'",
    "DICT": "'D'",
    "ODICT": "'O'",
    "DDICT": "'DD'",
    "DEQUE": "'DQ'",
    "NTUPLE": "'NT'",
    "CUSTOM": "'C'",
    "CONTEXT": "'K'",
    "STR": "'S'",
    "INT": "'I'",
    "FLOAT": "'F'",
    "NONE": "'N'",
    "TRUE": "'BT'",
    "FALSE": "'BF'",
    "ENUM": "'M'",
    "MINUS": "'m'",
    "FLOAT_DIGITS": "a float spelling",
    "PLAIN_KEY": "a plain key",
    "LIT": "a letter or digit",
    "ESC": "an escape 'Z..'",
    "USC": "'_'",
    "DOT": "'__'",
    "$END": "end of input",
}
# Sets of alternatives summarised by one word when all of them are expected.
_GROUPS = (
    ("a node", frozenset({"LEAF", "TUPLE", "LIST", "DICT", "ODICT", "DDICT", "DEQUE", "NTUPLE", "CUSTOM"})),
    ("a key", frozenset({"PLAIN_KEY", "STR", "INT", "FLOAT", "NONE", "TRUE", "FALSE", "ENUM", "TUPLE"})),
    ("a constant", frozenset({"STR", "INT", "FLOAT", "NONE", "TRUE", "FALSE", "ENUM", "TUPLE", "LIST", "DICT"})),
)
_INT_DIGITS = 4300  # CPython's default int/str conversion limit; longer integers are refused, never parsed


class _Fault(Exception):
    """A problem found by a callback: message and offset; turned into TreeSpecNameError by :func:`parse`."""

    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(msg, pos)
        self.msg = msg
        self.pos = pos


def _no_touching_runs(children: list[Any]) -> tuple[Any, ...]:
    previous_is_run = False
    for child in children:
        is_run = type(child) is Leaves
        if is_run and previous_is_run:
            raise _Fault("adjacent leaf runs must be written as one run 'X<total>'", child.pos)
        previous_is_run = is_run
    return tuple(children)


def _split_entries(items: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    values = tuple(items[1::2])
    for value in values:
        if type(value) is Leaves and value.count != 1:
            raise _Fault("a dict value is one node: write 'X' for a leaf (runs 'X<k>' are for sequences)",
                         value.pos)
    return tuple(items[0::2]), values


class _ToAst:
    """Inline LALR callbacks: one method per grammar rule, children in source order (``_``-terminals dropped)."""

    def start(self, c: list[Any]) -> Name | LegacyName:
        return c[0]

    def name(self, c: list[Any]) -> Name:
        version, root = c
        if str(version) != "v1":
            raise _Fault(f"unsupported TreeSpec name version '{version}'; this library reads v1", version.start_pos)
        if type(root) is Leaves and root.count != 1:
            raise _Fault("the root is one node: write 'X' for a single leaf (runs 'X<k>' are for sequences)",
                         root.pos)
        return Name(root)

    def legacy_name(self, c: list[Any]) -> LegacyName:
        return LegacyName(str(c[0]), pos=c[0].start_pos)

    def leaves(self, c: list[Any]) -> Leaves:
        if len(c) == 1:
            return Leaves(1, pos=c[0].start_pos)
        digits = str(c[1])
        if digits[0] == "0" or digits == "1":
            raise _Fault("a run of leaves is 'X' for one leaf and 'X<k>' for k >= 2, without leading zeros",
                         c[0].start_pos)
        if len(digits) > _INT_DIGITS:
            raise _Fault("leaf count has too many digits", c[1].start_pos)
        return Leaves(int(digits), pos=c[0].start_pos)

    def tuple(self, c: list[Any]) -> TupleNode:
        return TupleNode(_no_touching_runs(c[1:]), pos=c[0].start_pos)

    def list(self, c: list[Any]) -> ListNode:
        return ListNode(_no_touching_runs(c[1:]), pos=c[0].start_pos)

    def dict(self, c: list[Any]) -> DictNode:
        keys, children = _split_entries(c[1:])
        return DictNode(keys, children, pos=c[0].start_pos)

    def odict(self, c: list[Any]) -> OrderedDictNode:
        keys, children = _split_entries(c[1:])
        return OrderedDictNode(keys, children, pos=c[0].start_pos)

    def ddict(self, c: list[Any]) -> DefaultDictNode:
        # DD (ref | N) D entries...; N (a NoneConst here) is a defaultdict without a factory
        keys, children = _split_entries(c[3:])
        factory = None if isinstance(c[1], NoneConst) else c[1][0]
        return DefaultDictNode(factory, keys, children, pos=c[0].start_pos)

    def deque(self, c: list[Any]) -> DequeNode:
        maxlen = None
        rest = c[1:]
        if rest and getattr(rest[0], "type", None) == "INT":
            maxlen = self._int(rest[1], negative=False)
            rest = rest[2:]
        return DequeNode(maxlen, _no_touching_runs(rest), pos=c[0].start_pos)

    def ntuple(self, c: list[Any]) -> NamedTupleNode:
        return NamedTupleNode(c[1][0], _no_touching_runs(c[2:]), pos=c[0].start_pos)

    def custom(self, c: list[Any]) -> CustomNode:
        context = None
        rest = c[2:]
        if rest and getattr(rest[0], "type", None) == "CONTEXT":
            # A None context is written by leaving K out; keeping "K_N" as None makes the canonical check see it.
            context = None if type(rest[1]) is NoneConst else rest[1]
            rest = rest[2:]
        return CustomNode(c[1][0], context, _no_touching_runs(rest), pos=c[0].start_pos)

    # ---- keys and constants

    def plain_key(self, c: list[Any]) -> StrConst:
        return StrConst(str(c[0]))

    def str_const(self, c: list[Any]) -> StrConst:
        return StrConst(c[1][0] if len(c) > 1 else "")

    @staticmethod
    def _int(token: Any, negative: bool) -> int:
        digits = str(token)
        if len(digits) > _INT_DIGITS:
            raise _Fault(f"integer has more than {_INT_DIGITS} digits", token.start_pos)
        return -int(digits) if negative else int(digits)

    def int_const(self, c: list[Any]) -> IntConst:
        return IntConst(self._int(c[-1], negative=len(c) == 3))

    def float_const(self, c: list[Any]) -> FloatConst:
        spelled = str(c[-1])
        text = ("-" if len(c) == 3 else "") + spelled.replace("d", ".").replace("m", "-").replace("p", "+")
        if len(text) > 40 or repr(float(text)) != text:
            raise _Fault("a float is spelled as its repr() (for example F1d5 for 1.5, F1ep20 for 1e+20)",
                         c[0].start_pos)
        return FloatConst(text)

    def none_const(self, c: list[Any]) -> NoneConst:
        return NoneConst()

    def bool_const(self, c: list[Any]) -> BoolConst:
        return BoolConst(c[0].type == "TRUE")

    def enum_const(self, c: list[Any]) -> EnumConst:
        return EnumConst(c[1][0], pos=c[1][1])

    def const_tuple(self, c: list[Any]) -> TupleConst:
        return TupleConst(tuple(c[1:]))

    def const_list(self, c: list[Any]) -> ListConst:
        return ListConst(tuple(c[1:]))

    def const_dict(self, c: list[Any]) -> DictConst:
        items = c[1:]
        return DictConst(tuple(zip(items[0::2], items[1::2])))

    # ---- bodies: (text, offset) pairs

    def ref(self, c: list[Any]) -> tuple[str, int]:
        return c[0]

    def body(self, c: list[Any]) -> tuple[str, int]:
        out = []
        for tok in c:
            kind = tok.type
            if kind == "LIT":
                out.append(str(tok))
            elif kind == "USC":
                out.append("_")
            elif kind == "DOT":
                out.append(".")
            else:  # ESC
                text = str(tok)
                short = UNESCAPE.get(text)
                if short is not None:
                    out.append(short)
                    continue
                code = int(text[2:], 16)
                if code > sys.maxunicode:
                    raise _Fault(f"escape '{text}' is beyond the last Unicode code point", tok.start_pos)
                out.append(chr(code))
        return "".join(out), c[0].start_pos


_ENGINE: Any = None


def _engine() -> Engine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Engine(load("treespec_name"), _ToAst())
    return _ENGINE


def _expected_text(names: Any) -> str:
    names = set(names)
    words = []
    for word, group in _GROUPS:
        if group <= names:
            words.append(word)
            names -= group
    words.extend(sorted({_SHOWN.get(n, n) for n in names}))
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _shown_char(text: str, pos: int) -> str:
    if pos >= len(text):
        return "end of input"
    return repr(text[pos])


def parse(text: str) -> Name | LegacyName:
    """Parse a whole TreeSpec name into its AST (a legacy name gives ``LegacyName``); raise :class:`TreeSpecNameError` on any malformed input."""
    try:
        return _engine().parse(text)
    except _Fault as fault:
        raise TreeSpecNameError(fault.msg, text, fault.pos) from None
    except Failure as e:
        expected = tuple(sorted(e.expected))
        if e.token is None:  # no terminal matches here
            msg = f"expected {_expected_text(expected)}, got {_shown_char(text, e.pos)}"
        elif e.token.type == "$END":
            msg = f"expected {_expected_text(expected)}, got end of input"
        else:
            msg = f"expected {_expected_text(expected)}, got {e.token.value[:20]!r}"
        raise TreeSpecNameError(msg, text, e.pos, expected) from None
