"""``pbp-serialize schema format`` and ``schema names``, and the caret form of a bad command-line argument.

``format`` prints each schema of its inputs in canonical form (our printer's output, torch's print; with
``--shortest``, every double in its shortest spelling, which reads back to the same value), or with ``--check``
reports those written in neither form; problems and unreadable files go to stderr in the text form of
:mod:`._findings`. Exit codes: 2 when an input could not be read or the configuration is invalid, else 1
when a schema did not parse or (``--check``) was not canonical, else 0. ``names`` prints the argument
names of one schema given on the command line.

Imports: :mod:`._check` (one schema site checked as ``schema check`` does), :mod:`._files`,
:mod:`._findings`, :mod:`._report`, and the library's :mod:`..schema` and :mod:`..errors`; never torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._check import check_site
from ._files import Reader, iter_files, load_or_report
from ._findings import first_difference, problem_finding, render_text, site_finding
from ._report import Reporter

if TYPE_CHECKING:
    from ..errors import PbpSyntaxError

__all__ = ["format_command", "names_command", "print_argument_error"]


def format_command(
    paths: Sequence[str],
    *,
    check: bool,
    quiet: bool,
    require_name: bool = False,
    exclude: Sequence[str] = (),
    config: str | None = None,
    schema_functions: Sequence[str] = (),
    shortest: bool = False,
) -> int:
    """``schema format``: print canonical forms (torch's print, or with ``shortest`` the same with every double
    in its shortest spelling), or with ``check`` report the schemas written in neither form, showing both."""
    from ..schema import print_shortest

    reporter = Reporter("text", quiet=True, stdout=sys.stderr)  # problems and I/O errors go to stderr
    loaded = load_or_report(config, exclude, reporter, schema_functions)
    if loaded is None:
        return 2
    reader = Reader(reporter, loaded)
    errors = not_canonical = 0
    for source in iter_files(reader, paths, quiet):
        for problem in source.problems:
            if problem.fatal:
                reader.io_error(f"{problem.path}:{problem.line}:{problem.column}: {problem.message}", problem.path)
                continue
            print(render_text(problem_finding(problem, source.lines)), file=sys.stderr)
            errors += problem.severity == "error"
        for site in source.sites:
            result = check_site(site, require_name=require_name)
            if result.skipped:
                continue
            blocking = [f for f in result.findings if f.code in ("syntax", "missing-name")]
            if blocking or result.schema is None:
                for finding in blocking:
                    print(render_text(finding), file=sys.stderr)
                errors += 1
                continue
            canonical = str(result.schema)
            short = print_shortest(result.schema)
            if not check:
                print(short if shortest else canonical)
            elif site.text not in (canonical, short):
                not_canonical += 1
                offset = first_difference(short if shortest else canonical, site.text)
                print(render_text(site_finding(site, offset, "error", "not-canonical", "schema is not in canonical form")))
                print(f"  canonical: {canonical}")
                if short != canonical:  # the spelling people write, which reads back to the same values
                    print(f"  shortest:  {short}")
    if reader.io_errors:
        return 2
    return 1 if errors or not_canonical else 0


def print_argument_error(label: str, exc: PbpSyntaxError) -> None:
    """An error in a command-line argument, in the same ``where: error: message`` + caret form as files."""
    print(f"{label}:{exc.lineno}:{exc.colno}: error: {exc.msg}", file=sys.stderr)
    print(exc.caret(), file=sys.stderr)


def names_command(text: str) -> int:
    """``schema names``: the argument names of one schema, one per line."""
    from ..errors import SchemaError
    from ..schema import extract_names_from_schema

    try:
        names = extract_names_from_schema(text)
    except SchemaError as exc:
        print_argument_error("<schema>", exc)
        return 1
    for name in names:
        print(name)
    return 0
