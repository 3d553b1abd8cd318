"""The rules of ``pbp-serialize schema check``: every finding code, its default severity and a one-line summary.

One table, read by the checker (severities), the configuration (``[tool.pbp-serialize.severity]`` and
``pbp: ignore[rule]`` may name only these ids) and the SARIF writer (``tool.driver.rules``). Adding a
finding code anywhere else without adding it here fails ``tests/cli/test_rules.py``.

Imports: the standard library only; every other module of the command line may import this one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "SEVERITIES", "Rule"]

# What a rule's severity can be set to; "off" drops its findings.
SEVERITIES = ("error", "warning", "note", "off")


@dataclass(frozen=True, slots=True)
class Rule:
    """A finding code: ``id`` (stable, kebab-case), default ``level`` and a one-line ``summary``."""

    id: str
    level: str
    summary: str


_TABLE = (
    # schemas torch rejects where they are written
    Rule("syntax", "error", "torch cannot parse the schema text"),
    Rule("typevar", "error", "an unknown type name where torch parses schemas with type variables off"),
    Rule("missing-name", "error", "a schema without an operator name where torch needs one"),
    Rule("nameless-expected", "error", "a named schema where torch.library.define or custom_op want '(...) -> ...'"),
    Rule("define-format", "error", "text torch.library.define's own format check refuses"),
    Rule("duplicate-argument", "error", "two arguments with the same name, which torch accepts but no call by keyword can tell apart"),
    # text torch accepts but misreads, cannot print back, or ignores
    Rule("misread-number", "warning", "a number default torch reads as a different value"),
    Rule("misread-size", "warning", "a list size torch reads as a different number"),
    Rule("misread-optional-list", "warning", "a fixed-size optional list default torch stores as a single value"),
    Rule("no-roundtrip", "warning", "a schema torch prints in a form its own parser rejects or reads differently"),
    Rule("default-type", "warning", "a default value of another kind than the argument's type"),
    Rule("dispatcher-ignores", "warning", "tensors the dispatcher does not look at when it picks a kernel"),
    Rule("library-namespace", "warning", "Library.define with the library's namespace written out"),
    Rule("custom-op-kwarg-tensor", "warning", "a keyword-only Tensor argument custom_op refuses"),
    Rule("opaque-type", "warning", "a dotted type name accepted only if registered as an opaque type first"),
    # what a static read cannot check, and the reading itself
    Rule("template", "note", "a schema in a Jinja template: check the rendered file"),
    Rule("not-static", "note", "a schema built from pieces only known when the code is compiled or run"),
    Rule("source", "warning", "a YAML 'func:' value written in a form that is not read"),
    Rule("unused-suppression", "warning", "a 'pbp: ignore[...]' comment that silences nothing"),
    # the no-path run: our parser compared with torch's on every registered schema
    Rule("torch-names", "error", "argument names differ from torch's"),
    Rule("torch-print", "error", "printed differently from torch"),
    Rule("torch-reparse", "error", "torch cannot parse our print of its schema"),
    Rule("torch-own-print", "note", "a registered schema torch prints in a form its own parser rejects, and so do we"),
)

RULES: dict[str, Rule] = {rule.id: rule for rule in _TABLE}
