"""Locate the grammar files, stamp them, and build a Lark parser from one (for the table build and the tests).

The ``.lark`` files in the top-level ``grammars/`` folder are the single definition of the five languages.
In a wheel they ship as ``piece_by_piece_serialize/grammars/``; in a source checkout (editable install)
they are read from the repository's ``grammars/``. Nothing is written beside the code at run time.

``lark`` is imported only when a parser is built: all five languages (schemas, TreeSpec names, type-info strings,
structure descriptions and symbolic expressions) are parsed by :mod:`.engine` from tables generated ahead of time (``_generated/``,
see :mod:`.build`), so lark runs only to regenerate them (or to rebuild them in memory when a grammar file no
longer matches the stamp of its tables, :func:`grammar_sha256`) and in the tests.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lark import Lark

_HERE = Path(__file__).resolve().parent
# installed: piece_by_piece_serialize/grammars/ (the wheel force-includes them); source tree: <repo>/grammars/
_CANDIDATES = (_HERE.parent / "grammars", _HERE.parents[2] / "grammars")


def grammar_dir() -> Path:
    """The folder holding the ``.lark`` files: inside the installed package, else the source tree."""
    for candidate in _CANDIDATES:
        if (candidate / "schema.lark").is_file():
            return candidate
    raise FileNotFoundError(
        "piece_by_piece_serialize: grammar files not found in " + " or ".join(map(str, _CANDIDATES))
    )


def grammar_path(name: str) -> Path:
    """The path of ``grammars/<name>.lark``."""
    return grammar_dir() / f"{name}.lark"


def grammar_text(name: str) -> str:
    """The text of ``grammars/<name>.lark``."""
    return grammar_path(name).read_text(encoding="utf-8")


def grammar_sha256(name: str) -> str:
    """The stamp of ``grammars/<name>.lark``: its text with line ends normalised (a checkout that writes CRLF
    holds the same grammar)."""
    text = grammar_text(name).replace("\r\n", "\n")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_parser(name: str, **options: Any) -> Lark:
    """A new LALR parser for ``grammars/<name>.lark``; the calling module builds it once and keeps it.

    ``options`` go to :class:`lark.Lark` (``start``, ``transformer``, ...). Run-time parsers are built
    without ``strict``: every grammar is built with ``strict=True`` by the test suite
    (``tests/lalr/test_grammars.py``), so a terminal collision or LALR conflict fails there, loudly, instead
    of costing each process a second at start-up.
    """
    import lark.lexer
    from lark import Lark

    options.setdefault("parser", "lalr")
    if options.get("strict"):
        return Lark(grammar_text(name), import_paths=[grammar_dir()], **options)
    # When the optional ``interegular`` package is importable, lark compares every pair of terminal
    # regexps on each build, even when not strict (about 1.5 s for the schema grammar). The result is
    # only a log message in non-strict mode, so the comparison is skipped here; the strict builds in
    # the tests keep it.
    saved = lark.lexer.has_interegular
    lark.lexer.has_interegular = False
    try:
        return Lark(grammar_text(name), import_paths=[grammar_dir()], **options)
    finally:
        lark.lexer.has_interegular = saved
