"""The records every reader produces: schema sites, problems, suppressions, and the file that holds them.

Also what the readers share beyond the records: the Jinja test that sets a templated schema aside as a
note (a template's literal is what the rendered file will hold, so it is never parsed), the parser of
``pbp: ignore[rule]`` comments, whatever the comment syntax of the container language, and the hex-digit
test used by the YAML and C++ escape decoders.

Imports: :mod:`.._contexts` only (the context decides a site's type-variable setting); the readers
import this module, never the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .._contexts import TYPEVARS_OFF

__all__ = [
    "TEMPLATE_OPENERS",
    "Problem",
    "SchemaSite",
    "SourceFile",
    "Suppression",
    "is_hex",
    "parse_directive",
    "set_aside_templates",
    "template_marker",
    "template_note",
]


@dataclass(frozen=True, slots=True)
class SchemaSite:
    """One schema string found in a file.

    ``positions[i]`` is the (line, column), both 1-based, in the original file of ``text[i]``;
    ``positions[len(text)]`` is the place just after the last character. ``lines`` are the file's lines,
    shared by every site of the file, for printing the source line under a finding. ``span`` is the first
    and last line of the call that holds the schema (a suppression comment on any of them applies);
    ``typevars`` is an explicit ``allow_typevars`` argument written in the call, ``None`` when the context
    decides.
    """

    path: str
    text: str
    positions: Sequence[tuple[int, int]]
    context: str
    lines: Sequence[str]
    span: tuple[int, int] = (0, 0)
    typevars: bool | None = None

    def where(self, offset: int) -> tuple[int, int]:
        """The original (line, column) of the character at ``offset`` in :attr:`text` (clamped)."""
        return self.positions[max(0, min(offset, len(self.text)))]

    @property
    def typevars_off(self) -> bool:
        """Whether torch parses this schema with type variables off."""
        return self.context in TYPEVARS_OFF if self.typevars is None else not self.typevars


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that is not a checked schema: a note on a schema a static read cannot check
    (``code`` "template" or "not-static"), an odd YAML form, or, ``fatal``, a file that cannot be read at
    all (a Python syntax error), which fails the run."""

    path: str
    line: int
    column: int
    message: str
    severity: str = "error"
    code: str = "source"
    fatal: bool = False
    span: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Suppression:
    """A ``pbp: ignore[rule, ...]`` comment at (line, column); ``rules`` is empty when it is malformed."""

    line: int
    column: int
    rules: tuple[str, ...]
    text: str


@dataclass(slots=True)
class SourceFile:
    """Everything read from one file: its lines, schema sites and problems in file order, suppressions."""

    path: str
    lines: list[str]
    sites: list[SchemaSite] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Templates: Jinja placeholders in a schema literal mean the file is a template (FBGEMM's codegen
# `*_template.cpp`); what torch receives is the rendered file, so the literal is noted, never parsed.

TEMPLATE_OPENERS = {"{{": "}}", "{%": "%}", "{#": "#}"}


def template_marker(text: str, start: int = 0, end: int | None = None) -> int:
    """The offset of the first Jinja opener (``{{``, ``{%``, ``{#``) in ``text[start:end]``, or -1."""
    found = [k for k in (text.find(opener, start, end) for opener in TEMPLATE_OPENERS) if k >= 0]
    return min(found, default=-1)


def template_note(path: str, text: str, k: int, where: tuple[int, int], span: tuple[int, int]) -> Problem:
    close = text.find(TEMPLATE_OPENERS[text[k : k + 2]], k + 2)
    shown = " ".join(text[k : close + 2 if close >= 0 else k + 2].split())
    if len(shown) > 40:
        shown = shown[:37] + "..."
    line, column = where
    return Problem(
        path, line, column, f"template: not checked (Jinja '{shown}' is expanded when the file is rendered)", "note", "template", span=span
    )


def set_aside_templates(source: SourceFile) -> None:
    kept: list[SchemaSite] = []
    for site in source.sites:
        k = template_marker(site.text)
        if k < 0:
            kept.append(site)
        else:
            source.problems.append(template_note(site.path, site.text, k, site.where(k), site.span))
    if len(kept) != len(source.sites):
        source.sites = kept
        source.problems.sort(key=lambda p: (p.line, p.column))


# ------------------------------------------------------------------------------------------------
# Suppression comments: `pbp: ignore[rule, rule]` anywhere in a comment of the container language.


def parse_directive(comment: str, line: int, column: int) -> Suppression | None:
    """The suppression in one comment's text (written from ``column`` of ``line``), if it holds one.

    ``pbp: ignore`` not followed by a bracketed, non-empty rule list is returned with no rules (reported
    as malformed rather than silently doing nothing).
    """
    k = comment.find("pbp:")
    if k < 0:
        return None
    j = k + 4
    while j < len(comment) and comment[j] in " \t":
        j += 1
    if comment[j : j + 6] != "ignore":
        return None
    j += 6
    while j < len(comment) and comment[j] in " \t":
        j += 1
    text = comment[k:j].rstrip()
    if comment[j : j + 1] == "[":
        close = comment.find("]", j)
        if close > j:
            text = comment[k : close + 1]
            rules = tuple(r.strip() for r in comment[j + 1 : close].split(","))
            if all(rules):
                return Suppression(line, column + k, rules, text)
    return Suppression(line, column + k, (), text)


def is_hex(digits: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in digits)
