"""Export the LALR tables lark computes for a grammar as plain Python data, for :mod:`._lalr` to run.

``python -m piece_by_piece_serialize._lalr_build`` (``make tables``) rewrites the modules in ``_tables/`` from the
grammar files; ``tests/test_tables.py`` fails when one of them is stale, and :func:`load` rebuilds the tables in
memory (with lark) when a grammar file no longer matches the SHA-256 stamp of its module, so an edited grammar is
never run with old tables. The export is canonical: states are numbered breadth-first from the start state,
following symbols in sorted order, and rules in lark's order, so a grammar always gives the same text.

What is exported, for each grammar and lexer kind:
- the scanners: for each set of terminals a lexer state can try, the terminals in lark's matching order (priority,
  then widest, then longest pattern, then name), without the keywords that a regex terminal matches exactly, which
  are listed as that terminal's keywords instead (lark's "unless" callbacks);
- which scanner each parser state uses (one for all states with the basic lexer), the ignored terminals;
- actions (terminal -> shift state or ~rule) and gotos (rule name -> state) per state, start and end state;
- rules: origin, length, callback name (alias or rule name), whether a ?rule with one child returns the child,
  which children are kept (filtered-out tokens dropped, ``_rule`` children spliced), whether the rule is a
  ``_rule`` (inlined into its parent).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ._grammar import build_parser, grammar_text

# The grammars run by the engine, with the lark options that shape their tables.
GRAMMARS: Dict[str, Dict[str, Any]] = {
    "schema": {"lexer": "basic", "always_accept": ("NEWLINE",)},
    "treespec_name": {"lexer": "contextual", "always_accept": ()},
}

_TABLES_DIR = Path(__file__).resolve().parent / "_tables"


def grammar_sha256(name: str) -> str:
    """The stamp of ``grammars/<name>.lark``: its text with line ends normalised (a checkout that writes CRLF
    holds the same grammar)."""
    text = grammar_text(name).replace("\r\n", "\n")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _KeepNewlines:
    """A postlexer that changes nothing: lark keeps the terminals it names in the lexer even when no rule uses them."""

    def __init__(self, always_accept: Tuple[str, ...]) -> None:
        self.always_accept = always_accept

    def process(self, stream: Any) -> Any:
        return stream


def _scanner(terminals: List[Any]) -> Tuple[Tuple[Tuple[str, str], ...], Dict[str, Dict[str, str]]]:
    terminals = sorted(terminals, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    strings = [t for t in terminals if t.pattern.type == "str"]
    keywords: Dict[str, Dict[str, str]] = {}
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
    return order, keywords


def build_tables(name: str) -> Dict[str, Any]:
    """The tables of ``grammars/<name>.lark`` as plain data (see the module docstring)."""
    options = GRAMMARS[name]
    always_accept = options["always_accept"]
    lark_options: Dict[str, Any] = {"lexer": options["lexer"], "maybe_placeholders": False}
    if always_accept:
        lark_options["postlex"] = _KeepNewlines(always_accept)
    parser = build_parser(name, **lark_options)
    table = parser.parser.parser.parser.parse_table
    (start,) = parser.options.start

    # Canonical state numbers: breadth-first from the start state, successors in sorted symbol order.
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

    rule_index = {rule: i for i, rule in enumerate(parser.rules)}
    actions: List[Dict[str, int]] = []
    gotos: List[Dict[str, int]] = []
    for old in queue:
        acts: Dict[str, int] = {}
        goes: Dict[str, int] = {}
        for symbol in sorted(table.states.get(old, {})):
            action, arg = table.states[old][symbol]
            if action.name == "Shift":
                (acts if symbol.isupper() else goes)[str(symbol)] = number[arg]
            else:
                acts[str(symbol)] = ~rule_index[arg]
        actions.append(acts)
        gotos.append(goes)

    rules = []
    for rule in parser.rules:
        keep = [
            (i, (not sym.is_term) and sym.name.startswith("_"))
            for i, sym in enumerate(rule.expansion)
            if not (sym.is_term and sym.filter_out) or rule.options.keep_all_tokens
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

    by_name = {t.name: t for t in parser.terminals}
    ignore = tuple(sorted(parser.ignore_tokens))
    if options["lexer"] == "contextual" and ignore:
        # lark's contextual lexer skips ignored text before reporting a token the state does not take; the
        # engine does not model that (no contextual grammar here ignores anything)
        raise ValueError(f"{name}: the engine runs contextual lexers only for grammars without %ignore")
    extra = set(ignore) | set(always_accept)
    scanners: List[Any] = [_scanner(list(by_name.values()))]
    scanner_of_state = [0] * len(queue)
    if options["lexer"] == "contextual":
        seen: Dict[frozenset, int] = {}
        for new, acts in enumerate(actions):
            accepts = frozenset(n for n in acts if n in by_name) | extra
            if accepts not in seen:
                seen[accepts] = len(scanners)
                scanners.append(_scanner([by_name[n] for n in sorted(accepts) if n in by_name]))
            scanner_of_state[new] = seen[accepts]

    return {
        "grammar_sha256": grammar_sha256(name),
        "scanners": tuple(scanners),
        "root_scanner": 0,
        "scanner_of_state": tuple(scanner_of_state),
        "ignore": ignore,
        "start_state": 0,
        "end_state": number[old_end],
        "actions": tuple(actions),
        "gotos": tuple(gotos),
        "rules": tuple(rules),
    }


def render(name: str, tables: Dict[str, Any]) -> str:
    """The text of the generated module for ``tables``."""
    import pprint  # only when writing tables: a parse should not pay for it

    lines = [
        f'"""LALR tables of grammars/{name}.lark, generated by piece_by_piece_serialize._lalr_build: do not edit.',
        "",
        "Regenerate with `make tables` after changing the grammar (tests/test_tables.py checks they agree).",
        '"""',
        "",
        "# fmt: off",
        f"TABLES = {pprint.pformat(tables, width=120, sort_dicts=False)}",
        "",
    ]
    return "\n".join(lines)


def module_path(name: str) -> Path:
    return _TABLES_DIR / f"{name}.py"


def load(name: str) -> Dict[str, Any]:
    """The tables for ``grammars/<name>.lark``: the generated module when its stamp matches the grammar file,
    else freshly built from the grammar (with lark)."""
    try:
        tables = importlib.import_module(f"{__package__}._tables.{name}").TABLES
    except ImportError:
        tables = None
    if tables is None or tables["grammar_sha256"] != grammar_sha256(name):
        tables = build_tables(name)
    return tables


def main(argv: List[str]) -> int:
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
