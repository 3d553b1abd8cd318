"""Tokens -> AST for TreeSpec names: the LALR tables of ``grammars/treespec_name.lark`` with these callbacks.

The engine (:mod:`.._lalr.engine`, running the tables lark computes from the grammar, contextual lexer) calls the AST
builder below as each rule is reduced, bottom-up, so no parse tree is built and no step recurses, however deeply
the name nests. The callbacks keep no state (one engine serves all threads).

Invariants: engine types never leave this module (tokens are turned into ``str``/``int`` and offsets); every
syntax error and every fault found by a callback becomes ``TreeSpecNameError`` with the position in the name, the
expected tokens and a caret line. Callbacks check what the grammar cannot say but a single token shows (leaf
counts, escapes, floats, integer sizes, merged leaf runs); the caller then checks that the name is the
canonical spelling of its AST (see ``treespec_name``).

Imports: the engine and its tables (:mod:`.._lalr`), the error class and the AST (:mod:`._ast`). Never the
package ``__init__`` (which imports this module on first decode), never lark or torch.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .._diagnostics import Refused, join_or
from .._lalr.choice import Engine, Failure, Token
from .._lalr.tables import load
from ..errors import TreeSpecNameError
from ._ast import (
    UNESCAPE,
    VERSION_TAG,
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
    encode_body,
    is_plain_key,
)

if TYPE_CHECKING:
    # Spelled here because _ToAst's methods named list, tuple and dict shadow the builtins in its body.
    _Children = list[Any]  # a rule's children: Tokens and the values of its sub-rules, in source order
    _Body = tuple[str, int]  # (text, offset)

__all__: list[str] = []  # private module

# How an expected terminal is shown in an error message. Separator-led tokens are shown with their "_".
_SHOWN = {
    "_PREFIX": "'___'",
    "VERSION": "a version tag like 'v1'",
    "LEGACY": "a legacy base32 name",
    "_END": "'_E'",
    "LEAF": "'_X'",
    "TUPLE": "'_T'",
    "LIST": "'_L'",
    "DICT": "'_D'",
    "ODICT": "'_O'",
    "DDICT": "'_DD'",
    "DEQUE": "'_DQ'",
    "NTUPLE": "'_NT'",
    "CUSTOM": "'_C'",
    "CONTEXT": "'_K'",
    "STR": "'_S'",
    "INT": "'_I<digits>'",
    "NEG_INT": "'_Im<digits>'",
    "FLOAT": "a float '_F..'",
    "NONE": "'_N'",
    "TRUE": "'_BT'",
    "FALSE": "'_BF'",
    "ENUM": "'_M'",
    "PLAIN_KEY": "a plain key",
    "LIT": "a letter or digit",
    "ESC": "an escape 'Z..'",
    "REF_LIT": "a type reference",
    "REF_ESC": "a type reference",
    "USC": "'_'",
    "DOT": "'__'",
    "$END": "end of input",
}
# Terminals that start with the separator "_" the grammar folds into them.
_SEPARATOR_LED = frozenset({"_END", "LEAF", "TUPLE", "LIST", "DICT", "ODICT", "DDICT", "DEQUE", "NTUPLE", "CUSTOM",
                            "CONTEXT", "STR", "INT", "NEG_INT", "FLOAT", "NONE", "TRUE", "FALSE", "ENUM", "PLAIN_KEY",
                            "REF_LIT", "REF_ESC"})
# Sets of alternatives summarised by one word when all of them are expected.
_GROUPS = (
    ("a node", frozenset({"LEAF", "TUPLE", "LIST", "DICT", "ODICT", "DDICT", "DEQUE", "NTUPLE", "CUSTOM"})),
    ("a key", frozenset({"PLAIN_KEY", "STR", "INT", "NEG_INT", "FLOAT", "NONE", "TRUE", "FALSE", "ENUM", "TUPLE"})),
    ("a constant", frozenset({"STR", "INT", "NEG_INT", "FLOAT", "NONE", "TRUE", "FALSE", "ENUM", "TUPLE", "LIST",
                              "DICT"})),
)
_INT_DIGITS = 4300  # CPython's default int/str conversion limit; longer integers are refused, never parsed


class _NotCanonical(Exception):
    """A piece of the name is not spelled as the printer spells it (Note [piecewise canonical check])."""


# Note [piecewise canonical check]
# A name is canonical when the printer gives it back. The grammar fixes every structural token, so the printer
# can differ from the text only where the grammar allows several spellings of one value: integers (leading
# zeros, "m0"), multi-piece bodies (escapes, "__" versus "Zd"), a string key written S<body> although it is a
# plain key, a custom node's "K_N" context, leaf runs and floats (the last two are refused by the callbacks
# with their own messages). The checking callbacks verify these pieces as they are reduced, so an accepted name
# needs no re-print; when one fails, the caller re-parses without the checks and prints the name, so the
# message shows the canonical spelling and errors keep their order (syntax, then limits, then canonical form).
# tests/treespec_name/test_piecewise_canonical.py checks that both ways agree on corpora and mutants.


# Separator-led tokens ("_T", "_X2", "_input_ids") start with the "_" the grammar folds into them; AST positions
# and error carets point one further, at the kind letter or key, as they did when the separator was its own token.


def _leaves(tok: Token) -> Leaves:
    """The leaf run of a LEAF token: ``_X`` (one leaf) or ``_X<k>``."""
    pos = tok.start_pos + 1
    value = tok.value
    if len(value) == 2:
        return Leaves(1, pos=pos)
    digits = value[2:]  # the LEAF terminal is "_X" then digits
    if digits[0] == "0" or digits == "1":
        raise Refused("a run of leaves is 'X' for one leaf and 'X<k>' for k >= 2, without leading zeros", pos)
    if len(digits) > _INT_DIGITS:
        raise Refused("leaf count has too many digits", pos + 1)
    return Leaves(int(digits), pos=pos)


def _sequence(children: list[Any], start: int) -> tuple[Any, ...]:
    """The children of a sequence node from ``children[start:]``: LEAF tokens become leaf runs, which never touch."""
    out = []
    previous_is_run = False
    for i in range(start, len(children)):
        child = children[i]
        if type(child) is Token:  # a LEAF: ?node passes leaf tokens up unreduced
            child = _leaves(child)
            if previous_is_run:
                raise Refused("adjacent leaf runs must be written as one run 'X<total>'", child.pos)
            previous_is_run = True
        else:
            previous_is_run = False
        out.append(child)
    return tuple(out)


def _entries(children: list[Any], start: int, checked: bool) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Keys and values of a dict-like node from ``children[start:]`` (key, value, key, value, ...)."""
    keys = []
    values = []
    for i in range(start, len(children), 2):
        key = children[i]
        if type(key) is Token:  # a PLAIN_KEY token ("_input_ids") stands for the string after its separator
            key = StrConst(key.value[1:])
        elif checked and type(key) is StrConst and is_plain_key(key.value):
            raise _NotCanonical  # a plain key written S<body>
        keys.append(key)
        value = children[i + 1]
        if type(value) is Token:  # a LEAF
            value = _leaves(value)
            if value.count != 1:
                raise Refused("a dict value is one node: write 'X' for a leaf (runs 'X<k>' are for sequences)",
                             value.pos)
        values.append(value)
    return tuple(keys), tuple(values)


def _int(token: Token, digits_at: int, negative: bool) -> int:
    """The integer of an INT token (``_I<digits>``, digits at offset 2) or NEG_INT token (``_Im<digits>``, 3)."""
    digits = token.value[digits_at:]
    if len(digits) > _INT_DIGITS:
        raise Refused(f"integer has more than {_INT_DIGITS} digits", token.start_pos + digits_at)
    return -int(digits) if negative else int(digits)


class _ToAst:
    """Inline LALR callbacks: one method per grammar rule, children in source order (``_``-terminals dropped).

    With ``checked``, the callbacks also verify the canonical spelling of each piece and raise
    :class:`_NotCanonical` (Note [piecewise canonical check]); the setting is fixed per instance, nothing is kept
    per parse."""

    def __init__(self, checked: bool) -> None:
        self.checked = checked

    def start(self, c: _Children) -> Name | LegacyName:
        root: Name | LegacyName = c[0]
        return root

    def name(self, c: _Children) -> Name:
        version, root = c
        if version.value != VERSION_TAG:
            raise Refused(f"unsupported TreeSpec name version '{version.value}'; this library reads {VERSION_TAG}",
                         version.start_pos)
        if type(root) is Token:
            root = _leaves(root)
            if root.count != 1:
                raise Refused("the root is one node: write 'X' for a single leaf (runs 'X<k>' are for sequences)",
                             root.pos)
        return Name(root)

    def legacy_name(self, c: _Children) -> LegacyName:
        return LegacyName(c[0].value, pos=c[0].start_pos)

    def tuple(self, c: _Children) -> TupleNode:
        return TupleNode(_sequence(c, 1), pos=c[0].start_pos + 1)

    def list(self, c: _Children) -> ListNode:
        return ListNode(_sequence(c, 1), pos=c[0].start_pos + 1)

    def dict(self, c: _Children) -> DictNode:
        keys, children = _entries(c, 1, self.checked)
        return DictNode(keys, children, pos=c[0].start_pos + 1)

    def odict(self, c: _Children) -> OrderedDictNode:
        keys, children = _entries(c, 1, self.checked)
        return OrderedDictNode(keys, children, pos=c[0].start_pos + 1)

    def ddict(self, c: _Children) -> DefaultDictNode:
        # DD (ref | N) D entries...; N (a NoneConst here) is a defaultdict without a factory
        keys, children = _entries(c, 3, self.checked)
        factory = None if type(c[1]) is NoneConst else c[1][0]
        return DefaultDictNode(factory, keys, children, pos=c[0].start_pos + 1)

    def deque(self, c: _Children) -> DequeNode:
        maxlen = None
        start = 1
        if len(c) > 1 and type(c[1]) is Token and c[1].type == "INT":
            maxlen = _int(c[1], 2, negative=False)
            if self.checked:
                _check_int(c[1], 2, negative=False)
            start = 2
        return DequeNode(maxlen, _sequence(c, start), pos=c[0].start_pos + 1)

    def ntuple(self, c: _Children) -> NamedTupleNode:
        return NamedTupleNode(c[1][0], _sequence(c, 2), pos=c[0].start_pos + 1)

    def custom(self, c: _Children) -> CustomNode:
        context = None
        start = 2
        if len(c) > 2 and type(c[2]) is Token and c[2].type == "CONTEXT":
            # A None context is written by leaving K out; keeping "K_N" as None makes the canonical check see it.
            context = None if type(c[3]) is NoneConst else c[3]
            if context is None and self.checked:
                raise _NotCanonical  # a None context is written by leaving K out
            start = 4
        return CustomNode(c[1][0], context, _sequence(c, start), pos=c[0].start_pos + 1)

    # ---- keys and constants

    def str_const(self, c: _Children) -> StrConst:
        return StrConst(c[1][0] if len(c) > 1 else "")

    def int_const(self, c: _Children) -> IntConst:
        tok = c[0]
        negative = tok.type == "NEG_INT"
        value = _int(tok, 3 if negative else 2, negative)
        if self.checked:
            _check_int(tok, 3 if negative else 2, negative)
        return IntConst(value)

    def float_const(self, c: _Children) -> FloatConst:
        tok = c[0]
        # the FLOAT terminal is "_F" then the repr with "." -> d, "-" -> m (sign and exponent), "+" -> p
        text = tok.value[2:].replace("d", ".").replace("m", "-").replace("p", "+")
        if len(text) > 40 or repr(float(text)) != text:
            raise Refused("a float is spelled as its repr() (for example F1d5 for 1.5, F1ep20 for 1e+20)",
                         tok.start_pos + 1)
        return FloatConst(text)

    def none_const(self, c: _Children) -> NoneConst:
        return _NONE

    def bool_const(self, c: _Children) -> BoolConst:
        return _TRUE if c[0].type == "TRUE" else _FALSE

    def enum_const(self, c: _Children) -> EnumConst:
        return EnumConst(c[1][0], pos=c[1][1])

    def const_tuple(self, c: _Children) -> TupleConst:
        return TupleConst(tuple(c[1:]))

    def const_list(self, c: _Children) -> ListConst:
        return ListConst(tuple(c[1:]))

    def const_dict(self, c: _Children) -> DictConst:
        items = c[1:]
        return DictConst(tuple(zip(items[0::2], items[1::2])))  # noqa: B905 - equal halves; strict= doubles zip's cost on the decode path

    # ---- bodies: (text, offset) pairs

    def ref(self, c: _Children) -> _Body:
        # the first piece (REF_LIT or REF_ESC) carries the separator before the reference
        return _body(c, 1, self.checked)

    def body(self, c: _Children) -> _Body:
        return _body(c, 0, self.checked)


_NONE = NoneConst()
_TRUE = BoolConst(True)
_FALSE = BoolConst(False)


def _check_int(token: Token, digits_at: int, negative: bool) -> None:
    value = token.value
    if value[digits_at] == "0" and (negative or len(value) > digits_at + 1):
        raise _NotCanonical  # leading zeros, or minus zero


def _body(c: list[Any], skip: int, checked: bool) -> tuple[str, int]:
    """The text of body pieces ``c``, whose first piece starts ``skip`` characters late (its separator)."""
    first = c[0]
    pos = first.start_pos + skip
    if len(c) == 1 and (first.type == "LIT" or first.type == "REF_LIT"):
        # the common case: one run of letters and digits other than Z, canonical as it stands
        return first.value[skip:], pos
    out = []
    for i, tok in enumerate(c):
        kind = tok.type
        text = tok.value[skip:] if i == 0 else tok.value
        if kind == "LIT" or kind == "REF_LIT":
            out.append(text)
        elif kind == "USC":
            out.append("_")
        elif kind == "DOT":
            out.append(".")
        else:  # ESC, REF_ESC
            short = UNESCAPE.get(text)
            if short is not None:
                out.append(short)
                continue
            code = int(text[2:], 16)
            if code > sys.maxunicode:
                raise Refused(f"escape '{text}' is beyond the last Unicode code point",
                             tok.start_pos + (skip if i == 0 else 0))
            out.append(chr(code))
    text = "".join(out)
    if checked and encode_body(text) != "".join([tok.value for tok in c])[skip:]:
        raise _NotCanonical  # another spelling of the same text (an escape that is not needed, or is not minimal)
    return text, pos


_ENGINE: Engine | None = None
_CHECKED_ENGINE: Engine | None = None


def _engine() -> Engine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Engine(load("treespec_name"), _ToAst(checked=False))
    return _ENGINE


def _checked_engine() -> Engine:
    global _CHECKED_ENGINE
    if _CHECKED_ENGINE is None:
        _CHECKED_ENGINE = Engine(load("treespec_name"), _ToAst(checked=True))
    return _CHECKED_ENGINE


def _expected_text(names: Any) -> str:
    names = set(names)
    words = []
    for word, group in _GROUPS:
        if group <= names:
            words.append(word)
            names -= group
    words.extend(sorted({_SHOWN.get(n, n) for n in names}))
    return join_or(words)


def _shown_char(text: str, pos: int) -> str:
    if pos >= len(text):
        return "end of input"
    return repr(text[pos])


def parse_if_canonical(text: str) -> Name | LegacyName | None:
    """Parse ``text`` and check the canonical spelling of each piece (Note [piecewise canonical check]).

    Returns the AST of a name whose every piece is canonical (then ``print_name(ast) == text``), ``None`` when a
    piece is not (call :func:`parse` and print the name to say why); raises :class:`TreeSpecNameError` like
    :func:`parse` for malformed input, unless a piece before the fault is not canonical (then ``None``)."""
    try:
        ast: Name | LegacyName = _checked_engine().parse(text)
        return ast
    except _NotCanonical:
        return None
    except (Refused, Failure):
        parse(text)  # raises the same error, worded by parse(): the checks only ever add _NotCanonical
        return None


def parse(text: str) -> Name | LegacyName:
    """Parse a whole TreeSpec name into its AST (a legacy name gives ``LegacyName``); raise :class:`TreeSpecNameError` on any malformed input."""
    try:
        ast: Name | LegacyName = _engine().parse(text)
        return ast
    except Refused as fault:
        raise TreeSpecNameError(fault.msg, text, fault.pos) from None
    except Failure as e:
        # What the parser could really take here: an LALR state shared by several contexts lists look-aheads that
        # only one of them accepts (after a root leaf, every token that may follow a leaf elsewhere).
        expected = tuple(sorted(_engine().accepts(e.states) or e.expected))
        pos = e.pos
        if (pos < len(text) and text[pos] == "_" and (e.token is None or e.token.value == "_")
                and _SEPARATOR_LED.issuperset(expected)):
            # Every token that could come here starts with the separator "_", and the separator is there: what
            # is wrong is the character after it, so the caret goes there (as when "_" was a token of its own).
            pos += 1
            msg = f"expected {_expected_text(expected)}, got {_shown_char(text, pos)}"
            raise TreeSpecNameError(msg, text, pos, expected) from None
        if e.token is None:  # no terminal matches here
            msg = f"expected {_expected_text(expected)}, got {_shown_char(text, e.pos)}"
        elif e.token.type == "$END":
            msg = f"expected {_expected_text(expected)}, got end of input"
        else:
            msg = f"expected {_expected_text(expected)}, got {e.token.value[:20]!r}"
        raise TreeSpecNameError(msg, text, e.pos, expected) from None
