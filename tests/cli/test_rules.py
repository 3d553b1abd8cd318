"""The rule table (`_rules.RULES`) names every finding code the checker can emit, and docs/cli.md documents each.

The codes are read from the source with `ast` (the third argument of `Lint(...)`, the fourth of
`_finding(...)`, the fifth of `Finding(...)`, `code=` of `Problem(...)`), so a new code that is not added
to the table, and so could not be configured, suppressed or described in SARIF, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import piece_by_piece_serialize
from piece_by_piece_serialize.cli._rules import RULES, SEVERITIES
from piece_by_piece_serialize.cli.sources import Problem

PACKAGE = Path(piece_by_piece_serialize.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

# callee -> position of the code argument
_CODE_ARG = {"Lint": 2, "site_finding": 3, "Finding": 4, "Problem": 5}


def emitted_codes() -> set[str]:
    codes: set[str] = {Problem("", 1, 1, "").code}  # the default code of reading problems
    for module in ("cli/_lint.py", "cli/_check.py", "cli/sources/_model.py", "cli/sources/_yaml.py", "cli/sources/_cpp.py", "cli/sources/_python.py"):
        tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CODE_ARG):
                continue
            index = _CODE_ARG[node.func.id]
            candidates = [kw.value for kw in node.keywords if kw.arg == "code"]
            if len(node.args) > index:
                candidates.append(node.args[index])
            for arg in candidates:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    codes.add(arg.value)
    return codes


def test_every_emitted_code_is_a_rule():
    codes = emitted_codes()
    assert len(codes) >= 15
    assert codes - set(RULES) - {"not-canonical"} == set()  # not-canonical: `schema format --check` only


def test_every_rule_is_emitted_somewhere():
    assert set(RULES) - emitted_codes() == set()


def test_rules_are_well_formed():
    for rule in RULES.values():
        assert rule.level in SEVERITIES[:3]
        assert rule.id == rule.id.lower() and " " not in rule.id
        assert rule.summary and not rule.summary.endswith(".")


def test_every_rule_is_documented():
    text = DOCS.read_text(encoding="utf-8")
    assert [rule for rule in RULES if f"`{rule}`" not in text] == []
