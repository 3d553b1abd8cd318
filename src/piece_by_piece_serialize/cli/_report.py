"""Where ``schema check`` findings go: text, JSON lines, GitHub workflow commands or one SARIF 2.1.0 document.

Every format carries the same findings and the same exit code (0 clean, 1 findings, 2 usage or I/O
error). ``text`` prints ``path:line:col: severity[code]: message`` with the source line and a caret, and the
summary on stdout; the machine formats keep stdout for records and put the summary on stderr. Files that
cannot be read are always named on stderr; ``github`` also annotates them and ``sarif`` lists them as
tool execution notifications of a failed invocation.

``github``: one ``::error file=PATH,line=N,col=M,title=...::message`` (``::warning``, ``::notice`` for
notes) per finding, with the workflow-command escapes (``%``, CR, LF; also ``:`` and ``,`` in properties).
``json`` with ``--list-sites`` also writes a ``{"record": "site", ...}`` line for every schema site read, so
that what was (and was not) checked can be audited (finding lines are unchanged and have no ``record`` key).
``sarif``: one document with the tool, every rule (id, summary, configured level), results with
``physicalLocation`` (``uri`` relative to the current directory through the ``%SRCROOT%`` base, 1-based
``region`` counted in Unicode code points) and the invocation's exit code. Validated against the OASIS
schema in ``tests/cli/test_formats.py``.

Imports: :mod:`._findings` (the records and their text form) and :mod:`._rules`, and the package's
``__version__`` for SARIF; never :mod:`._check`, which imports this module.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from ._findings import render_text
from ._prog import PROG
from ._rules import RULES

if TYPE_CHECKING:
    from ._findings import Finding
    from .sources import SchemaSite

__all__ = ["FORMATS", "Reporter"]

FORMATS = ("text", "json", "github", "sarif")
_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_GITHUB_LEVELS = {"error": "error", "warning": "warning", "note": "notice"}
_NOT_FILES = ("<stdin>", "<torch>")


def _relative(path: str) -> str | None:
    """``path`` relative to the current directory with '/' separators; None for stdin and the torch run."""
    if path in _NOT_FILES:
        return None
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        rel = os.path.abspath(path)
    return rel.replace(os.sep, "/")


def _github_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


class Reporter:
    """Writes findings in one format; call :meth:`close` once with the exit code."""

    def __init__(
        self,
        fmt: str,
        *,
        quiet: bool = False,
        severities: Mapping[str, str] | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        list_sites: bool = False,
    ) -> None:
        self.fmt = fmt
        self.quiet = quiet
        self.list_sites = list_sites
        self.severities = dict(severities or {})
        self.out = sys.stdout if stdout is None else stdout
        self.err = sys.stderr if stderr is None else stderr
        self._results: list[dict[str, Any]] = []
        self._notifications: list[dict[str, Any]] = []

    # -- records ---------------------------------------------------------------------------------

    def finding(self, finding: Finding) -> None:
        """One finding (a ``_findings.Finding``)."""
        if self.fmt == "text":
            print(render_text(finding), file=self.out)
        elif self.fmt == "json":
            print(finding.as_json(), file=self.out)
        elif self.fmt == "github":
            print(self._github(_GITHUB_LEVELS[finding.severity], finding.path, finding.line, finding.column, finding.code, finding.message), file=self.out)
        else:
            self._results.append(self._sarif_result(finding))

    def site(self, site: SchemaSite, *, checked: bool) -> None:
        """One schema site read (JSON with ``--list-sites`` only): where it is, where torch gets it from, its
        text, and whether it was checked (a bare operator name, whose schema torch infers, is not)."""
        if not self.list_sites or self.fmt != "json":
            return
        line, column = site.where(0)
        record = {"record": "site", "path": site.path, "line": line, "column": column, "context": site.context, "checked": checked, "schema": site.text}
        print(json.dumps(record, ensure_ascii=False), file=self.out)

    def io_error(self, message: str, path: str | None = None, line: int = 0, column: int = 0) -> None:
        """A file or folder that could not be read (the run will exit 2): always named on stderr."""
        print(f"{PROG}: error: {message}", file=self.err)
        if self.fmt == "github":
            print(self._github("error", path, line, column, None, message), file=self.out)
        elif self.fmt == "sarif":
            notification: dict[str, Any] = {"level": "error", "message": {"text": message}}
            location = self._sarif_location(path, line, column) if path else None
            if location is not None:
                notification["locations"] = [location]
            self._notifications.append(notification)

    def summary(self, lines: Sequence[str]) -> None:
        if self.quiet:
            return
        stream = self.out if self.fmt == "text" else self.err
        for line in lines:
            print(line, file=stream)

    def close(self, exit_code: int) -> None:
        if self.fmt == "sarif":
            json.dump(self._sarif_document(exit_code), self.out, indent=2, ensure_ascii=False)
            self.out.write("\n")

    # -- GitHub ----------------------------------------------------------------------------------

    @staticmethod
    def _github(level: str, path: str | None, line: int, column: int, code: str | None, message: str) -> str:
        props: list[str] = []
        rel = _relative(path) if path else None
        if rel is not None:
            props.append(f"file={_github_property(rel)}")
            if line:
                props.append(f"line={line}")
                if column:
                    props.append(f"col={column}")
        elif path:
            message = f"{path}:{line}:{column}: {message}" if line else f"{path}: {message}"
        props.append("title=" + _github_property(f"{PROG} ({code})" if code else PROG))
        return f"::{level} {','.join(props)}::{_github_data(message)}"

    # -- SARIF -----------------------------------------------------------------------------------

    @staticmethod
    def _sarif_location(path: str | None, line: int, column: int) -> dict[str, Any] | None:
        rel = _relative(path) if path else None
        if rel is None:
            return None
        if rel.startswith("../"):
            artifact: dict[str, Any] = {"uri": Path(os.path.abspath(rel)).as_uri()}
        else:
            artifact = {"uri": quote(rel, safe="/"), "uriBaseId": "%SRCROOT%"}
        physical: dict[str, Any] = {"artifactLocation": artifact}
        if line:
            region: dict[str, Any] = {"startLine": line}
            if column:
                region["startColumn"] = column
            physical["region"] = region
        return {"physicalLocation": physical}

    def _sarif_result(self, finding: Finding) -> dict[str, Any]:
        rule_ids = list(RULES)
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "level": finding.severity,
            "message": {"text": finding.message},
        }
        if finding.code in RULES:
            result["ruleIndex"] = rule_ids.index(finding.code)
        location = self._sarif_location(finding.path, finding.line, finding.column)
        if location is not None:
            location["physicalLocation"].setdefault("region", {})["snippet"] = {"text": finding.source_line}
            result["locations"] = [location]
        if finding.schema is not None:
            result["properties"] = {"schema": finding.schema}
        return result

    def _sarif_document(self, exit_code: int) -> dict[str, Any]:
        from .. import __version__

        rules = []
        for rule in RULES.values():
            level = self.severities.get(rule.id, rule.level)
            configuration: dict[str, Any] = {"level": "none" if level == "off" else level}
            if level == "off":
                configuration["enabled"] = False
            rules.append(
                {
                    "id": rule.id,
                    "shortDescription": {"text": rule.summary},
                    "defaultConfiguration": configuration,
                }
            )
        invocation: dict[str, Any] = {"executionSuccessful": exit_code != 2, "exitCode": exit_code}
        if self._notifications:
            invocation["toolExecutionNotifications"] = self._notifications
        run = {
            "tool": {"driver": {"name": PROG, "version": __version__, "semanticVersion": __version__, "rules": rules}},
            "invocations": [invocation],
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(os.getcwd()).as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": self._results,
        }
        return {"$schema": _SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
