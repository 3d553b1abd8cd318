"""The engine behind ``pbp-serialize schema check|format|names``: findings, their rendering, file walking.

A *finding* is one message positioned in an original file: ``path:line:col: severity: message``, then
the source line and a caret under the column (text output), or one JSON object per line (``--format
json``). Schemas come from :mod:`._sources` (which maps every character back to the file), are parsed
with :func:`piece_by_piece_serialize.schema.parse_schema` and linted by :mod:`._lint`. With no path,
``schema check`` runs over every schema registered in the installed torch and also compares our
parser with torch's on each one (names, printed form, torch's re-parse of our print).

Invariants: user errors and I/O errors are reported, never raised; the exit code is 2 when a path could
not be read, else 1 when an error was reported (warnings count with ``--strict``), else 0. torch is
imported only for the no-path run.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._progress import Progress
from ._sources import NAMELESS, TYPEVARS_OFF, Problem, SchemaSite, kind_for_path, read_sites
from .cli import PROG
from .errors import PbpSyntaxError

__all__ = ["Finding", "check_command", "check_torch", "format_command", "names_command", "print_argument_error", "render_text"]

# Folders never worth walking into when looking for schemas.
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
# Long source lines are shown as a window around the caret, as SchemaError.caret() does.
_WINDOW = 100


@dataclass(frozen=True, slots=True)
class Finding:
    """One message about a schema, positioned in the original file (1-based line and column)."""

    path: str
    line: int
    column: int
    severity: str  # "error" or "warning"
    code: str  # stable identifier of the kind of finding, e.g. "syntax", "misread-number"
    message: str
    source_line: str
    schema: str | None = None

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
    col = max(0, min(column - 1, len(source_line)))
    line = source_line
    if len(line) > _WINDOW:
        lo = max(0, min(col - _WINDOW // 2, len(line) - _WINDOW))
        prefix = "..." if lo > 0 else ""
        suffix = "..." if lo + _WINDOW < len(line) else ""
        line = prefix + line[lo : lo + _WINDOW] + suffix
        col = col - lo + len(prefix)
    shown = "".join(ch if ch.isprintable() or ch == "\t" else "?" for ch in line)
    pad = "".join("\t" if ch == "\t" else " " for ch in shown[:col])
    return f"  {shown}\n  {pad}^"


def render_text(finding: Finding) -> str:
    """``path:line:col: severity: message``, the source line and a caret."""
    head = f"{finding.path}:{finding.line}:{finding.column}: {finding.severity}: {finding.message}"
    return head + "\n" + caret_lines(finding.source_line, finding.column)


def _finding(site: SchemaSite, offset: int, severity: str, code: str, message: str) -> Finding:
    line, column = site.where(offset)
    source = site.lines[line - 1] if 0 < line <= len(site.lines) else ""
    return Finding(site.path, line, column, severity, code, message, source, site.text)


def _problem_finding(problem: Problem, lines: Sequence[str]) -> Finding:
    source = lines[problem.line - 1] if 0 < problem.line <= len(lines) else ""
    return Finding(problem.path, problem.line, problem.column, problem.severity, "source", problem.message, source)


# ------------------------------------------------------------------------------------------------
# Checking one schema site


@dataclass(slots=True)
class SiteResult:
    findings: list[Finding]
    schema: Any = None  # the parsed FunctionSchema, when it parsed


def check_site(site: SchemaSite) -> SiteResult:
    """Parse and lint one schema site; every problem becomes a finding at its original position."""
    from ._lint import lint_schema
    from .errors import SchemaError
    from .schema import parse_schema

    nameless = site.context in NAMELESS
    try:
        schema = parse_schema(site.text, allow_typevars=True, allow_nameless=nameless)
    except SchemaError as exc:
        return SiteResult([_finding(site, exc.pos, "error", "syntax", exc.msg)])
    findings: list[Finding] = []
    if site.context in TYPEVARS_OFF:
        try:
            parse_schema(site.text, allow_typevars=False, allow_nameless=nameless)
        except SchemaError as exc:
            findings.append(_typevar_finding(site, schema, exc))
    for lint in lint_schema(schema, site.text, site.context):
        findings.append(_finding(site, lint.offset, lint.severity, lint.code, lint.message))
    findings.sort(key=lambda f: (f.line, f.column))
    return SiteResult(findings, schema)


def _typevar_finding(site: SchemaSite, schema: Any, exc: Any) -> Finding:
    from ._lint import typevar_at

    where = _context_label(site.context)
    typevar = typevar_at(schema, exc.pos)
    if typevar is not None and "." in typevar.name:
        # A dotted name is how registered opaque types are spelled (torch._library.opaque_object); torch
        # resolves those before type variables, so it is fine when the registration runs first.
        return _finding(
            site,
            exc.pos,
            "warning",
            "opaque-type",
            f"'{typevar.name}' is accepted by {where} only if it is registered as an opaque type before the schema is defined",
        )
    return _finding(site, exc.pos, "error", "typevar", f"{exc.msg}; {where} parses schemas with type variables off")


def _context_label(context: str) -> str:
    if context == "cpp":
        return "TORCH_LIBRARY's def"
    return context


def is_name_only(site: SchemaSite) -> bool:
    """A C++ ``def("name", fn)`` literal that is only an operator name (torch infers the schema)."""
    from .errors import SchemaError
    from .schema import parse_operator_name

    if site.context != "cpp":
        return False
    try:
        parse_operator_name(site.text)
    except SchemaError:
        return False
    return True


# ------------------------------------------------------------------------------------------------
# Files


@dataclass(slots=True)
class _Input:
    path: str
    kind: str
    text: str


class _Reader:
    """Expands paths into readable inputs, remembering I/O errors (reported on stderr, exit 2)."""

    def __init__(self) -> None:
        self.io_errors = 0

    def _io_error(self, message: str) -> None:
        self.io_errors += 1
        print(f"{PROG}: error: {message}", file=sys.stderr)

    def expand(self, paths: Sequence[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for path in paths:
            if path == "-":
                found.append(("-", "text"))
            elif os.path.isdir(path):
                for root, dirs, files in os.walk(path):
                    dirs[:] = sorted(d for d in dirs if d[:1] != "." and d not in _SKIP_DIRS)
                    for name in sorted(files):
                        full = os.path.join(root, name)
                        kind = kind_for_path(full, explicit=False)
                        if kind is not None:
                            found.append((full, kind))
            elif os.path.exists(path):
                kind = kind_for_path(path, explicit=True)
                found.append((path, kind or "text"))
            else:
                self._io_error(f"cannot read {path}: no such file or directory")
        return found

    def read(self, path: str, kind: str) -> _Input | None:
        try:
            if path == "-":
                return _Input("<stdin>", kind, sys.stdin.read())
            with open(path, encoding="utf-8-sig", newline=None) as handle:  # a BOM is not part of line 1
                return _Input(path, kind, handle.read())
        except UnicodeDecodeError as exc:
            self._io_error(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
        except OSError as exc:
            self._io_error(f"cannot read {path}: {exc.strerror or exc}")
        return None


def _iter_sites(reader: _Reader, paths: Sequence[str], quiet: bool) -> Iterator[tuple[list[SchemaSite], list[Finding]]]:
    files = reader.expand(paths)
    with Progress(len(files), "checking files", quiet=quiet) as progress:
        for path, kind in files:
            item = reader.read(path, kind)
            if item is not None:
                sites, problems = read_sites(item.path, item.text, item.kind)
                lines = sites[0].lines if sites else item.text.split("\n")
                progress.clear()  # findings are printed while the caller consumes this item
                yield [s for s in sites if not is_name_only(s)], [_problem_finding(p, lines) for p in problems]
            progress.advance()


def _emit(finding: Finding, fmt: str) -> None:
    if fmt == "json":
        print(finding.as_json())
    else:
        print(render_text(finding))


def _promote(finding: Finding, strict: bool) -> Finding:
    return replace(finding, severity="error") if strict and finding.severity == "warning" else finding


def check_command(paths: Sequence[str], *, strict: bool, fmt: str, quiet: bool) -> int:
    """``schema check``: report findings for every schema in ``paths`` (torch's registry when empty)."""
    if not paths:
        return _check_torch(strict=strict, fmt=fmt, quiet=quiet)
    reader = _Reader()
    counts: Counter[str] = Counter()
    n_schemas = 0
    for sites, problems in _iter_sites(reader, paths, quiet):
        for finding in problems:
            finding = _promote(finding, strict)
            counts[finding.severity] += 1
            _emit(finding, fmt)
        for site in sites:
            n_schemas += 1
            for finding in check_site(site).findings:
                finding = _promote(finding, strict)
                counts[finding.severity] += 1
                _emit(finding, fmt)
    if not quiet:
        summary = f"checked {_plural(n_schemas, 'schema')}: {_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}"
        print(summary, file=sys.stderr if fmt == "json" else sys.stdout)
    if reader.io_errors:
        return 2
    return 1 if counts["error"] else 0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ------------------------------------------------------------------------------------------------
# The embedded default: every schema registered in the installed torch


class _LinePositions(Sequence[tuple[int, int]]):
    """Positions of a schema that is the whole of line ``line``: column = offset + 1."""

    def __init__(self, line: int, length: int) -> None:
        self.line = line
        self.length = length

    def __len__(self) -> int:
        return self.length + 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i <= self.length:
            raise IndexError(i)
        return (self.line, i + 1)


@dataclass(slots=True)
class TorchSummary:
    total: int
    parsed: int
    names_agree: int
    prints_agree: int
    torch_reparses: int
    errors: int
    warnings: int
    by_code: Counter[str]
    version: str

    def lines(self) -> list[str]:
        out = [
            f"checked {self.total} schemas registered in torch {self.version}",
            f"  parsed:                 {self.parsed}/{self.total}",
            f"  argument names agree:   {self.names_agree}/{self.total}",
            f"  printed as torch does:  {self.prints_agree}/{self.total}",
            f"  torch re-parses ours:   {self.torch_reparses}/{self.total}",
            f"  {_plural(self.errors, 'error')}, {_plural(self.warnings, 'warning')}",
        ]
        for code, n in sorted(self.by_code.items()):
            out.append(f"    {code}: {n}")
        return out


def torch_schema_sites() -> list[tuple[Any, SchemaSite]]:
    """(torch schema, site) for every schema registered in the installed torch, in registry order."""
    import torch

    schemas = torch._C._jit_get_all_schemas()
    texts = [str(s) for s in schemas]  # the 'file' of the no-path run: line i is the i-th schema
    return [
        (s, SchemaSite("<torch>", text, _LinePositions(i, len(text)), "parse_schema", texts))
        for i, (s, text) in enumerate(zip(schemas, texts), 1)
    ]


def check_torch(*, strict: bool = False, quiet: bool = True, emit: Any = None) -> TorchSummary:
    """Check every schema registered in torch; ``emit(finding)`` is called for each finding."""
    import torch

    pairs = torch_schema_sites()
    counts: Counter[str] = Counter()
    by_code: Counter[str] = Counter()
    parsed = names_agree = prints_agree = reparses = 0
    with Progress(len(pairs), "checking torch schemas", quiet=quiet) as progress:
        for torch_schema, site in pairs:
            result = check_site(site)
            findings = [_promote(f, strict) for f in result.findings]
            if result.schema is not None:
                parsed += 1
                ours = result.schema
                if [a.name for a in ours.arguments] == [a.name for a in torch_schema.arguments]:
                    names_agree += 1
                else:
                    findings.append(_promote(_finding(site, 0, "error", "torch-names", "argument names differ from torch's"), strict))
                printed = str(ours)
                if printed == site.text:
                    prints_agree += 1
                else:
                    findings.append(_finding(site, _first_difference(printed, site.text), "error", "torch-print", f"printed differently from torch: {printed}"))
                try:
                    same = torch._C.parse_schema(printed) == torch_schema
                except RuntimeError as exc:
                    same = False
                    findings.append(_finding(site, 0, "error", "torch-reparse", f"torch cannot parse our print: {str(exc).splitlines()[0]}"))
                if same:
                    reparses += 1
            for finding in findings:
                counts[finding.severity] += 1
                by_code[f"{finding.severity} {finding.code}"] += 1
                if emit is not None:
                    progress.clear()
                    emit(finding)
            progress.advance()
    return TorchSummary(
        len(pairs), parsed, names_agree, prints_agree, reparses, counts["error"], counts["warning"], by_code, torch.__version__
    )


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _check_torch(*, strict: bool, fmt: str, quiet: bool) -> int:
    summary = check_torch(strict=strict, quiet=quiet, emit=lambda f: _emit(f, fmt))
    if not quiet:
        out = sys.stderr if fmt == "json" else sys.stdout
        for line in summary.lines():
            print(line, file=out)
    return 1 if summary.errors else 0


# ------------------------------------------------------------------------------------------------
# format and names


def format_command(paths: Sequence[str], *, check: bool, quiet: bool) -> int:
    """``schema format``: print canonical forms, or with ``check`` report the non-canonical ones."""
    reader = _Reader()
    errors = not_canonical = 0
    for sites, problems in _iter_sites(reader, paths, quiet):
        for finding in problems:
            print(render_text(finding), file=sys.stderr)
            errors += finding.severity == "error"
        for site in sites:
            from .errors import SchemaError
            from .schema import parse_schema

            try:
                schema = parse_schema(site.text, allow_nameless=site.context in NAMELESS)
            except SchemaError as exc:
                print(render_text(_finding(site, exc.pos, "error", "syntax", exc.msg)), file=sys.stderr)
                errors += 1
                continue
            canonical = str(schema)
            if not check:
                print(canonical)
            elif canonical != site.text:
                not_canonical += 1
                offset = _first_difference(canonical, site.text)
                print(render_text(_finding(site, offset, "error", "not-canonical", "schema is not in canonical form")))
                print(f"  canonical: {canonical}")
    if reader.io_errors:
        return 2
    return 1 if errors or not_canonical else 0


def print_argument_error(label: str, exc: PbpSyntaxError) -> None:
    """An error in a command-line argument, in the same ``where: error: message`` + caret form as files."""
    print(f"{label}:{exc.lineno}:{exc.colno}: error: {exc.msg}", file=sys.stderr)
    print(exc.caret(), file=sys.stderr)


def names_command(text: str) -> int:
    """``schema names``: the argument names of one schema, one per line."""
    from .errors import SchemaError
    from .schema import extract_names_from_schema

    try:
        names = extract_names_from_schema(text)
    except SchemaError as exc:
        print_argument_error("<schema>", exc)
        return 1
    for name in names:
        print(name)
    return 0

