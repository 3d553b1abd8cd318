"""Tokens -> AST for the schema language: the LALR tables of ``grammars/schema.lark`` with these callbacks.

The engine (:mod:`.._lalr.engine`, running the tables lark computes from the grammar; see :mod:`.._lalr.build`)
is built once, on first use, with the transformer below embedded (no parse tree is built); every syntax error it
reports becomes a :class:`SchemaError` positioned in the text (worded by ``_syntax_errors``). The callbacks give
the syntax its meaning exactly as torch's C++ parser does (schema_type_parser.cpp, function_schema_parser.cpp):
type names and typevars here, with the tables of ``_torch_tables``; number, string and device literals in
``_literals``; defaults by type in ``_defaults``; container members and Union normalisation in ``_union``; the
``!`` shorthand in ``_aliases``; the argument-order and vararg checks here. Where torch would hit an internal
assert, or store a value its printer cannot write back, they raise a ``SchemaError`` instead (listed in
docs/schema.md).

Invariants: no engine object (token, failure) escapes this module; the transformer keeps no per-parse state, so
the shared engine is safe to reuse and re-enter; work is linear in the input, and type nesting is bounded by
``MAX_TYPE_DEPTH`` before anything recursive can see it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._diagnostics import Refused
from .._lalr.choice import Engine, Failure, Token
from .._lalr.tables import load
from ..errors import SchemaError
from ._aliases import _FRESH, _any_fresh, _renumber, _with_alias
from ._ast import Argument, FunctionSchema, OperatorName, Return
from ._defaults import _default_for, _Raw
from ._fail import _short
from ._literals import _stoll
from ._syntax_errors import _translate
from ._torch_tables import _BASE_TYPES, _DICT_KEYS
from ._types import (
    AliasInfo,
    AwaitType,
    BaseType,
    ClassType,
    DictType,
    FutureType,
    ListType,
    OptionalType,
    RRefType,
    TupleType,
    Type,
    TypeVar,
    UnionType,
)
from ._union import _check_depth, _check_stable, _member, _optional, _union
from ._values import DefaultValue

__all__ = ["parse", "ParseResult"]

# Types are immutable: one instance of each builtin type without annotation serves every schema.
_PLAIN_BASE = {name: BaseType(name) for name in set(_BASE_TYPES.values()) | {"Tensor"}}


# ---------------------------------------------------------------------------------------------------------------
# The transformer. Callbacks are named after the grammar's rules and aliases and run inside the LALR parser.
# Types travel as (type, start, end) triples and alias annotations as (AliasInfo, end) pairs, so that
# arguments and returns get their source spans without lark's position propagation.


def _kept(spanned: _Spanned) -> Type:
    """The type of a spanned member kept as written (Note [Unstable unions] in ``_union``)."""
    _check_stable(spanned[0], spanned[1])
    return spanned[0]


def _alias_end(c: Sequence[Any], index: int, default_end: int) -> tuple[AliasInfo | None, int]:
    if len(c) > index and isinstance(c[index], tuple):
        return c[index][0], c[index][1]
    return None, default_end


# What the callbacks pass between them (the grammar fixes which one each child is): a type with its source span,
# a parameter list, a return list, a parsed argument.
_Spanned = tuple[Type, int, int]
_Params = tuple[tuple[Argument, ...], bool]  # (arguments, has '...')
_Returns = tuple[tuple[Return, ...], bool]  # (returns, has '...')
_Arg = tuple[str, Type, Token, DefaultValue | None, int, int]  # ("arg", type, name token, default, start, end)
# A rule's children: tokens and the values of its sub-rules, of the kinds the grammar puts there.
_Kids = list[Any]


class _ToAst:
    # --- schema ---------------------------------------------------------------------------------------------
    def start(self, c: _Kids) -> ParseResult:
        result: ParseResult = c[0]
        return result

    def bare_name(self, c: _Kids) -> ParseResult:
        return ParseResult("name", c[0][0], c[0][1])

    def named_schema(self, c: _Kids) -> ParseResult:
        (name, name_pos), (returns, varret) = c[0], c[-1]
        return ParseResult("schema", _schema(name, _params_of(c[2]), returns, varret), name_pos)

    def nameless_schema(self, c: _Kids) -> ParseResult:
        returns, varret = c[-1]
        return ParseResult("nameless", _schema(OperatorName("", ""), _params_of(c[1]), returns, varret), 0)

    def wrapped_schema(self, c: _Kids) -> ParseResult:
        returns, varret = c[-2]
        return ParseResult("wrapped", _schema(OperatorName("", ""), _params_of(c[2]), returns, varret), 0)

    def operator_name(self, c: _Kids) -> tuple[OperatorName, int]:
        # name | name . overload | ns : : name | ns : : name . overload  (tokens, as the grammar gives them)
        has_ns = len(c) >= 4
        namespace = c[0].value if has_ns else ""
        name = c[3 if has_ns else 0].value
        overload = ""
        if len(c) in (3, 6):
            tok = c[-1]
            overload = tok.value
            if overload == "default":
                raise Refused("the overload name 'default' is reserved", tok.start_pos)
            if overload[:2] == "__":
                raise Refused(f"an overload name cannot start with '__' (got '{overload}')", tok.start_pos)
        return OperatorName(namespace, name, overload), c[0].start_pos

    def name(self, c: _Kids) -> Token:
        tok: Token = c[0]
        return tok

    # --- parameters -----------------------------------------------------------------------------------------
    def params(self, c: _Kids) -> _Params:
        arguments: list[Argument] = []
        kwarg_only = vararg = seen_default = False
        for item in c:
            if item.__class__ is Token:  # COMMA
                continue
            tag = item[0]
            if vararg:
                raise Refused("'...' must be the last parameter", item[1] if tag != "arg" else item[4])
            if tag != "arg":
                if tag == "*":
                    kwarg_only = True
                else:  # "..."
                    vararg = True
                continue
            _, type_, name_tok, default, start, end = item
            if default is not None:
                seen_default = True
            elif seen_default and not kwarg_only and not isinstance(type_, ListType):
                # torch: INTERNAL ASSERT "Non-default positional argument follows default argument"
                raise Refused(
                    f"argument '{name_tok.value}' has no default but follows an argument with one "
                    "(move it before them, or after '*')",
                    start,
                )
            arguments.append(Argument(name_tok.value, type_, default, kwarg_only, (start, end), (name_tok.start_pos, name_tok.end_pos)))
        if vararg:
            for argument in arguments:
                if argument.default is not None:
                    raise Refused("a schema with '...' cannot have default values", argument.default.span[0])
        return tuple(arguments), vararg

    def kwarg_marker(self, c: _Kids) -> tuple[str, int]:
        return ("*", c[0].start_pos)

    def vararg_marker(self, c: _Kids) -> tuple[str, int]:
        return ("...", c[0].start_pos)

    def argument(self, c: _Kids) -> _Arg:
        (type_, start, end), name_tok = c[0], c[1]
        _check_stable(type_, start)
        default = None
        end = name_tok.end_pos
        if len(c) > 2:
            raw = c[3]
            default = _default_for(type_, raw)
            end = raw[3]
        return ("arg", type_, name_tok, default, start, end)

    def arg_type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    def sized_arg_type(self, c: _Kids) -> _Spanned:
        (elem, start, _), number, rsqb = c[0], c[2], c[3]
        _check_stable(elem, start)
        alias, end = _alias_end(c, 4, rsqb.end_pos)
        optional = isinstance(c[-1], Token) and c[-1].type == "QMARK"
        if optional:
            end = c[-1].end_pos
        size = _stoll(number.value, number.start_pos)
        # torch keeps N in an int32: larger values wrap around (kept, as torch does) -- unless they wrap to a
        # negative size, which torch prints as text it cannot read back.
        size = (size + 2**31) % 2**32 - 2**31
        if size < 0:
            raise Refused(f"list size {_short(number.value)} does not fit a 32-bit int", number.start_pos)
        _check_depth(elem._depth + 1 + optional, start)
        t: Type = ListType(elem, size, alias, number.value, (number.start_pos, number.end_pos))
        return (OptionalType(t) if optional else t), start, end

    # --- returns --------------------------------------------------------------------------------------------
    def varret(self, c: _Kids) -> _Returns:
        return (), True

    def no_returns(self, c: _Kids) -> _Returns:
        return (), False

    def return_list(self, c: _Kids) -> _Returns:
        returns: _Returns = c[1]
        return returns

    def single_return(self, c: _Kids) -> _Returns:
        return (c[0],), False

    def return_items(self, c: _Kids) -> _Returns:
        returns: list[Return] = []
        varret = False
        for item in c:
            if isinstance(item, Token):
                continue
            if varret:
                raise Refused("'...' must be the last return", item.span[0] if isinstance(item, Return) else item[1])
            if isinstance(item, Return):
                returns.append(item)
            else:
                varret = True
        return tuple(returns), varret

    def varret_marker(self, c: _Kids) -> tuple[str, int]:
        return ("...", c[0].start_pos)

    def return_(self, c: _Kids) -> Return:
        type_, start, end = c[0]
        _check_stable(type_, start)
        if len(c) > 1:
            return Return(type_, c[1].value, (start, c[1].end_pos))
        return Return(type_, None, (start, end))

    # The same as return_, written out rather than aliased (`bare_return = return_`): mypyc compiles this class
    # (make accel) and drops method aliases assigned in a class body; a call to return_ would cost a frame a schema.
    def bare_return(self, c: _Kids) -> Return:
        type_, start, end = c[0]
        _check_stable(type_, start)
        if len(c) > 1:
            return Return(type_, c[1].value, (start, c[1].end_pos))
        return Return(type_, None, (start, end))

    def bare_arg_type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    # --- types ----------------------------------------------------------------------------------------------
    def type(self, c: _Kids) -> _Spanned:
        t: _Spanned = c[0]
        return t

    def bare_type(self, c: _Kids) -> _Spanned:  # as type, and not an alias of it (see bare_return)
        t: _Spanned = c[0]
        return t

    def list_type(self, c: _Kids) -> _Spanned:
        elem, start, _ = c[0]
        _check_stable(elem, start)
        alias, end = _alias_end(c, 3, c[2].end_pos)
        _check_depth(elem._depth + 1, start)
        return ListType(elem, None, alias), start, end

    def optional_type(self, c: _Kids) -> _Spanned:
        elem, start, _ = c[0]
        return _optional(elem, start), start, c[1].end_pos

    def tuple_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        elems = tuple(_member(_kept(x)) for x in c if isinstance(x, tuple))
        _check_depth(1 + max((e._depth for e in elems), default=0), start)
        return TupleType(elems), start, c[-1].end_pos

    def tensor_type(self, c: _Kids) -> _Spanned:
        if len(c) == 1:
            return _PLAIN_BASE["Tensor"], c[0].start_pos, c[0].end_pos
        alias, end = c[1]
        return BaseType("Tensor", alias), c[0].start_pos, end

    def dict_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        key, value = _member(c[2][0]), _member(_kept(c[4]))
        if not (isinstance(key, BaseType) and key.name in _DICT_KEYS):
            raise Refused(
                f"a Dict key type must be one of {', '.join(sorted(_DICT_KEYS))}; got '{key}'", c[2][1]
            )
        _check_depth(1 + max(key._depth, value._depth), start)
        alias, end = _alias_end(c, 6, c[5].end_pos)
        return DictType(key, value, alias), start, end

    def union_type(self, c: _Kids) -> _Spanned:
        start = c[0].start_pos
        members = [_member(x[0]) for x in c if isinstance(x, tuple) and len(x) == 3]
        _check_depth(1 + max(m._depth for m in members), start)
        result = _union(members, start)
        last = c[-1]
        alias, end = (last[0], last[1]) if isinstance(last, tuple) and len(last) == 2 else (None, last.end_pos)
        if alias is not None:
            if isinstance(result, UnionType):
                result = UnionType(result.members, alias, result.absorbed, result.unstable)
            else:  # Union(T, None) became T?: the annotation belongs to T and prints before the "?"
                result = OptionalType(_with_alias(result.elem, alias, start), result.absorbed)  # type: ignore[attr-defined]  # _union made T? of it
        return result, start, end

    def future_type(self, c: _Kids) -> _Spanned:
        return self._single(FutureType, c)

    def await_type(self, c: _Kids) -> _Spanned:
        return self._single(AwaitType, c)

    def rref_type(self, c: _Kids) -> _Spanned:
        return self._single(RRefType, c)

    @staticmethod
    def _single(cls: Callable[[Type], Type], c: _Kids) -> _Spanned:
        start = c[0].start_pos
        elem = _member(_kept(c[2]))
        _check_depth(elem._depth + 1, start)
        return cls(elem), start, c[3].end_pos

    def class_type(self, c: _Kids) -> _Spanned:
        torch_tok, classes_tok = c[2], c[4]
        for tok, word in ((torch_tok, "torch"), (classes_tok, "classes")):
            if tok.value != word:
                raise Refused(
                    f"expected '{word}' in a custom class type __torch__.torch.classes.<namespace>.<name>, "
                    f"got '{tok.value}'",
                    tok.start_pos,
                )
        start, end = c[0].start_pos, c[8].end_pos
        return ClassType(c[6].value, c[8].value, (start, end)), start, end

    def named_type(self, c: _Kids) -> _Spanned:
        parts = c[0]
        first, last = parts[0], parts[-1]
        alias, end = _alias_end(c, 1, last.end_pos)
        text = first.value if len(parts) == 1 else "".join(p.value for p in parts)
        canonical = _BASE_TYPES.get(text)
        if canonical is not None:
            return (_PLAIN_BASE[canonical] if alias is None else BaseType(canonical, alias)), first.start_pos, end
        if first.value[0].islower():
            return TypeVar(text, alias, (first.start_pos, last.end_pos)), first.start_pos, end
        raise Refused(
            f"unknown type '{text}' (a type variable must start with a lower-case letter)", first.start_pos
        )

    def base_name(self, c: _Kids) -> list[Token]:
        return c

    # --- alias annotations ----------------------------------------------------------------------------------
    def alias(self, c: _Kids) -> tuple[AliasInfo, int]:
        sets = [x for x in c if isinstance(x, list)]
        before = tuple(sets[0])
        after = tuple(sets[1]) if len(sets) > 1 else before
        is_write = any(isinstance(x, Token) and x.type == "BANG" for x in c)
        return AliasInfo(before, after, is_write), c[-1].end_pos

    def fresh_alias(self, c: _Kids) -> tuple[AliasInfo, int]:
        return _FRESH, c[0].end_pos

    def alias_set(self, c: _Kids) -> list[str]:
        # dict.fromkeys: the names in written order without duplicates, in linear time
        return list(dict.fromkeys(tok.value for tok in c if tok.type != "BAR"))

    # --- defaults -------------------------------------------------------------------------------------------
    def list_default(self, c: _Kids) -> _Raw:
        items = [x for x in c if isinstance(x, tuple)]
        return ("list", items, c[0].start_pos, c[-1].end_pos)

    def true_const(self, c: _Kids) -> _Raw:
        return ("true", c[0], c[0].start_pos, c[0].end_pos)

    def false_const(self, c: _Kids) -> _Raw:
        return ("false", c[0], c[0].start_pos, c[0].end_pos)

    def none_const(self, c: _Kids) -> _Raw:
        return ("none", c[0], c[0].start_pos, c[0].end_pos)

    def string_const(self, c: _Kids) -> _Raw:
        return ("string", c[0], c[0].start_pos, c[0].end_pos)

    def ident_const(self, c: _Kids) -> _Raw:
        return ("ident", c[0], c[0].start_pos, c[0].end_pos)

    def number_const(self, c: _Kids) -> _Raw:
        minus = c[0] if len(c) == 2 else None
        return ("number", (minus, c[-1]), c[0].start_pos, c[-1].end_pos)


def _schema(name: OperatorName, params: _Params, returns: tuple[Return, ...], varret: bool) -> FunctionSchema:
    arguments, vararg = params
    if _any_fresh(arguments) or _any_fresh(returns):
        counter = [0]
        arguments = tuple(
            Argument(a.name, _renumber(a.type, counter), a.default, a.kwarg_only, a.span, a.name_span) for a in arguments
        )
        returns = tuple(Return(_renumber(r.type, counter), r.name, r.span) for r in returns)
    return FunctionSchema(name, arguments, tuple(returns), vararg, varret)


def _params_of(child: _Params | Token) -> _Params:
    # `params?` is absent for "()": the child in its place is then the RPAR token.
    return child if isinstance(child, tuple) else ((), False)


class ParseResult:
    """What the grammar recognised: ``kind`` is "schema", "name" (a bare operator name), "nameless" or
    "wrapped"; ``value`` a FunctionSchema or an OperatorName; ``pos`` where the name starts."""

    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind: str, value: FunctionSchema | OperatorName, pos: int) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos


# ---------------------------------------------------------------------------------------------------------------
# Newlines


# Note [line widths]
# ~~~~~~~~~~~~~~~~~~
# torch's lexer (lexer.h) reads the blanks that start a line outside brackets as a whitespace token of their width,
# but only right after a newline or at the start of the text, and a "\\" line continuation ends that state. The
# first such width is the text's indentation; every later one is a newline token if equal to it, an indent if
# wider, an error if narrower, and the whitespace before the end of the text is one more newline. Blank and comment
# lines add nothing, so a text that ends in newlines is fine, but a continuation line after a newline is measured:
# "f() -> t\n\\\n" is fine (one newline at the end, which the parser takes), " f() -> t\n\\\n" (indented text, then
# a line of width 0) and "f() -> t\n\\\n\n" (two newlines) are errors. The fuzzer found the last two forms.
class _Newlines:
    """Postlexer: torch's lexer turns the whitespace that starts a line outside brackets into tokens by its width
    (Note [line widths]); this yields the tokens it would, of which the parser accepts only one newline at the
    end. The lexer gives ``NEWLINE``, ``INDENT`` (a newline and the blanks before a ``\\``) and
    ``LINE_CONTINUATION``; blanks and comments are ignored, so a line's width is read from positions."""

    always_accept = ("NEWLINE", "INDENT", "LINE_CONTINUATION")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        line = 0  # where the current line starts
        at_line_start = True  # torch's whitespace_token: the next token or "\\" measures the line
        first: int | None = None  # the first line's width, against which torch measures every other
        pending = None  # a newline of width `first`: torch's parser accepts one, at the very end
        for tok in stream:
            kind = tok.type
            if kind == "NEWLINE" or kind == "INDENT":
                if depth == 0:  # inside brackets torch measures nothing
                    line, at_line_start = tok.start_pos + 1, True
                continue
            if at_line_start:
                at_line_start = False
                width = tok.start_pos - line
                if first is None:
                    first = width
                else:
                    if pending is not None:
                        yield pending
                    pending = Token("NEWLINE" if width == first else "INDENT", "\n", line - 1, line)
                    if width != first:
                        yield pending
                        pending = None
            if kind == "LINE_CONTINUATION":  # after the line was measured, torch skips it
                continue
            if pending is not None:
                yield pending
                pending = None
            if kind == "LPAR" or kind == "LSQB":
                depth += 1
            elif (kind == "RPAR" or kind == "RSQB") and depth:
                depth -= 1
            yield tok
        if at_line_start and pending is not None:  # torch's final whitespace is one more newline of width `first`
            yield pending


# ---------------------------------------------------------------------------------------------------------------
# Parsers (built once, lazily) and error translation

_lock = threading.Lock()
_engines: dict[bool, Engine] = {}


def _engine(multiline: bool) -> Engine:
    """The engine for one-line or multi-line text (the latter drops the newlines torch ignores)."""
    engine = _engines.get(multiline)
    if engine is None:
        with _lock:
            engine = _engines.get(multiline)
            if engine is None:
                engine = Engine(load("schema"), _ToAst(), _Newlines() if multiline else None)
                _engines[multiline] = engine
    return engine


def parse(text: str) -> ParseResult:
    """Parse ``text`` with the schema grammar. Raises SchemaError (only) on malformed input."""
    engine = _engine("\n" in text)
    try:
        result: ParseResult = engine.parse(text)  # the start rule's value (_ToAst.start)
        return result
    except Refused as e:
        raise SchemaError(e.msg, text, e.pos, e.expected) from None
    except Failure as e:
        raise _translate(e, engine, text) from None
