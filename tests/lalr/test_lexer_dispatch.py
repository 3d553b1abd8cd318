"""The lexer's dispatch on the next characters (Note [first-character dispatch] in ``_lalr_build``) picks the same
token as the whole alternation of the scanner, in every lexer state, whatever the text.

The dispatch only ever narrows which terminals are tried; if its prefix analysis of a terminal's regular
expression were too narrow, some text would lex differently. Here every scanner of every grammar lexes one token
from each text made of one or two ASCII characters (and the same followed by a few continuations), with the
dispatch and with the whole alternation plus its keywords, and both must give the same kind and text, or both
no match.
"""

from __future__ import annotations

import pytest

from piece_by_piece_serialize._lalr import build as _lalr_build
from piece_by_piece_serialize._lalr import engine as _lalr
from piece_by_piece_serialize._lalr import tables as _lalr_tables

CONTINUATIONS = ("", "a", "_", "0", "x9_", ".", ">", "'", " ")


class _Plain:
    def __getattr__(self, name: str):
        return lambda children: children


def _by_dispatch(scanner: _lalr._Scanner, text: str):
    hit = scanner.first.get(text[0])
    if hit.__class__ is _lalr._Second:
        hit = hit[text[1:2]]
    if hit.__class__ is tuple:
        kind, value, length = hit
        assert value == text[:length], (text, hit)
        return kind, value
    if hit is None:
        hit = scanner.full
    match = hit.match if hit.__class__ is _lalr._Keyed else hit
    m = match(text, 0)
    if m is None:
        return None
    kind = m.lastgroup
    if hit.__class__ is _lalr._Keyed:
        kind = hit.keywords.get(kind, {}).get(m.group(), kind)
    return kind, m.group()


def _by_alternation(scanner: _lalr._Scanner, text: str):
    m = scanner.match(text, 0)
    if m is None:
        return None
    kind = m.lastgroup
    return scanner.keywords.get(kind, {}).get(m.group(), kind), m.group()


@pytest.mark.parametrize("grammar", sorted(_lalr_build.GRAMMARS))
def test_dispatch_gives_the_token_of_the_whole_alternation(grammar: str) -> None:
    engine = _lalr.Engine(_lalr_tables.load(grammar), _Plain())
    scanners = {id(s): s for s in engine.scanner_of_state}.values()
    texts = [chr(a) for a in range(128)]
    texts += [chr(a) + chr(b) + tail for a in range(128) for b in range(32, 128) for tail in CONTINUATIONS]
    texts += [chr(a) + "é" for a in range(128)] + ["é", "_é", "-\n", ".\t"]
    checked = 0
    for scanner in scanners:
        assert scanner.first or not scanner.names, "a scanner without a dispatch table"
        for text in texts:
            assert _by_dispatch(scanner, text) == _by_alternation(scanner, text), (grammar, sorted(scanner.names), text)
            checked += 1
    assert checked > 100_000
