"""Read a structure description (``"((*, *), {'a': *})"``) into placeholder Python containers.

``pbp-serialize name encode`` takes the shape of an input as text, builds the same containers with a
placeholder in every leaf, flattens them with torch's pytree and encodes the TreeSpec. The language is
defined by ``grammars/structure.lark`` and parsed by the engine (:mod:`.._lalr`, running the tables lark computes
from the grammar, contextual lexer; see :mod:`.._lalr.tables`), without lark. Nothing is evaluated: the parser's
callbacks build tuples, lists, dicts and ``OrderedDict`` objects directly, and string keys are decoded by hand.

Invariants: any input either yields containers whose leaves are all :data:`LEAF` or raises
:class:`~piece_by_piece_serialize.errors.TreeSpecNameError` with a position (never an engine exception);
nesting is bounded by :data:`MAX_DEPTH`, because torch's ``tree_flatten`` recurses once per level.

Imports: the engine (:mod:`.._lalr.engine`, :mod:`.._lalr.tables`), :mod:`..errors` and
:mod:`.sources._pystring` (string keys are Python string literals); never lark, never torch.
"""

from __future__ import annotations

import collections
import threading
import types
from collections.abc import Iterable
from typing import Any

from .._diagnostics import Refused, join_or
from .._lalr.choice import Engine, Failure, Token
from .._lalr.tables import load
from ..errors import TreeSpecNameError
from .sources._pystring import decode_python_string

__all__ = ["LEAF", "MAX_DEPTH", "parse_structure"]

# What a `*` becomes: any object that torch's pytree treats as a leaf will do.
LEAF = 0
# Deeper descriptions are refused up front: tree_flatten needs a few Python frames per level.
MAX_DEPTH = 100

_engine: Engine | None = None
_lock = threading.Lock()
# How each terminal is named in error messages.
_TERMINAL_TEXT = {
    "STRING": "a string",
    "INT": "an integer",
    "$END": "end of input",
}


class _Built:
    """A parsed value and its nesting depth (leaves have depth 0)."""

    __slots__ = ("value", "depth")

    def __init__(self, value: Any, depth: int) -> None:
        self.value = value
        self.depth = depth


def _container(value: Any, children: list[_Built], token: Token) -> _Built:
    depth = 1 + max((c.depth for c in children), default=0)
    if depth > MAX_DEPTH:
        raise Refused(f"structure nested deeper than {MAX_DEPTH} levels", token.start_pos)
    return _Built(value, depth)


def _values(children: list[Any]) -> list[_Built]:
    """The built values among a rule's children (the punctuation tokens left out)."""
    return [c for c in children if isinstance(c, _Built)]


def _container_callbacks() -> dict[str, Any]:
    """The callbacks of the rules that build values: leaves, groups and the four container kinds."""

    def leaf(children: list[Any]) -> _Built:
        return _Built(LEAF, 0)

    def group(children: list[Any]) -> _Built:
        return _values(children)[0]

    def tuple_(children: list[Any]) -> _Built:
        items = _values(children)
        return _container(tuple(c.value for c in items), items, children[0])

    def list_(children: list[Any]) -> _Built:
        items = _values(children)
        return _container([c.value for c in items], items, children[0])

    def dict_(children: list[Any]) -> _Built:
        result: dict[Any, Any] = {}
        items: list[_Built] = []
        for child in children:
            if isinstance(child, tuple):
                key, key_pos, built = child
                # True == 1 and hash alike in Python: a dict could not hold both, so refuse the pair
                if key in result:
                    raise Refused(f"duplicate dict key {key!r}", key_pos)
                result[key] = built.value
                items.append(built)
        return _container(result, items, children[0])

    def ordered_dict(children: list[Any]) -> _Built:
        inner = _values(children)
        mapping = inner[0].value if inner else {}
        return _container(collections.OrderedDict(mapping), inner, children[0])

    def start(children: list[_Built]) -> _Built:
        return children[0]

    return {
        "start": start,
        "leaf": leaf,
        "group": group,
        "tuple": tuple_,
        "list": list_,
        "dict": dict_,
        "ordered_dict": ordered_dict,
    }


def _key_callbacks() -> dict[str, Any]:
    """The callbacks of the dict-key rules: each yields (key, offset of the key), and ``pair`` adds the value."""

    def pair(children: list[Any]) -> tuple[Any, int, _Built]:
        key, key_pos = children[0]
        return key, key_pos, children[2]

    def string_key(children: list[Token]) -> tuple[Any, int]:
        token = children[0]
        try:
            decoded = decode_python_string(token.value, 1, 1)
        except (ValueError, KeyError):  # a truncated \x/\u/\U escape, an unknown \N{name}: what Python refuses
            raise Refused("invalid escape sequence in string key", token.start_pos) from None
        if decoded is None:  # pragma: no cover - the STRING terminal has no prefixes
            raise Refused("unsupported string literal", token.start_pos)
        return "".join(decoded[0]), token.start_pos

    def int_key(children: list[Token]) -> tuple[Any, int]:
        return int(children[0].value), children[0].start_pos

    def negative_int_key(children: list[Token]) -> tuple[Any, int]:
        return -int(children[1].value), children[0].start_pos

    def true_key(children: list[Token]) -> tuple[Any, int]:
        return True, children[0].start_pos

    def false_key(children: list[Token]) -> tuple[Any, int]:
        return False, children[0].start_pos

    def none_key(children: list[Token]) -> tuple[Any, int]:
        return None, children[0].start_pos

    return {
        "pair": pair,
        "string_key": string_key,
        "int_key": int_key,
        "negative_int_key": negative_int_key,
        "true_key": true_key,
        "false_key": false_key,
        "none_key": none_key,
    }


def _make_callbacks() -> dict[str, Any]:
    return {**_container_callbacks(), **_key_callbacks()}


def _get_engine() -> Engine:
    global _engine
    engine = _engine
    if engine is None:
        with _lock:
            engine = _engine
            if engine is None:
                tables = load("structure")
                for name, literal in tables["literals"].items():
                    _TERMINAL_TEXT.setdefault(name, repr(literal))
                engine = _engine = Engine(tables, types.SimpleNamespace(**_make_callbacks()))
    return engine


def _describe(names: Iterable[str]) -> str:
    return join_or(sorted({_TERMINAL_TEXT.get(n, n) for n in names}))


def parse_structure(text: str) -> Any:
    """Build the containers a structure description describes, with :data:`LEAF` in every leaf.

    Accepts the language of ``grammars/structure.lark``. Returns a tuple, list, dict, ``OrderedDict``
    or :data:`LEAF`. Raises :class:`TreeSpecNameError` (with position and expected tokens) on malformed
    input, duplicate dict keys or nesting deeper than :data:`MAX_DEPTH`.
    """
    engine = _get_engine()
    try:
        built: _Built = engine.parse(text)
    except Refused as exc:
        raise TreeSpecNameError(exc.msg, text, exc.pos) from None
    except Failure as exc:
        if exc.token is None:  # no terminal of this state's lexer matches here
            expected = set(exc.expected)
            raise TreeSpecNameError(
                f"expected {_describe(expected)}, got {text[exc.pos]!r}", text, exc.pos, tuple(expected)
            ) from None
        # what the parser could really take here (an LALR state lists look-aheads that a reduction then refuses)
        expected = set(engine.accepts(exc.states) or exc.expected)
        if exc.token.type == "$END":
            raise TreeSpecNameError(
                f"expected {_describe(expected)}, got end of input", text, len(text), tuple(expected)
            ) from None
        raise TreeSpecNameError(
            f"expected {_describe(expected)}, got {exc.token.value!r}", text, exc.token.start_pos, tuple(expected)
        ) from None
    return built.value
