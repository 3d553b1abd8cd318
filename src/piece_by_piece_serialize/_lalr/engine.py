"""A table-driven LALR(1) engine for the parse tables that lark computes from ``grammars/*.lark``.

Lark is the parser generator: from each grammar it derives the lexer terminals (in lark's matching order) and the
LALR(1) action and goto tables. :mod:`.build` exports those tables as plain Python data (the generated modules
in ``_generated/``, checked against the grammar files by ``tests/lalr/test_tables.py`` and by a SHA-256 stamp at load
time), and this module runs them. It is not a parser of either language: every decision it takes is a table
look-up, so the grammar stays the single definition of what is accepted. It exists because lark's general run
time spends most of a parse on bookkeeping these grammars never need (line counting, token subclassing of
``str``, per-token exception frames); the result is the same tokens, the same reductions in the same order and
the same callbacks, several times faster, and ``import lark`` is not needed to parse.

Semantics reproduced from lark (``lexer="basic"`` or ``"contextual"``, ``maybe_placeholders=False``, an embedded
transformer): terminals are tried in lark's order and the first that matches wins; a regex terminal that matches
a keyword exactly becomes the keyword's terminal; ignored terminals are skipped; a contextual lexer tries only the
terminals the current state accepts and, when none matches, the whole set (a token the state does not accept is
then a syntax error on that token). Tokens whose terminal is filtered out (``_NAME`` or anonymous) are dropped
from a rule's children; ``_rule`` children are spliced into their parent; a ``?rule`` with one child left is
replaced by that child; every other rule calls the transformer method named after its alias or its name.

Two shortcuts change how fast, never what: the lexer tries only the terminals that can start with the next one
or two characters, from a dispatch table generated with the tables (Note [first-character dispatch] in
:mod:`.build`), and a chain of reductions of one-symbol ``?rule``s, which only changes the top state, is one
table look-up (Note [folded unit reductions]).

Invariants: the engine keeps no per-parse state on itself (re-entrant, thread-safe after construction); work is
linear in the input (every step shifts a token or reduces a rule, and reductions are bounded by shifts); nothing
recurses; bad input raises :class:`Failure`, holding everything an error message needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable

__all__ = ["Token", "Failure", "Engine"]


class Token:
    """One lexed token: its terminal name, its text and its span in the input."""

    __slots__ = ("type", "value", "start_pos", "end_pos")

    # The defaults let ``Token.__new__(Token)`` work when this class is compiled (mypyc's ``__new__`` runs
    # ``__init__``), which the parse loop uses to make tokens without a Python-level call of ``__init__``.
    def __init__(self, type: str = "", value: str = "", start_pos: int = 0, end_pos: int = 0) -> None:
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.end_pos = end_pos

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, {self.start_pos})"


class Failure(Exception):
    """The input is not in the language. Raised by :meth:`Engine.parse`; the language module words the message.

    ``token`` is the unexpected token (type ``"$END"`` at the end of the input), or None when no terminal matches
    at ``pos`` (an unexpected character). ``states`` and ``values`` are the parser's stacks at that point:
    :meth:`Engine.accepts` reads the first, messages may describe the top of the second. ``expected`` is what
    lark reports as expected: the terminals of the state's table for a token the parser cannot take, the
    terminals the lexer tried when it found none (or a token the contextual lexer does not accept there).
    """

    def __init__(self, pos: int, token: Token | None, states: list[int], values: list[Any], expected: Iterable[str]) -> None:
        super().__init__(pos)
        self.pos = pos
        self.token = token
        self.states = states
        self.values = values
        self.expected = frozenset(expected)


class _Mismatch(Exception):
    """Raised by the lexer: no terminal matches at ``pos``, or (contextual) the match is not accepted here."""

    def __init__(self, pos: int, token: Token | None, allowed: Collection[str]) -> None:
        super().__init__(pos)
        self.pos = pos
        self.token = token
        self.allowed = allowed


_END = "$END"


class _Scanner:
    """One compiled alternation of terminals, in lark's order, and the keywords its regex terminals absorb.

    ``first`` is the generated dispatch on the next characters of the text (Note [first-character dispatch] in
    _lalr_build): it maps an ASCII character to an entry, or to a :class:`_Second` mapping the character after
    it to an entry. An entry is a literal ``(kind, text, len(text))``, the only terminal that can match there
    (it does); or the alternation of the only terminals that can, in the same order: its ``match``, or a
    :class:`_Keyed` when some of them absorb keywords. Characters it does not map are matched by ``full``, the
    whole alternation (with all the keywords)."""

    __slots__ = ("match", "names", "keywords", "first", "full")
    match: _Match
    names: frozenset[str]
    keywords: dict[str, dict[str, str]]
    first: dict[str, _Entry | _Second]
    full: _Match | _Keyed

    def __init__(self, spec: tuple[Any, ...], tables: dict[str, Any], made_entries: dict[Any, Any]) -> None:
        terminals, keywords, dispatch = spec
        literals, ignore = tables["literals"], tables["ignore"]
        regexps = dict(terminals)
        if terminals:
            self.match = re.compile("|".join([f"(?P<{name}>{regexp})" for name, regexp in terminals])).match
        else:  # a state that only accepts the end of the input (an empty pattern would match everywhere)
            self.match = lambda text, pos: None
        self.names = frozenset([name for name, _ in terminals])  # as lark reports them: keywords are not listed
        self.keywords = keywords
        self.full = _Keyed(self.match, keywords) if keywords else self.match

        # (written without helper functions: an engine is built once per process, often inside code that
        # counts Python calls)
        first: dict[str, Any] = {}
        for chars, entry in dispatch:
            seconds = entry.items() if entry.__class__ is dict else (("", entry),)
            made: dict[str, _Entry] = {}
            for chars2, spec2 in seconds:
                hit: _Entry = None
                if spec2 is not None:
                    if spec2.__class__ is str and spec2 not in ignore:  # a literal (ignored ones take the regex)
                        hit = (spec2, literals[spec2], len(literals[spec2]))
                    else:
                        names = (spec2,) if spec2.__class__ is str else spec2
                        absorbing = {}
                        if keywords:
                            for name in names:
                                if name in keywords:
                                    absorbing[name] = keywords[name]
                        key = (names, tuple(sorted(absorbing)))
                        hit = made_entries.get(key)
                        if hit is None:
                            alternation = "|".join([f"(?P<{name}>{regexps[name]})" for name in names])
                            hit = re.compile(alternation).match
                            if absorbing:
                                hit = _Keyed(hit, absorbing)
                            made_entries[key] = hit
                made[chars2] = hit
            if entry.__class__ is dict:
                second = _Second({c2: hit for chars2, hit in made.items() if chars2 for c2 in chars2})
                second.default = made[""]
                first.update(dict.fromkeys(chars, second))
            else:
                first.update(dict.fromkeys(chars, made[""]))
        self.first = first


class _Second(dict[str, "_Entry"]):
    """The entries of a first character by the character after it; any other (or none) gets ``default``."""

    __slots__ = ("default",)
    default: _Entry

    def __missing__(self, key: str) -> _Entry:
        return self.default


class _Keyed:
    """An alternation whose terminals absorb keywords: ``keywords[terminal][text]`` is the keyword's terminal."""

    __slots__ = ("match", "keywords")

    def __init__(self, match: _Match, keywords: dict[str, dict[str, str]]) -> None:
        self.match = match
        self.keywords = keywords


if TYPE_CHECKING:
    # a compiled alternation's ``match`` (or the stand-in of a scanner with no terminals)
    _Match = Callable[[str, int], "re.Match[str] | None"]
    # a dispatch entry (see _Scanner): a literal (kind, text, len(text)), an alternation, or None (use ``full``)
    _Entry = tuple[str, str, int] | _Match | _Keyed | None
    # a rule's callback: its children (as popped from the value stack) to its value
    _Build = Callable[[list[Any]], Any]
    # a bound rule: (size, origin, build), build None for a pass-through ?rule over one symbol
    _Rule = tuple[int, str, _Build | None]


class _PostLex(Protocol):
    """What ``postlex`` must have. A class at module level, not under TYPE_CHECKING: mypyc compiles no class
    defined inside a block (typing is imported here anyway)."""

    def process(self, stream: Iterator[Token]) -> Iterator[Token]: ...


class Engine:
    """Runs one grammar's generated tables with ``callbacks`` (an object with a method per rule, as lark's
    ``transformer=`` option takes) and an optional ``postlex`` (an object whose ``process`` filters the token
    stream, as lark's ``postlex=`` option; basic lexer only)."""

    def __init__(self, tables: dict[str, Any], callbacks: object, postlex: _PostLex | None = None) -> None:
        self.actions: tuple[dict[str, int], ...] = tables["actions"]
        self.gotos: tuple[dict[str, int], ...] = tables["gotos"]
        self.start_state: int = tables["start_state"]
        self.end_state: int = tables["end_state"]
        self.ignore: frozenset[str] = frozenset(tables["ignore"])
        made_entries: dict[Any, Any] = {}  # dispatch entries, shared by the scanners
        scanners = [_Scanner(spec, tables, made_entries) for spec in tables["scanners"]]
        self.scanner_of_state: tuple[_Scanner, ...] = tuple([scanners[i] for i in tables["scanner_of_state"]])
        # Typed loosely on purpose: the parse loop tells the kinds of entry apart by their class, and a precise
        # union would make mypyc check each one against it
        self.first_of_state: tuple[dict[str, Any], ...] = tuple([scanner.first for scanner in self.scanner_of_state])
        self.full_of_state: tuple[Any, ...] = tuple([scanner.full for scanner in self.scanner_of_state])
        self.root_scanner = scanners[tables["root_scanner"]]
        if postlex is not None and len(scanners) != 1:
            raise ValueError("a postlexer needs the basic lexer")
        self.postlex = postlex
        self.rules = tuple([_bind(rule, callbacks) for rule in tables["rules"]])
        self.steps = _steps(self.actions, self.gotos, self.rules, self.end_state)

    # --- lexing ---------------------------------------------------------------------------------------------
    def _tokens(self, text: str, states: list[int]) -> Iterator[Token]:
        """Tokens of ``text``, lexed lazily: the scanner for the next token is the one of the state on top of
        ``states`` when it is asked for (as lark's contextual lexer does). :meth:`parse` runs the same lexer
        inline when there is no postlexer."""
        pos, end, ignore = 0, len(text), self.ignore
        hit: Any  # a dispatch entry (see _Scanner), told apart by its class
        while pos < end:
            state = states[-1]
            hit = self.first_of_state[state].get(text[pos])
            cls = hit.__class__
            if cls is _Second:
                hit = hit[text[pos + 1 : pos + 2]]
                cls = hit.__class__
            if cls is tuple:  # a literal, known to match here
                kind, value, stop = hit
                stop += pos
            else:
                if hit is None:
                    hit = self.full_of_state[state]
                    cls = hit.__class__
                m = (hit.match if cls is _Keyed else hit)(text, pos)
                if m is None:
                    self._mismatch(text, pos, self.scanner_of_state[state])
                kind = m.lastgroup
                value = m.group()
                if cls is _Keyed:
                    keywords = hit.keywords.get(kind)
                    if keywords is not None:
                        kind = keywords.get(value, kind)
                stop = m.end()
                if kind in ignore:
                    pos = stop
                    continue
            yield Token(kind, value, pos, stop)
            pos = stop

    def _mismatch(self, text: str, pos: int, scanner: _Scanner) -> None:
        allowed = scanner.names - self.ignore or {"<END-OF-FILE>"}
        root = self.root_scanner
        if scanner is not root:
            m = root.match(text, pos)
            if m is not None:
                kind, value = m.lastgroup, m.group()
                kind = root.keywords.get(kind, {}).get(value, kind)
                raise _Mismatch(pos, Token(kind, value, pos, m.end()), allowed)
        raise _Mismatch(pos, None, allowed)

    # --- parsing --------------------------------------------------------------------------------------------
    def parse(self, text: str) -> Any:
        """The start rule's value for ``text``; :class:`Failure` outside the language (callbacks' exceptions pass)."""
        if self.postlex is not None:
            return self._parse_stream(text)
        # _tokens' lexer and _parse_stream's parser in one loop over the text; the top state is also kept in `state`
        steps, gotos, firsts, ignore = self.steps, self.gotos, self.first_of_state, self.ignore
        new_token = Token.__new__  # object.__new__ itself for the pure engine (see Token)
        state = self.start_state
        states: list[int] = [state]
        values: list[Any] = []
        push_state, push_value = states.append, values.append
        pos, length = 0, len(text)
        # (for mypyc, which then keeps these unboxed or calls dict and str operations directly; free when interpreted)
        hit: Any  # a dispatch entry (see _Scanner), told apart by its class
        kind: str
        value: str
        stop: int
        neg: int
        origin: str
        try:
            while pos < length:
                # --- the next token ---
                hit = firsts[state].get(text[pos])
                cls = hit.__class__
                if cls is _Second:
                    hit = hit[text[pos + 1 : pos + 2]]
                    cls = hit.__class__
                if cls is tuple:  # a literal, known to match here
                    kind, value, stop = hit
                    stop += pos
                else:
                    if hit is None:
                        hit = self.full_of_state[state]
                        cls = hit.__class__
                    m = hit.match(text, pos) if cls is _Keyed else hit(text, pos)
                    if m is None:
                        self._mismatch(text, pos, self.scanner_of_state[state])
                    kind = m.lastgroup
                    value = m.group()
                    if cls is _Keyed:  # a regex terminal that matches a keyword exactly is the keyword's
                        keywords = hit.keywords.get(kind)
                        if keywords is not None:
                            kind = keywords.get(value, kind)
                    stop = m.end()
                    if kind in ignore:
                        pos = stop
                        continue
                token = new_token(Token)  # Token(kind, value, pos, stop), without the call of __init__
                token.type = kind
                token.value = value
                token.start_pos = pos
                token.end_pos = pos = stop
                # --- the parser: reduce, then shift the token ---
                while True:
                    try:
                        step = steps[state][kind]
                    except KeyError:
                        raise Failure(token.start_pos, token, states, values, self.actions[state]) from None
                    if step.__class__ is int:  # shift
                        push_state(state := step)
                        push_value(token)
                        break
                    if step.__class__ is dict:  # unit reductions: only the top state changes (Note [folded unit reductions])
                        states[-1] = state = step[states[-2]]
                    else:
                        neg, origin, build = step  # minus the rule's length
                        if neg:
                            children = values[neg:]
                            del values[neg:]
                            del states[neg:]
                            push_value(build(children))
                        else:
                            push_value(build([]))
                        push_state(state := gotos[states[-1]][origin])
            return self._finish(text, state, states, values)  # the end of the input
        except _Mismatch as e:  # e.token: a terminal this state's lexer does not try
            raise Failure(e.pos, e.token, states, values, e.allowed) from None

    def _finish(self, text: str, state: int, states: list[int], values: list[Any]) -> Any:
        """The end of the input for :meth:`parse`: reduce until the end state, and return the start rule's value
        (one call a parse: the per-token loop stays inline in :meth:`parse`)."""
        steps, gotos = self.steps, self.gotos
        push_state, push_value = states.append, values.append
        length = len(text)
        neg: int
        origin: str
        token = Token(_END, "", length, length)
        end_state = self.end_state
        while True:
            try:
                step = steps[state][_END]
            except KeyError:
                raise Failure(length, token, states, values, self.actions[state]) from None
            if step.__class__ is int:  # pragma: no cover - the end is never shifted (see _parse_stream)
                raise Failure(length, token, states, values, self.actions[state])
            if step.__class__ is dict:
                state = step[states[-2]]
                states[-1] = state
            else:
                neg, origin, build = step
                if neg:
                    children = values[neg:]
                    del values[neg:]
                    del states[neg:]
                    push_value(build(children))
                else:
                    push_value(build([]))
                state = gotos[states[-1]][origin]
                push_state(state)
            if state == end_state:
                return values[-1]

    def _parse_stream(self, text: str) -> Any:
        """:meth:`parse` through the postlexer: tokens from :meth:`_tokens`, filtered by ``postlex.process``."""
        actions, gotos, rules = self.actions, self.gotos, self.rules
        states: list[int] = [self.start_state]
        values: list[Any] = []
        tokens = self.postlex.process(self._tokens(text, states))  # type: ignore[union-attr]  # parse() comes here only with a postlexer
        end = Token(_END, "", len(text), len(text))
        end_state = self.end_state
        token: Token | None = None
        try:
            for token in chain(tokens, (end,)):
                kind = token.type
                while True:
                    try:
                        action = actions[states[-1]][kind]
                    except KeyError:
                        raise Failure(token.start_pos, token, states, values, actions[states[-1]]) from None
                    if action >= 0:  # shift (never the end: the loop returns when the end state is reached)
                        states.append(action)
                        values.append(token)
                        break
                    size, origin, build = rules[~action]
                    if build is None:  # a ?rule over one symbol: the value stays, only the state changes
                        states[-1] = gotos[states[-2]][origin]
                    else:
                        if size:
                            children = values[-size:]
                            del values[-size:]
                            del states[-size:]
                            values.append(build(children))
                        else:
                            values.append(build([]))
                        states.append(gotos[states[-1]][origin])
                    if kind is _END and states[-1] == end_state:
                        return values[-1]
        except _Mismatch as e:  # e.token: a terminal this state's lexer does not try
            raise Failure(e.pos, e.token, states, values, e.allowed) from None
        raise Failure(len(text), end, states, values, actions[states[-1]])  # pragma: no cover - see "shift"

    def accepts(self, states: Sequence[int]) -> frozenset[str]:
        """The terminals the parser in ``states`` would shift next, after whatever reductions they need (LALR
        tables list look-aheads that a merged state cannot really take; this simulates the reductions on a copy
        of the state stack, running no callbacks)."""
        accepted: set[str] = set()
        for kind in self.actions[states[-1]]:
            stack = list(states)
            while True:
                action = self.actions[stack[-1]].get(kind)
                if action is None:
                    break
                if action >= 0:
                    accepted.add(kind)
                    break
                size, origin, _ = self.rules[~action]
                if size:
                    del stack[-size:]
                stack.append(self.gotos[stack[-1]][origin])
                if kind == _END and stack[-1] == self.end_state:
                    accepted.add(kind)
                    break
        return frozenset(accepted)


# Note [folded unit reductions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Half of the reductions of a schema are of a ?rule over one symbol (name: IDENT, type: primary, ...): the value
# stays on the stack and only the top state changes, to gotos[below][origin], where `below` is the state under
# it. The next action, for the same look-ahead, is often such a reduction again, with the same `below`. So the
# whole chain is a function of (top, look-ahead, below), computed once: `steps` holds, in place of a unit
# reduction, a dict from `below` to the top state at the end of the chain (stopping at the end state, at a
# shift, at a reduction that builds a value, or where the look-ahead has no action, whose KeyError is then
# raised in that state, as without folding). A reduction that builds a value is held as its (size, origin,
# build) triple (the size negated, to slice the stacks with), a shift as the target state.


def _steps(actions: Sequence[dict[str, int]], gotos: Sequence[dict[str, int]], rules: Sequence[Any],
           end_state: int) -> tuple[dict[str, Any], ...]:
    """The actions of each state as :meth:`Engine.parse` runs them (Note [folded unit reductions]). Written
    without helper functions (see _Scanner)."""
    # the origin of each unit reduction (a ?rule over one symbol: no value built), by action
    unit = {~i: origin for i, (_, origin, build) in enumerate(rules) if build is None}
    steps = []
    for row in actions:
        step: dict[str, Any] = {}
        for kind, action in row.items():
            if action >= 0:
                step[kind] = action
                continue
            origin = unit.get(action)
            if origin is None:
                size, origin, build = rules[~action]
                step[kind] = (-size, origin, build)
                continue
            chain = {}
            for below, goes in enumerate(gotos):
                if origin not in goes:
                    continue
                top = goes[origin]
                while not (kind == _END and top == end_state):
                    current = unit.get(actions[top].get(kind, 0))
                    if current is None or current not in goes:
                        break
                    top = goes[current]
                chain[below] = top
            step[kind] = chain
        steps.append(step)
    return tuple(steps)


def _bind(rule: tuple[str, int, str, bool, tuple[tuple[int, bool], ...] | None, bool], callbacks: object) -> _Rule:
    """(size, origin, build) for one rule of the tables: ``build`` maps the rule's children (as popped from the
    value stack) to its value, or is None for a pass-through ``?rule`` over one symbol."""
    origin, size, name, expand1, keep, inline = rule
    if expand1 and size == 1 and keep is None:
        return size, origin, None
    method: _Build | None
    if inline:  # a _rule: its value is its filtered children, spliced into the parent
        method = None
    else:
        method = getattr(callbacks, name, None)
        if method is None:
            raise TypeError(f"{type(callbacks).__name__} has no method for grammar rule {name!r}")
        if keep is None and not expand1:  # the common case: the children as they are
            return size, origin, method

    # The shapes of `keep` the grammars use, each with a build that does only its own work (the generic one
    # below handles every shape).
    if keep is not None and not expand1:
        special = _shaped_build(keep, inline, method)
        if special is not None:
            return size, origin, special
    if inline and keep is None:  # the first item of a `_items` list: the list is the children as they are
        return size, origin, list
    return size, origin, _general_build(keep, method, expand1)


def _shaped_build(keep: tuple[tuple[int, bool], ...], inline: bool, method: _Build | None) -> _Build | None:
    """The build of one of the ``keep`` shapes the grammars use, or None for the others."""
    plain = [i for i, splice in keep if not splice]
    spliced = [i for i, splice in keep if splice]
    if inline and keep[0] == (0, True) and spliced == [0] and len(plain) in (1, 2):
        # the left-recursive `_items: _items SEP item` (or `_items item`): extend the list in place
        if len(plain) == 1:
            last = plain[0]

            def extend_one(children: list[Any]) -> Any:
                kept = children[0]
                kept.append(children[last])
                return kept

            return extend_one
        else:
            first_kept, last = plain

            def extend_two(children: list[Any]) -> Any:
                kept = children[0]
                kept.append(children[first_kept])
                kept.append(children[last])
                return kept

            return extend_two
    if not inline and not spliced:  # filtered tokens dropped
        assert method is not None  # (not inline)
        if len(plain) == 1:
            only = plain[0]

            def call_one(children: list[Any]) -> Any:
                return method([children[only]])

            return call_one
        else:
            pick = itemgetter(*plain)

            def call_picked(children: list[Any]) -> Any:
                return method(list(pick(children)))

            return call_picked
    if not inline and spliced == [keep[-1][0]] and plain == [0]:  # `rule: item _items`
        assert method is not None  # (not inline)
        tail = spliced[0]

        def call_spliced(children: list[Any]) -> Any:
            kept = [children[0]]
            kept += children[tail]
            return method(kept)

        return call_spliced
    return None


def _general_build(keep: tuple[tuple[int, bool], ...] | None, method: _Build | None, expand1: bool) -> _Build:
    """The build for any rule: ``keep`` applied to the children, then the callback (none for a ``_rule``)."""

    def build(children: list[Any]) -> Any:  # the general case, after the special ones above
        if keep is not None:
            # A spliced _rule's list is used by nothing else: the first one is extended in place, so that a
            # left-recursive rule costs one append per item, not a copy of the items so far.
            kept: list[Any] | None = None
            for index, splice in keep:
                if splice:
                    if kept is None:
                        kept = children[index]
                    else:
                        kept.extend(children[index])
                elif kept is None:
                    kept = [children[index]]
                else:
                    kept.append(children[index])
            children = kept if kept is not None else []
        if method is None:
            return children
        if expand1 and len(children) == 1:
            return children[0]
        return method(children)

    return build
