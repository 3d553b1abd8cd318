"""The finding model: one message positioned in an original file, and its text rendering.

A *finding* is ``path:line:col: severity[code]: message``, then the source line and a caret under the column
(text output), or a record of another format (see :mod:`._report`). Findings are made here from a schema
site and an offset into its text (the site maps the offset back to the file) or from a reading
:class:`~.sources.Problem`. Severities are ``error``, ``warning`` or ``note``; what they do to the exit
code is decided by the commands (:mod:`._check`, :mod:`._format`), not here.

Imports: the standard library only at run time (:mod:`.sources` for annotations). Both the commands and
:mod:`._report` import this module, so it imports neither.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._diagnostics import caret

if TYPE_CHECKING:
    from .sources import Problem, SchemaSite

__all__ = ["Finding", "caret_lines", "first_difference", "problem_finding", "render_text", "site_finding", "source_line"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One message about a schema, positioned in the original file (1-based line and column).

    ``span`` is the first and last line of the call the finding is about: a suppression comment on any
    of them (or on ``line``) applies.
    """

    path: str
    line: int
    column: int
    severity: str  # "error", "warning" or "note"
    code: str  # stable identifier of the kind of finding, e.g. "syntax", "misread-number" (see _rules)
    message: str
    source_line: str
    schema: str | None = None
    span: tuple[int, int] = (0, 0)

    def as_json(self) -> str:
        return json.dumps(
            {
                "path": self.path,
                "line": self.line,
                "column": self.column,
                "severity": self.severity,
                "code": self.code,
                "message": self.message,
                "schema": self.schema,
            },
            ensure_ascii=False,
        )


def caret_lines(source_line: str, column: int) -> str:
    """The source line and a caret under ``column`` (1-based), indented by two spaces.

    Tabs before the column are kept in the caret line so the caret lines up on a terminal; other
    control characters are shown as '?'; lines longer than the window are cut around the column.
    """
    return caret(source_line, max(0, min(column - 1, len(source_line))), keep_tabs=True)


def render_text(finding: Finding) -> str:
    """``path:line:col: severity[code]: message``, the source line and a caret.

    The rule code is in the head (as rustc and mypy write ``error[E0308]``/``[arg-type]``) because it is what a
    ``pbp: ignore[code]`` comment and the ``severity`` table need; a reader should not have to ask for JSON to
    learn it.
    """
    head = f"{finding.path}:{finding.line}:{finding.column}: {finding.severity}[{finding.code}]: {finding.message}"
    return head + "\n" + caret_lines(finding.source_line, finding.column)


def source_line(lines: Sequence[str], line: int) -> str:
    """Line ``line`` (1-based) of a file, or "" when there is no such line."""
    return lines[line - 1] if 0 < line <= len(lines) else ""


def site_finding(site: SchemaSite, offset: int, severity: str, code: str, message: str) -> Finding:
    """A finding at ``offset`` into a site's text, placed where that character was written."""
    line, column = site.where(offset)
    return Finding(site.path, line, column, severity, code, message, source_line(site.lines, line), site.text, site.span)


def problem_finding(problem: Problem, lines: Sequence[str]) -> Finding:
    """The finding of a (non-fatal) reading problem of the file whose lines are ``lines``."""
    source = source_line(lines, problem.line)
    return Finding(problem.path, problem.line, problem.column, problem.severity, problem.code, problem.message, source, None, problem.span)


def first_difference(a: str, b: str) -> int:
    """The first offset at which two texts differ (the shorter one's length when one extends the other)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):  # the shorter one ends the scan
        if x != y:
            return i
    return min(len(a), len(b))
