"""Plain-text schema files: one schema per line; blank lines and lines whose first visible character is
'#' are skipped. A schema's characters sit on its line one after the other, so its positions are three
numbers (:class:`~._positions.LinePositions`).

Imports: :mod:`.._contexts`, :mod:`._model` and :mod:`._positions` only.
"""

from __future__ import annotations

from .._contexts import CONTEXT_TEXT
from ._model import SchemaSite
from ._positions import LinePositions

__all__ = ["text_sites"]


def text_sites(path: str, lines: list[str]) -> list[SchemaSite]:
    sites = []
    for lineno, line in enumerate(lines, 1):
        start = len(line) - len(line.lstrip())
        body = line[start:].rstrip()
        if not body or body[0] == "#":
            continue
        sites.append(SchemaSite(path, body, LinePositions(lineno, len(body), start + 1), CONTEXT_TEXT, lines, (lineno, lineno)))
    return sites
