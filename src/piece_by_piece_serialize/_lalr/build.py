"""Export the LALR tables lark computes for a grammar as plain Python data, for :mod:`.engine` to run.

``python -m piece_by_piece_serialize._lalr.build`` (``make tables``) rewrites the modules in ``_generated/`` from the
grammar files; ``tests/lalr/test_tables.py`` fails when one of them is stale, and :func:`.tables.load` rebuilds the tables in
memory (with lark) when a grammar file no longer matches the SHA-256 stamp of its module, so an edited grammar is
never run with old tables. The export is canonical: states are numbered breadth-first from the start state,
following symbols in sorted order, and rules in lark's order, so a grammar always gives the same text.

What is exported, for each grammar and lexer kind:
- the scanners: for each set of terminals a lexer state can try, the terminals in lark's matching order (priority,
  then widest, then longest pattern, then name), without the keywords that a regex terminal matches exactly, which
  are listed as that terminal's keywords instead (lark's "unless" callbacks), and the scanner's dispatch on the
  first one or two characters (Note [first-character dispatch]); the text of each string terminal;
- which scanner each parser state uses (one for all states with the basic lexer), the ignored terminals;
- actions (terminal -> shift state or ~rule) and gotos (rule name -> state) per state, start and end state;
- rules: origin, length, callback name (alias or rule name), whether a ?rule with one child returns the child,
  which children are kept (filtered-out tokens dropped, ``_rule`` children spliced), whether the rule is a
  ``_rule`` (inlined into its parent).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from .grammar import build_parser, grammar_sha256

# The grammars run by the engine, with the lark options that shape their tables.
GRAMMARS: dict[str, dict[str, Any]] = {
    "schema": {"lexer": "basic", "always_accept": ("NEWLINE", "INDENT", "LINE_CONTINUATION")},
    "treespec_name": {"lexer": "contextual", "always_accept": ()},
    "type_info": {"lexer": "contextual", "always_accept": ()},
    "structure": {"lexer": "contextual", "always_accept": ()},
    "sym_expr": {"lexer": "contextual", "always_accept": ()},
}

_TABLES_DIR = Path(__file__).resolve().parent / "_generated"


class _KeepNewlines:
    """A postlexer that changes nothing: lark keeps the terminals it names in the lexer even when no rule uses them."""

    def __init__(self, always_accept: tuple[str, ...]) -> None:
        self.always_accept = always_accept

    def process(self, stream: Any) -> Any:
        return stream


# Note [first-character dispatch]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# (Run by _lalr's scanners; computed here, into the tables.)
# Python's regular expressions try the branches of an alternation one after the other, and a branch that is a
# named group cannot be skipped on its first character: matching "(" against the schema lexer's 22 terminals
# tries all the ones before LPAR (about 0.5 us). Only the terminals that can start with the characters at hand
# can match there, so the alternation of just those, in the same order, finds the same first match: the same
# token. _prefixes reads each terminal's regular expression (Python's own parse of it) into a superset of the
# one- and two-character prefixes of what it can match; anything it does not model (flags, back references,
# negated or category classes) counts as "any character", so the sets can only be too large, which costs
# speed, never a different token. When the only candidate is a literal that the dispatched characters already
# spell out, no regular expression runs at all. Where the second character decides, an entry under "" serves
# every other second character and the end of the text (the candidates that may be followed by anything).
# Characters outside ASCII and characters no terminal starts with go to the whole alternation (which then
# matches, or fails as before). Equal tokens are checked against lark by tests/lalr/test_tables.py and
# fuzz/fuzz_engine.py.

_ANY = None
_ALL = "all"
# A prefix set: (whether the pattern matches the empty string, {first character or _ANY: [whether a match may end
# after it, its second characters (a set, or _ALL)]}).
_Prefixes = tuple[bool, dict[Any, list[Any]]]
_UNIVERSAL: _Prefixes = (True, {_ANY: [True, _ALL]})  # what a terminal we cannot read may match
_EMPTY: _Prefixes = (True, {})


def _sre() -> tuple[Any, Any]:
    """Python's own parser of regular expressions and its constants."""
    try:  # Python >= 3.11
        return importlib.import_module("re._parser"), importlib.import_module("re._constants")
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse"), importlib.import_module("sre_constants")


class _Unreadable(Exception):
    """A regular expression construct that _prefixes does not model."""


def _starts(p: _Prefixes) -> Any:
    """The first characters of a prefix set, as a set of second characters of what precedes it."""
    return _ALL if _ANY in p[1] else set(p[1])


def _union_seconds(a: Any, b: Any) -> Any:
    return _ALL if a is _ALL or b is _ALL else a | b


def _union(a: _Prefixes, b: _Prefixes) -> _Prefixes:
    firsts = {c: list(v) for c, v in a[1].items()}
    for c, (ends, seconds) in b[1].items():
        mine = firsts.get(c)
        if mine is None:
            firsts[c] = [ends, seconds]
        else:
            firsts[c] = [mine[0] or ends, _union_seconds(mine[1], seconds)]
    return (a[0] or b[0], firsts)


def _concat(a: _Prefixes, b: _Prefixes) -> _Prefixes:
    starts = _starts(b)
    firsts = {}
    for c, (ends, seconds) in a[1].items():
        if ends:  # the one-character string c, then what b starts with (or nothing, if b matches nothing)
            seconds = _union_seconds(seconds, starts)
        firsts[c] = [ends and b[0], seconds]
    joined = (a[0] and b[0], firsts)
    return _union(joined, (False, b[1])) if a[0] else joined


def _prefixes(items: Any, c: Any) -> _Prefixes:
    """The prefix set of the parsed pattern ``items`` (see above)."""
    result = _EMPTY
    for op, av in items:
        step: _Prefixes
        if op is c.LITERAL:
            step = (False, {chr(av): [True, set()]})
        elif op is c.IN:
            chars: Any = set()
            for kind, value in av:
                if kind is c.LITERAL:
                    chars.add(chr(value))
                elif kind is c.RANGE and value[1] - value[0] < 256:
                    chars.update(chr(v) for v in range(value[0], value[1] + 1))
                else:  # NEGATE, CATEGORY, a wide range: any character
                    chars = {_ANY}
                    break
            step = (False, {ch: [True, set()] for ch in chars})
        elif op is c.ANY or op is c.NOT_LITERAL:
            step = (False, {_ANY: [True, set()]})
        elif op is c.BRANCH:
            step = (False, {})
            for branch in av[1]:
                step = _union(step, _prefixes(branch, c))
        elif op is c.SUBPATTERN:
            if av[1] or av[2]:  # inline flags (ignore case, ...) change what literals match
                raise _Unreadable
            step = _prefixes(av[3], c)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT) or op is getattr(c, "POSSESSIVE_REPEAT", None):
            # body{low,high}: for two-character prefixes, body^n for n >= 2 is body^2
            low, high, sub = av
            body = _prefixes(sub, c)
            step = (False, {})
            if low == 0:
                step = _union(step, _EMPTY)
            if low <= 1 <= high:
                step = _union(step, body)
            if high >= 2:
                step = _union(step, _concat(body, body))
        elif op is getattr(c, "ATOMIC_GROUP", None):
            step = _prefixes(av, c)
        elif op in (c.ASSERT, c.ASSERT_NOT, c.AT):  # zero width: they only narrow what matches
            step = _EMPTY
        else:
            raise _Unreadable
        result = _concat(result, step)
    return result


def _terminal_prefixes(regexp: str) -> _Prefixes:
    parser, constants = _sre()
    try:
        parsed = parser.parse(regexp)
        if parsed.state.flags & ~(constants.SRE_FLAG_UNICODE):
            return _UNIVERSAL
        return _prefixes(parsed, constants)
    except (_Unreadable, re.error, AttributeError, TypeError, ValueError):
        return _UNIVERSAL


def _dispatch(order: tuple[tuple[str, str], ...], literals: dict[str, str]) -> tuple[tuple[str, Any], ...]:
    """The dispatch of one scanner (Note [first-character dispatch]): ``(characters, entry)`` pairs, where an entry
    is a terminal name (a literal: the only candidate, spelled out by the dispatched characters), a tuple of
    terminal names (the candidates, in the scanner's order) or a dict from second characters to entries."""
    sets = [_terminal_prefixes(regexp) for _, regexp in order]

    def seconds(i: int, c1: str) -> Any:
        """What may follow ``c1`` at the start of a match of terminal ``i`` (_ALL when a match may end there)."""
        nullable, firsts = sets[i]
        if nullable:
            return _ALL
        out: Any = set()
        for c in (c1, _ANY):
            if c in firsts:
                ends, following = firsts[c]
                out = _ALL if ends else _union_seconds(out, following)
        return out

    def entry(chars: str, candidates: list[int]) -> Any:
        if len(candidates) == 1:
            name = order[candidates[0]][0]
            literal = literals.get(name)
            if literal is not None and len(literal) <= len(chars) and chars.startswith(literal):
                return name
        return tuple(order[i][0] for i in candidates)

    def grouped(pairs: list[tuple[str, Any]]) -> Any:
        groups: dict[Any, str] = {}
        for ch, spec in pairs:
            key = tuple(sorted(spec.items())) if isinstance(spec, dict) else spec
            groups[key] = groups.get(key, "") + ch
        by_key = {tuple(sorted(spec.items())) if isinstance(spec, dict) else spec: spec for _, spec in pairs}
        return [(chars, by_key[key]) for key, chars in groups.items()]

    first: list[tuple[str, Any]] = []
    for code in range(128):
        c1 = chr(code)
        one = [i for i, (nullable, firsts) in enumerate(sets) if nullable or c1 in firsts or _ANY in firsts]
        if not one:
            continue  # no terminal starts with c1: the whole alternation fails there, as it should
        follow = [seconds(i, c1) for i in one]
        if len(one) > 1 and any(f is not _ALL for f in follow):
            # "" holds the entry for any other second character (and for none, at the end of the text): the
            # candidates that may be followed by anything
            always = [i for i, f in zip(one, follow, strict=True) if f is _ALL]
            default = entry(c1, always) if always else None
            second = [("", default)]
            for c2 in sorted(set().union(*(f for f in follow if f is not _ALL))):
                spec = entry(c1 + c2, [i for i, f in zip(one, follow, strict=True) if f is _ALL or c2 in f])
                if spec != default:
                    second.append((c2, spec))
            first.append((c1, dict(grouped(second))))
        else:
            first.append((c1, entry(c1, one)))
    return tuple(grouped(first))


def _scanner(terminals: list[Any]) -> tuple[Any, ...]:
    terminals = sorted(terminals, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    strings = [t for t in terminals if t.pattern.type == "str"]
    keywords: dict[str, dict[str, str]] = {}
    absorbed = set()
    for rt in terminals:
        if rt.pattern.type != "re":
            continue
        for st in strings:
            if st.priority != rt.priority:
                continue
            m = re.compile(rt.pattern.to_regexp()).match(st.pattern.value)
            if m is not None and m.group(0) == st.pattern.value:
                if st.pattern.flags:  # a keyword is looked up by its exact text
                    raise ValueError(f"keyword terminal {st.name} has regex flags; the engine cannot run it")
                keywords.setdefault(rt.name, {})[st.pattern.value] = st.name
                if st.pattern.flags <= rt.pattern.flags:
                    absorbed.add(st.name)
    order = tuple((t.name, t.pattern.to_regexp()) for t in terminals if t.name not in absorbed)
    literals = {t.name: t.pattern.value for t in terminals if t.pattern.type == "str" and not t.pattern.flags}
    return order, keywords, _dispatch(order, literals)


def _numbered_states(table: Any, start: str) -> tuple[dict[Any, int], list[Any]]:
    """Canonical state numbers: breadth-first from the start state, successors in sorted symbol order; the end
    state last when no shift reaches it. Returns the numbering and the old states in that order."""
    old_start, old_end = table.start_states[start], table.end_states[start]
    number = {old_start: 0}
    queue = [old_start]
    for old in queue:
        for symbol in sorted(table.states[old]):
            action, arg = table.states[old][symbol]
            if action.name == "Shift" and arg not in number:
                number[arg] = len(number)
                queue.append(arg)
    if old_end not in number:
        number[old_end] = len(number)
        queue.append(old_end)
    return number, queue


def _actions_and_gotos(table: Any, parser: Any, number: dict[Any, int], queue: list[Any]) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """Per state: terminal -> shift state or ~rule index, and rule name -> goto state."""
    rule_index = {rule: i for i, rule in enumerate(parser.rules)}
    actions: list[dict[str, int]] = []
    gotos: list[dict[str, int]] = []
    for old in queue:
        acts: dict[str, int] = {}
        goes: dict[str, int] = {}
        for symbol in sorted(table.states.get(old, {})):
            action, arg = table.states[old][symbol]
            if action.name == "Shift":
                (acts if symbol.isupper() else goes)[str(symbol)] = number[arg]
            else:
                acts[str(symbol)] = ~rule_index[arg]
        actions.append(acts)
        gotos.append(goes)
    return actions, gotos


def _rules(parser: Any) -> tuple[Any, ...]:
    """Per rule: origin, length, callback name, whether a one-child ?rule returns the child, the kept children
    (None when all are kept as they are) and whether the rule is a ``_rule``."""
    from lark.grammar import Terminal  # building tables needs lark; running them does not

    rules = []
    for rule in parser.rules:
        keep = [
            (i, (not sym.is_term) and sym.name.startswith("_"))
            for i, sym in enumerate(rule.expansion)
            if not (isinstance(sym, Terminal) and sym.filter_out) or rule.options.keep_all_tokens
        ]
        trivial = len(keep) == len(rule.expansion) and not any(splice for _, splice in keep)
        rules.append(
            (
                str(rule.origin.name),
                len(rule.expansion),
                str(rule.alias or rule.options.template_source or rule.origin.name),
                bool(rule.options.expand1 and not rule.alias),
                None if trivial else tuple(keep),
                rule.origin.name.startswith("_"),
            )
        )
    return tuple(rules)


def _scanners(parser: Any, actions: list[dict[str, int]], lexer: str, extra: set[str]) -> tuple[list[Any], list[int]]:
    """The scanners and which one each state uses: one for all states with the basic lexer; with the contextual
    one, a scanner per distinct set of terminals a state accepts (plus ``extra``), the root scanner first."""
    by_name = {t.name: t for t in parser.terminals}
    scanners: list[Any] = [_scanner(list(by_name.values()))]
    scanner_of_state = [0] * len(actions)
    if lexer == "contextual":
        seen: dict[frozenset[str], int] = {}
        for new, acts in enumerate(actions):
            accepts = frozenset(n for n in acts if n in by_name) | extra
            if accepts not in seen:
                seen[accepts] = len(scanners)
                scanners.append(_scanner([by_name[n] for n in sorted(accepts) if n in by_name]))
            scanner_of_state[new] = seen[accepts]
    return scanners, scanner_of_state


def build_tables(name: str) -> dict[str, Any]:
    """The tables of ``grammars/<name>.lark`` as plain data (see the module docstring)."""
    options = GRAMMARS[name]
    always_accept = options["always_accept"]
    lark_options: dict[str, Any] = {"lexer": options["lexer"], "maybe_placeholders": False}
    if always_accept:
        lark_options["postlex"] = _KeepNewlines(always_accept)
    parser = build_parser(name, **lark_options)
    table = parser.parser.parser.parser.parse_table
    (start,) = parser.options.start
    number, queue = _numbered_states(table, start)
    actions, gotos = _actions_and_gotos(table, parser, number, queue)
    ignore = tuple(sorted(parser.ignore_tokens))
    # With a contextual lexer, every state's scanner also tries the ignored terminals (as lark's does): ignored text
    # is skipped before every token, and where a state's scanner matches nothing there is no ignored text, so the
    # root scanner that is then tried for the error's token (as lark tries its root lexer) finds a real token or
    # nothing, as lark's does. tests/lalr/test_tables.py checks this against lark on the structure grammar.
    scanners, scanner_of_state = _scanners(parser, actions, options["lexer"], set(ignore) | set(always_accept))
    terminals = sorted(parser.terminals, key=lambda t: t.name)
    return {
        "grammar_sha256": grammar_sha256(name),
        "scanners": tuple(scanners),
        "literals": {t.name: t.pattern.value for t in terminals if t.pattern.type == "str" and not t.pattern.flags},
        "root_scanner": 0,
        "scanner_of_state": tuple(scanner_of_state),
        "ignore": ignore,
        "start_state": 0,
        "end_state": number[table.end_states[start]],
        "actions": tuple(actions),
        "gotos": tuple(gotos),
        "rules": _rules(parser),
    }


def render(name: str, tables: dict[str, Any]) -> str:
    """The text of the generated module for ``tables``."""
    import pprint  # only when writing tables: a parse should not pay for it

    lines = [
        f'"""LALR tables of grammars/{name}.lark, generated by piece_by_piece_serialize._lalr.build: do not edit.',
        "",
        "Regenerate with `make tables` after changing the grammar (tests/lalr/test_tables.py checks they agree).",
        '"""',
        "",
        "# fmt: off",
        f"TABLES = {pprint.pformat(tables, width=120, sort_dicts=False)}",
        "",
    ]
    return "\n".join(lines)


def module_path(name: str) -> Path:
    return _TABLES_DIR / f"{name}.py"


def main(argv: list[str]) -> int:
    names = argv or sorted(GRAMMARS)
    for name in names:
        path = module_path(name)
        text = render(name, build_tables(name))
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        else:
            print(f"{path} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
