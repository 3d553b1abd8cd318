"""docs/cli.md shows what the command does: its examples are run here.

- Every ```python block runs on its own (a fresh namespace and a fresh working folder: each block imports
  what it uses) and its asserts hold.
- Every `$ pbp-serialize schema check ...` example over the fixture files prints exactly what is shown.
- The excerpt of the real-world run is a part, in order, of the pinned full output.
- The TOML, C++ and GitHub Actions snippets are a configuration the checker accepts, a suppression that
  silences its finding, and command lines the parser takes.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from piece_by_piece_serialize.cli._config import load_config
from piece_by_piece_serialize.cli import _build_parser, run

HERE = Path(__file__).parent
DOC = HERE.parents[1] / "docs" / "cli.md"
FIXTURES = HERE / "fixtures"


def blocks(language: str) -> list[str]:
    """The bodies of the fenced blocks of ``language`` ('' for unlabelled ones), in order."""
    found = re.findall(r"^( *)```([a-z]*)\n(.*?)^\1```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)
    out = []
    for indent, lang, body in found:
        if lang == language:
            out.append("\n".join(line[len(indent) :] for line in body.splitlines()) + "\n")
    return out


PYTHON = blocks("python")
SHELL = [b for b in blocks("") if b.startswith("$ pbp-serialize schema check ")]


def test_the_doc_has_examples():
    assert len(PYTHON) >= 2
    assert len(SHELL) >= 5


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs_on_its_own(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(PYTHON[index], f"docs/cli.md python block {index + 1}", "exec")
    exec(code, {"__name__": "__doc_example__"})  # a fresh namespace: nothing from an earlier block


def _fixture_examples() -> list[tuple[list[str], str]]:
    examples = []
    for block in SHELL:
        first, _, shown = block.partition("\n")
        argv = shlex.split(first.removeprefix("$ "))[1:]
        if all(a.startswith("-") or a in ("json", "github", "sarif", "text") or (FIXTURES / a).is_file() for a in argv[2:]) and len(argv) > 2:
            examples.append((argv, shown))
    return examples


@pytest.mark.parametrize(("argv", "shown"), _fixture_examples(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_shell_example_over_the_fixtures(argv, shown, capsys, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    run(argv)
    out, _ = capsys.readouterr()
    assert out == shown


def test_the_fixture_examples_are_found():
    assert len(_fixture_examples()) == 3  # text, json, github


def test_real_world_excerpt_is_part_of_the_pinned_output():
    (block,) = [b for b in SHELL if b.startswith("$ pbp-serialize schema check .\n")]
    lines = block.splitlines()[1:]
    stderr_line = lines.pop()
    assert stderr_line.startswith("pbp-serialize: error: ./scripts/register_legacy_ops.py:6:1: cannot parse")
    full = (HERE / "real_world_expected.txt").read_text(encoding="utf-8").splitlines()
    shown = [line for line in lines if line != "..."]
    it = iter(full)
    assert all(any(line == f for f in it) for line in shown), "the excerpt is not in the pinned output, in order"
    assert shown[-1] == full[-1]


def test_toml_block_is_a_valid_configuration(tmp_path):
    (toml,) = blocks("toml")
    (tmp_path / "pyproject.toml").write_text(toml, encoding="utf-8")
    config = load_config(search_from=str(tmp_path))
    assert config.severity == {"dispatcher-ignores": "off", "misread-number": "error", "template": "off"}
    assert config.excluded(str(tmp_path / "a" / "x_template.cpp")) and config.included(str(tmp_path / "csrc" / "k.cu"))


def test_cpp_suppression_example_silences_its_finding(tmp_path, capsys, monkeypatch):
    (cpp,) = blocks("cpp")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.cpp").write_text(cpp, encoding="utf-8")
    assert run(["schema", "check", "ops.cpp"]) == 0
    assert capsys.readouterr().out == "checked 1 schema: 0 errors, 0 warnings\n"
    (tmp_path / "ops.cpp").write_text(cpp.replace("  // pbp: ignore[no-roundtrip]", ""), encoding="utf-8")
    run(["schema", "check", "ops.cpp"])
    assert ": warning[no-roundtrip]: torch prints the '!' shorthand" in capsys.readouterr().out


def test_workflow_commands_parse():
    workflow = [b for b in blocks("yaml") if "runs-on:" in b]
    assert len(workflow) == 1
    commands = [line.split("- run: ", 1)[1] for line in workflow[0].splitlines() if "- run: pbp-serialize" in line]
    assert len(commands) == 2
    parser = _build_parser()
    for command in commands:
        argv = shlex.split(command.split(" > ")[0])[1:]
        with contextlib.redirect_stderr(io.StringIO()):
            args = parser.parse_args(argv)
        assert args.format in ("github", "sarif") and args.paths == ["."]
