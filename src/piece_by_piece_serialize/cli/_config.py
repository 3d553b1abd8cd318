"""Configuration of ``pbp-serialize schema check``: ``[tool.pbp-serialize]`` in pyproject.toml and ``--exclude``.

The table, found in the nearest ``pyproject.toml`` from the current directory upwards that has one (or
the file named with ``--config``), takes four keys::

    [tool.pbp-serialize]
    include = ["csrc/**", "*.py"]          # which files a folder walk reads (default: every known suffix)
    exclude = ["third_party", "**/*_template.cpp"]
    severity = { dispatcher-ignores = "off", misread-number = "error" }
    schema-functions = ["register_fake_tosa_op", "bind_pattern_to_op"]  # the project's calls that take a schema

Patterns are gitignore-like globs, relative to the directory of the pyproject.toml (of the current
directory for ``--exclude``): a pattern without '/' matches a file or folder name at any depth, one with
'/' is anchored; ``*`` and ``?`` stay within a name, ``**`` spans folders, ``[...]`` is a character
class; a pattern that matches a folder matches everything below it. ``exclude`` applies to files named on
the command line too, so the pre-commit hook honours it. Unknown keys, rule ids and severities are
errors (exit 2), never ignored.

Invariants: nothing here reads a schema; a configuration error is a :class:`ConfigError` with a message
that names the file and the key.

Imports: :mod:`._rules` only (and ``tomllib``, or ``tomli`` before Python 3.11); nothing that reads files for
schemas or parses them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._rules import RULES, SEVERITIES

__all__ = ["Config", "ConfigError", "Glob", "compile_glob", "load_config"]

TABLE = "tool.pbp-serialize"
_KEYS = ("include", "exclude", "severity", "schema-functions")


class ConfigError(Exception):
    """A configuration that cannot be used; ``str()`` is the message for the user."""


@dataclass(frozen=True, slots=True)
class Glob:
    """One include/exclude pattern, compiled, with the folder it is relative to."""

    pattern: str
    root: str
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        """Whether ``path`` (any form; made absolute first) is matched, itself or through a parent folder."""
        try:
            rel = os.path.relpath(os.path.abspath(path), self.root)
        except ValueError:  # another drive (Windows): only name patterns can match
            rel = os.path.abspath(path)
        rel = rel.replace(os.sep, "/")
        return self.regex.fullmatch(rel) is not None


def compile_glob(pattern: str, root: str) -> Glob:
    """Compile a gitignore-like pattern relative to ``root`` (see the module docstring)."""
    body = pattern.strip()
    if body.startswith("./"):
        body = body[2:]
    anchored = "/" in body.rstrip("/")
    body = body.strip("/")
    if not body:
        raise ConfigError(f"empty pattern {pattern!r}")
    tail = ""
    if body.endswith("/**"):
        body, tail = body[:-3], "(?:/.*)?"
    out: list[str] = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "[" and body.find("]", i + 2) > 0:
            close = body.find("]", i + 2)
            inner = body[i + 1 : close]
            negate = inner[:1] in ("!", "^")
            inner = inner[1:] if negate else inner
            out.append("[" + ("^" if negate else "") + inner.replace("\\", "\\\\").replace("/", "") + "]")
            i = close + 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    # a match on a folder covers everything below it
    regex = re.compile(prefix + "".join(out) + (tail or "(?:/.*)?"), re.DOTALL)
    return Glob(pattern, os.path.abspath(root), regex)


@dataclass(frozen=True, slots=True)
class Config:
    """What to read and how loud each rule is. ``source`` is the file it came from (None: defaults)."""

    source: str | None = None
    include: tuple[Glob, ...] = ()
    exclude: tuple[Glob, ...] = ()
    severity: Mapping[str, str] = field(default_factory=dict)
    schema_functions: tuple[str, ...] = ()

    def excluded(self, path: str) -> bool:
        return any(glob.matches(path) for glob in self.exclude)

    def included(self, path: str) -> bool:
        """Whether a file met in a folder walk is read (with no ``include``: decided by its suffix)."""
        return any(glob.matches(path) for glob in self.include)

    def with_schema_functions(self, names: Iterable[str]) -> Config:
        """This configuration plus command-line ``--schema-function`` names (comma-separated lists allowed)."""
        extra = tuple(n.strip() for item in names for n in item.split(",") if n.strip())
        return replace(self, schema_functions=self.schema_functions + extra) if extra else self

    def with_excludes(self, patterns: Iterable[str], root: str) -> Config:
        """This configuration plus command-line ``--exclude`` patterns (comma-separated lists allowed)."""
        extra = tuple(compile_glob(p, root) for item in patterns for p in item.split(",") if p.strip())
        return replace(self, exclude=self.exclude + extra)


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError("reading [tool.pbp-serialize] needs Python 3.11 or the 'tomli' package") from None
    try:
        table: dict[str, Any] = tomllib.loads(text)
        return table
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})") from None


def _table(path: str) -> dict[str, Any] | None:
    """The [tool.pbp-serialize] table of a TOML file, or None when it has none."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if "pbp-serialize" not in text:
        return None  # someone else's pyproject.toml: not ours to parse (or to fail on)
    try:
        doc = _toml_loads(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    table = doc.get("tool", {}).get("pbp-serialize")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [{TABLE}] must be a table")
    return table


def _find(start: str) -> tuple[str, dict[str, Any]] | None:
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            table = _table(candidate)
            if table is not None:
                return candidate, table
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _patterns(path: str, key: str, value: object, root: str) -> tuple[Glob, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [{TABLE}] {key} must be a list of strings (glob patterns)")
    try:
        return tuple(compile_glob(v, root) for v in value)
    except ConfigError as exc:
        raise ConfigError(f"{path}: [{TABLE}] {key}: {exc}") from None


def _severity(path: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [{TABLE}] severity must be a table of rule = \"error\" | \"warning\" | \"note\" | \"off\"")
    out: dict[str, str] = {}
    for rule, level in value.items():
        if rule not in RULES:
            raise ConfigError(f"{path}: [{TABLE}] severity: unknown rule '{rule}' (known: {', '.join(RULES)})")
        if level not in SEVERITIES:
            raise ConfigError(f"{path}: [{TABLE}] severity: '{rule}' must be one of {', '.join(SEVERITIES)}, got {level!r}")
        out[rule] = level
    return out


def load_config(path: str | None = None, *, search_from: str = ".") -> Config:
    """The configuration from ``path`` (a TOML file with a [tool.pbp-serialize] table), or from the nearest
    pyproject.toml above ``search_from`` that has one; defaults when there is none.

    :raises ConfigError: for an unreadable or invalid file, an unknown key, rule id or severity.
    """
    if path is not None:
        table = _table(path)
        if table is None:
            raise ConfigError(f"{path}: no [{TABLE}] table")
        found: tuple[str, dict[str, Any]] | None = (path, table)
    else:
        found = _find(search_from)
    if found is None:
        return Config()
    source, table = found
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{source}: [{TABLE}] unknown key '{unknown[0]}' (known: {', '.join(_KEYS)})")
    root = os.path.dirname(os.path.abspath(source))
    return Config(
        source=source,
        include=_patterns(source, "include", table.get("include", []), root),
        exclude=_patterns(source, "exclude", table.get("exclude", []), root),
        severity=_severity(source, table.get("severity", {})),
        schema_functions=_function_names(source, table.get("schema-functions", [])),
    )


def _function_names(path: str, value: object) -> tuple[str, ...]:
    """``schema-functions``: names of calls (``helper``, ``module.helper``, ``ns::helper``) whose schema is read."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{path}: [{TABLE}] schema-functions must be a list of function names")
    return tuple(v.strip() for v in value)
