"""The tables each engine runs, at run time: the generated module, checked against its grammar file.

:func:`load` is what every process calls on its first parse of a language. It imports
``_generated/<name>.py`` and compares its SHA-256 stamp with the grammar file's text, so an edited grammar is
never run with old tables: on a mismatch (or a missing module) the tables are rebuilt in memory by
:mod:`.build`, which needs lark. Nothing here imports lark, ``re`` or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from .grammar import grammar_sha256


def load(name: str) -> dict[str, Any]:
    """The tables for ``grammars/<name>.lark``: the generated module when its stamp matches the grammar file,
    else freshly built from the grammar (with lark)."""
    tables: dict[str, Any] | None
    try:
        tables = importlib.import_module(f"{__package__}._generated.{name}").TABLES
    except ImportError:
        tables = None
    if tables is None or tables["grammar_sha256"] != grammar_sha256(name):
        from .build import build_tables  # lark: only when the generated module is stale or missing

        tables = build_tables(name)
    return tables
