"""Fuzz harness: the LALR engine against lark, on the same grammar and the same text.

Run: ``python fuzz/fuzz_engine.py [libFuzzer flags] [corpus dirs]``.

Schemas, TreeSpec names, type-info strings and structure descriptions are parsed by
``piece_by_piece_serialize._lalr.engine`` from tables that lark computed from the grammars (``_lalr/_generated/``); lark's own
run time is the reference. The first byte picks the grammar (its two low bits: 0 schema, 1 TreeSpec name,
2 type-info, 3 structure; the seeds written before the last two existed had 0 or 1 there); the rest, decoded
as UTF-8 with replacement, is the text. Property: lark (no
transformer) and the engine (driven by callbacks that build the same plain trees) give the same outcome --
equal trees, or a failure at the same position, on the same token (or character), with the same expected
terminals and, where lark's parser refused a token, the same terminals it would accept there. Schema text with a
newline goes through the schema's newline postlexer on both sides, as the library parses it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import Stats, decode_text, fail, reporting, start  # noqa: E402

TARGET = "engine"
STATS = Stats(TARGET)
GRAMMARS = ("schema", "treespec_name", "type_info", "structure")

_RUNNERS: dict[tuple[str, bool], tuple[Any, Any]] = {}


def _plain(value: Any) -> Any:
    from lark import Token as LarkToken
    from lark import Tree

    from piece_by_piece_serialize._lalr.choice import Token

    if isinstance(value, (Token, LarkToken)):
        return (value.type, str(value), value.start_pos)
    if isinstance(value, Tree):
        return (str(value.data), tuple(_plain(c) for c in value.children))
    return value


class _PlainTrees:
    """Engine callbacks building what lark builds without a transformer, in the form ``_plain`` gives it."""

    def __getattr__(self, rule: str) -> Any:
        return lambda children: (rule, tuple(_plain(c) for c in children))


def _runners(grammar: str, multiline: bool) -> tuple[Any, Any]:
    """(lark parser, engine) for a grammar, built once, with the options the tables were generated with."""
    key = (grammar, multiline and grammar == "schema")
    if key not in _RUNNERS:
        from piece_by_piece_serialize._lalr import build as _lalr_build
        from piece_by_piece_serialize._lalr import tables as _lalr_tables
        from piece_by_piece_serialize._lalr.grammar import build_parser
        from piece_by_piece_serialize._lalr.choice import Engine
        from piece_by_piece_serialize.schema._transform import _Newlines

        options = _lalr_build.GRAMMARS[grammar]
        lark_options: dict[str, Any] = {"lexer": options["lexer"], "maybe_placeholders": False}
        postlex = None
        if key[1]:
            postlex = _Newlines()
            lark_options["postlex"] = postlex
        elif options["always_accept"]:  # as the tables were built: these terminals stay in the lexer
            lark_options["postlex"] = _lalr_build._KeepNewlines(options["always_accept"])
        parser = build_parser(grammar, **lark_options)
        _RUNNERS[key] = (parser, Engine(_lalr_tables.load(grammar), _PlainTrees(), postlex))
    return _RUNNERS[key]


def lark_outcome(parser: Any, text: str) -> tuple:
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        return ("tree", _plain(parser.parse(text)))
    except UnexpectedToken as e:
        pos = len(text) if e.token.type == "$END" else e.token.start_pos
        accepts = sorted(e.interactive_parser.accepts()) if e.interactive_parser is not None else None
        return ("token", pos, e.token.type, sorted(e.expected), accepts)
    except UnexpectedCharacters as e:
        return ("char", e.pos_in_stream, sorted(e.allowed))
    except UnexpectedInput as e:  # LALR raises only the two above; anything else is a finding
        return ("other", type(e).__name__)


def engine_outcome(engine: Any, text: str, with_accepts: bool) -> tuple:
    from piece_by_piece_serialize._lalr.choice import Failure

    try:
        return ("tree", _plain(engine.parse(text)))
    except Failure as e:
        if e.token is None:
            return ("char", e.pos, sorted(e.expected))
        accepts = sorted(engine.accepts(e.states)) if with_accepts else None
        return ("token", e.pos, e.token.type, sorted(e.expected), accepts)


def outcomes(grammar: str, text: str) -> tuple[tuple, tuple]:
    """(lark's outcome, the engine's outcome) for ``text`` in ``grammar``."""
    parser, engine = _runners(grammar, "\n" in text)
    expected = lark_outcome(parser, text)
    got = engine_outcome(engine, text, with_accepts=expected[0] == "token" and expected[-1] is not None)
    return expected, got


def check(data: bytes) -> None:
    """The property for one input; raises Finding on failure."""
    with reporting(data):
        grammar = GRAMMARS[data[0] & 3] if data else GRAMMARS[0]
        text = decode_text(data[1:])
        expected, got = outcomes(grammar, text)
        if got != expected:
            raise fail(data, f"{grammar}: the engine gives {got!r}, lark {expected!r}")
        STATS.add(f"{grammar}: same {expected[0]}")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()
    start(
        sys.argv,
        TestOneInput,
        ["piece_by_piece_serialize._lalr.engine"],
        warm_up=lambda: [check(seed) for seed in (b"\x00f(int x) -> ()", b"\x00f(\n int x) -> ()", b"\x01___v1_X")],
    )


if __name__ == "__main__":
    main()
