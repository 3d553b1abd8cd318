"""The engine behind ``pbp-serialize schema check``: each schema site parsed and linted, severities and
suppressions applied, and the no-path run over every schema registered in torch.

Schemas come from :mod:`.sources` (which maps every character back to the file), are parsed with
:func:`piece_by_piece_serialize.schema.parse_schema` and linted by :mod:`._lint`; every problem becomes a
:class:`~._findings.Finding`. Severities are an ``error`` (fails the run), a ``warning`` (fails it under
``--strict``) or a ``note`` (never fails it: a schema a static read cannot check, such as a Jinja
template). The configuration (:mod:`._config`) sets each rule's severity and the files read; a ``pbp:
ignore[rule]`` comment on a line of the call silences that rule there, and one that silences nothing is
itself reported. With no path, ``schema check`` runs over every schema registered in the installed torch
and also compares our parser with torch's on each one (names, printed form, torch's re-parse of our
print).

Invariants: user errors and I/O errors are reported, never raised; the exit code is 2 when a path could
not be read or parsed or the configuration is invalid, else 1 when an error was reported (warnings count
with ``--strict``), else 0, in every output format. torch is imported only for the no-path run.

Imports: :mod:`._contexts`, :mod:`._files`, :mod:`._findings`, :mod:`._progress`, :mod:`._report`,
:mod:`._rules` and :mod:`.sources`; :mod:`._lint` and the library's :mod:`..schema` and :mod:`..errors`
when a schema is first checked. Never :mod:`._format` or the argparse layer, which import this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ._contexts import CONTEXT_CPP, CONTEXT_TEXT, CONTEXT_YAML, NAME_ONLY, NAME_OPTIONAL, NAMELESS
from ._files import Reader, iter_files, load_or_report
from ._findings import Finding, first_difference, problem_finding, site_finding, source_line
from ._progress import Progress
from ._report import Reporter
from ._rules import RULES
from .sources import LinePositions, SchemaSite, SourceFile

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    import torch

    from ..errors import SchemaError
    from ..schema import FunctionSchema
    from .sources import Suppression

__all__ = ["SiteResult", "TorchSummary", "check_command", "check_site", "check_torch", "torch_schema_sites"]


# ------------------------------------------------------------------------------------------------
# Checking one schema site


@dataclass(slots=True)
class SiteResult:
    findings: list[Finding]
    schema: FunctionSchema | None = None  # the parsed schema, when it parsed
    skipped: bool = False  # a bare operator name where torch infers the schema (C++ m.def("name", fn))


def _context_label(context: str) -> str:
    if context == CONTEXT_CPP:
        return "TORCH_LIBRARY's def"
    return context


def _needs_name_message(context: str) -> str:
    if context == CONTEXT_TEXT:
        return "a schema needs an operator name before its argument list (--require-name is set), like 'myops::f(Tensor x) -> Tensor'"
    if context == CONTEXT_YAML:
        return "a 'func:' entry needs an operator name before its argument list, like 'f(Tensor self) -> Tensor'"
    return f"{_context_label(context)} needs an operator name before the argument list, like 'f(Tensor x) -> Tensor'"


def check_site(site: SchemaSite, *, require_name: bool = False) -> SiteResult:
    """Parse and lint one schema site; every problem becomes a finding at its original position.

    Plain-text schemas may be nameless (``(Tensor x) -> Tensor``, the form ``infer_schema`` writes)
    unless ``require_name``; other contexts need a name exactly where torch does.
    """
    from ..errors import SchemaError
    from ..schema import parse_operator_name, parse_schema
    from ._lint import has_typevar, lint_schema

    try:
        # one parse for every context: whether a nameless schema is allowed is decided below, with a
        # message in the terms of where the schema was written
        schema = parse_schema(site.text, allow_typevars=True, allow_nameless=True)
    except SchemaError as exc:
        if site.context in NAME_ONLY:
            try:
                parse_operator_name(site.text)
            except SchemaError:
                pass
            else:
                return SiteResult([], skipped=True)
        return SiteResult([site_finding(site, exc.pos, "error", "syntax", exc.msg)])
    findings: list[Finding] = []
    needs_name = site.context not in NAMELESS and (site.context not in NAME_OPTIONAL or (require_name and site.context == CONTEXT_TEXT))
    if needs_name and not schema.name.name:
        try:
            parse_schema(site.text, allow_typevars=True, allow_nameless=False)
            offset = 0  # pragma: no cover - a nameless schema always fails this parse
        except SchemaError as exc:
            offset = exc.pos
        findings.append(site_finding(site, offset, "error", "missing-name", _needs_name_message(site.context)))
    if site.typevars_off and has_typevar(schema):
        try:
            parse_schema(site.text, allow_typevars=False, allow_nameless=True)
        except SchemaError as exc:
            findings.append(_typevar_finding(site, schema, exc))
    for lint in lint_schema(schema, site.text, site.context):
        message = lint.message
        if lint.related is not None:
            line, column = site.where(lint.related)  # the other position, in the file's terms
            message += f"; the first is at line {line}, column {column}"
        findings.append(site_finding(site, lint.offset, lint.severity, lint.code, message))
    findings.sort(key=lambda f: (f.line, f.column))
    return SiteResult(findings, schema)


def _typevar_finding(site: SchemaSite, schema: FunctionSchema, exc: SchemaError) -> Finding:
    from ._lint import typevar_at

    where = _context_label(site.context)
    typevar = typevar_at(schema, exc.pos)
    if typevar is not None and "." in typevar.name:
        # A dotted name is how registered opaque types are spelled (torch._library.opaque_object); torch
        # resolves those before type variables, so it is fine when the registration runs first.
        return site_finding(
            site,
            exc.pos,
            "warning",
            "opaque-type",
            f"'{typevar.name}' is accepted by {where} only if it is registered as an opaque type before the schema is defined",
        )
    return site_finding(site, exc.pos, "error", "typevar", f"{exc.msg}; {where} parses schemas with type variables off")


@dataclass(slots=True)
class _Options:
    strict: bool
    require_name: bool
    severity: dict[str, str]


def _file_findings(source: SourceFile, reader: Reader, options: _Options) -> tuple[list[Finding], int]:
    """All findings of one file after severities and suppressions, in position order; schemas checked (each
    site is also handed to ``reader.reporter.site``, which lists them under ``--list-sites``)."""
    raw: list[Finding] = []
    for problem in source.problems:
        if problem.fatal:
            reader.io_error(f"{problem.path}:{problem.line}:{problem.column}: {problem.message}", problem.path, problem.line, problem.column)
        else:
            raw.append(problem_finding(problem, source.lines))
    checked = 0
    for site in source.sites:
        result = check_site(site, require_name=options.require_name)
        reader.reporter.site(site, checked=not result.skipped)
        if not result.skipped:
            checked += 1
            raw.extend(result.findings)
    findings = [f for f in (_configured(f, options) for f in raw) if f is not None]
    findings = _apply_suppressions(source, findings, options)
    findings.sort(key=lambda f: (f.line, f.column))
    return findings, checked


def _configured(finding: Finding, options: _Options) -> Finding | None:
    level = options.severity.get(finding.code)
    if level == "off":
        return None
    if level is not None and level != finding.severity:
        finding = replace(finding, severity=level)
    if options.strict and finding.severity == "warning":
        finding = replace(finding, severity="error")
    return finding


def _apply_suppressions(source: SourceFile, findings: list[Finding], options: _Options) -> list[Finding]:
    if not source.suppressions:
        return findings
    by_line: dict[int, list[Suppression]] = {}
    for directive in source.suppressions:
        by_line.setdefault(directive.line, []).append(directive)
    used: set[tuple[int, int, str]] = set()
    kept: list[Finding] = []
    for finding in findings:
        lines = {finding.line}
        if finding.span[0]:
            lines.update(range(finding.span[0], finding.span[1] + 1))
        hit = None
        for line in sorted(lines):
            for directive in by_line.get(line, ()):
                if finding.code in directive.rules:
                    hit = (directive.line, directive.column, finding.code)
                    break
            if hit:
                break
        if hit:
            used.add(hit)
        else:
            kept.append(finding)
    for directive in source.suppressions:
        if not directive.rules:
            message = f"'{directive.text}' silences nothing: write the rules in brackets, like 'pbp: ignore[misread-number]'"
        else:
            unknown = [r for r in directive.rules if r not in RULES]
            unused = [r for r in directive.rules if r in RULES and (directive.line, directive.column, r) not in used]
            if unknown:
                message = f"unknown rule '{unknown[0]}' in '{directive.text}'"
            elif unused:
                message = f"unused suppression: no {', '.join(repr(r) for r in unused)} finding on this line"
            else:
                continue
        finding = Finding(source.path, directive.line, directive.column, "warning", "unused-suppression", message, source_line(source.lines, directive.line))
        configured = _configured(finding, options)
        if configured is not None:
            kept.append(configured)
    return kept


def _summary(n_schemas: int, counts: Counter[str]) -> str:
    summary = f"checked {_plural(n_schemas, 'schema')}: {_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}"
    if counts["note"]:
        summary += f", {_plural(counts['note'], 'note')}"
    return summary


def check_command(
    paths: Sequence[str],
    *,
    strict: bool,
    fmt: str,
    quiet: bool,
    require_name: bool = False,
    exclude: Sequence[str] = (),
    config: str | None = None,
    schema_functions: Sequence[str] = (),
    list_sites: bool = False,
) -> int:
    """``schema check``: report findings for every schema in ``paths`` (torch's registry when empty); with
    ``list_sites`` (JSON only), a record for every schema site read as well, checked or not."""
    reporter = Reporter(fmt, quiet=quiet, list_sites=list_sites)
    loaded = load_or_report(config, exclude, reporter, schema_functions)
    if loaded is None:
        reporter.close(2)
        return 2
    reporter.severities = dict(loaded.severity)
    if not paths:
        return _check_torch(strict=strict, reporter=reporter, quiet=quiet)
    reader = Reader(reporter, loaded)
    options = _Options(strict, require_name, dict(loaded.severity))
    counts: Counter[str] = Counter()
    n_schemas = 0
    for source in iter_files(reader, paths, quiet):
        findings, checked = _file_findings(source, reader, options)
        n_schemas += checked
        for finding in findings:
            counts[finding.severity] += 1
            reporter.finding(finding)
    reporter.summary([_summary(n_schemas, counts)])
    code = 2 if reader.io_errors else 1 if counts["error"] else 0
    reporter.close(code)
    return code


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ------------------------------------------------------------------------------------------------
# The embedded default: every schema registered in the installed torch


@dataclass(slots=True)
class TorchSummary:
    total: int
    parsed: int
    names_agree: int
    prints_agree: int
    torch_reparses: int
    torch_rejects_own: int
    errors: int
    warnings: int
    by_code: Counter[str]
    version: str

    @property
    def disagreements(self) -> int:
        """Errors that say our parser and torch's differ (the other errors are lint findings in torch's own
        schemas: its registry holds ``static_runtime::clamp_nan_to_num(..., float? posinf, float? posinf)``)."""
        return sum(n for key, n in self.by_code.items() if key.startswith("error torch-"))

    def lines(self) -> list[str]:
        out = [
            f"checked {self.total} schemas registered in torch {self.version}",
            f"  parsed:                 {self.parsed}/{self.total}",
            f"  argument names agree:   {self.names_agree}/{self.total}",
            f"  printed as torch does:  {self.prints_agree}/{self.total}",
            f"  torch re-parses ours:   {self.torch_reparses}/{self.total}",
        ]
        if self.torch_rejects_own:
            # Not ours to fix: such a schema was registered from Python with a type its printed form cannot name.
            out.append(f"  torch rejects its own print of {self.torch_rejects_own} (so do we)")
        out += [
            f"  {_plural(self.errors, 'error')}, {_plural(self.warnings, 'warning')}",
        ]
        for code, n in sorted(self.by_code.items()):
            out.append(f"    {code}: {n}")
        return out


def torch_schema_sites() -> list[tuple[torch._C.FunctionSchema, SchemaSite]]:
    """(torch schema, site) for every schema registered in the installed torch, in registry order."""
    import torch

    schemas = torch._C._jit_get_all_schemas()
    texts = [str(s) for s in schemas]  # the 'file' of the no-path run: line i is the i-th schema
    return [
        (s, SchemaSite("<torch>", text, LinePositions(i, len(text)), "parse_schema", texts, (i, i)))
        for i, (s, text) in enumerate(zip(schemas, texts, strict=True), 1)
    ]


def check_torch(*, strict: bool = False, quiet: bool = True, emit: Callable[[Finding], object] | None = None, severity: dict[str, str] | None = None) -> TorchSummary:
    """Check every schema registered in torch; ``emit(finding)`` is called for each finding."""
    import torch

    options = _Options(strict, False, dict(severity or {}))
    pairs = torch_schema_sites()
    counts: Counter[str] = Counter()
    by_code: Counter[str] = Counter()
    parsed = names_agree = prints_agree = reparses = rejects_own = 0
    with Progress(len(pairs), "checking torch schemas", quiet=quiet) as progress:
        for torch_schema, site in pairs:
            result = check_site(site)
            findings = list(result.findings)
            reread, torch_error = _torch_parse(torch, site.text)
            if torch_error is not None:
                # The registry holds schemas whose print torch's own parser refuses (an opaque type prints as
                # 'PyObject', pytorch/pytorch#184209): the oracle is then that we refuse the text as well.
                if result.schema is None:
                    rejects_own += 1
                    findings = [site_finding(site, 0, "note", "torch-own-print", f"torch cannot parse its own print of this schema either: {torch_error}")]
                else:
                    findings.append(site_finding(site, 0, "error", "torch-reparse", f"we parse what torch rejects: {torch_error}"))
            elif result.schema is not None:
                parsed += 1
                ours = result.schema
                if [a.name for a in ours.arguments] == [a.name for a in torch_schema.arguments]:
                    names_agree += 1
                else:
                    findings.append(site_finding(site, 0, "error", "torch-names", "argument names differ from torch's"))
                printed = str(ours)
                if printed == site.text:
                    prints_agree += 1
                else:
                    findings.append(site_finding(site, first_difference(printed, site.text), "error", "torch-print", f"printed differently from torch: {printed}"))
                if printed != site.text:  # else torch has just read this very text
                    reread, torch_error = _torch_parse(torch, printed)
                same = torch_error is None and reread == torch_schema
                if torch_error is not None:
                    findings.append(site_finding(site, 0, "error", "torch-reparse", f"torch cannot parse our print: {torch_error}"))
                if same:
                    reparses += 1
            for finding in findings:
                configured = _configured(finding, options)
                if configured is None:
                    continue
                counts[configured.severity] += 1
                by_code[f"{configured.severity} {configured.code}"] += 1
                if emit is not None:
                    progress.clear()
                    emit(configured)
            progress.advance()
    return TorchSummary(
        len(pairs), parsed, names_agree, prints_agree, reparses, rejects_own, counts["error"], counts["warning"], by_code, torch.__version__
    )


def _torch_parse(torch: ModuleType, text: str) -> tuple[torch._C.FunctionSchema | None, str | None]:
    """``(schema, None)`` from ``torch._C.parse_schema(text)``, or ``(None, the first line of its error)``."""
    try:
        return torch._C.parse_schema(text), None
    except RuntimeError as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return None, lines[0] if lines else type(exc).__name__


def _check_torch(*, strict: bool, reporter: Reporter, quiet: bool) -> int:
    summary = check_torch(strict=strict, quiet=quiet, emit=reporter.finding, severity=reporter.severities)
    reporter.summary(summary.lines())
    code = 1 if summary.errors else 0
    reporter.close(code)
    return code
