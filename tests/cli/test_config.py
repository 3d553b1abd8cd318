"""Configuration like the linters users know: `[tool.pbp-serialize]`, `--exclude`, `pbp: ignore[rule]` comments.

The table is found in the nearest pyproject.toml (from the current folder up) that has one, or named with
`--config`; its patterns are relative to its folder, `--exclude` patterns to the current one. Unknown keys,
rules and severities are errors (exit 2). A suppression comment silences its rules on the lines of the call
it sits on; one that silences nothing is reported.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from piece_by_piece_serialize.cli._config import ConfigError, compile_glob, load_config
from piece_by_piece_serialize.cli import run

BAD_HEX = "myops::g(int flags=0x10) -> ()\n"  # one misread-number warning
BAD_SYNTAX = "myops::f(int x,) -> ()\n"  # one syntax error


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def records(out: str) -> list[tuple[str, int, str, str]]:
    return [(r["path"], r["line"], r["severity"], r["code"]) for r in map(json.loads, out.splitlines())]


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    (tmp_path / "src" / "ops").mkdir(parents=True)
    (tmp_path / "third_party" / "lib").mkdir(parents=True)
    (tmp_path / "src" / "ops" / "hex.schema").write_text(BAD_HEX, encoding="utf-8")
    (tmp_path / "src" / "ops" / "bad.schema").write_text(BAD_SYNTAX, encoding="utf-8")
    (tmp_path / "third_party" / "lib" / "vendored.schema").write_text(BAD_SYNTAX, encoding="utf-8")
    (tmp_path / "src" / "ops" / "list.txt").write_text("myops::t(Tensor x) -> Tensor\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def pyproject(root, body: str) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.pbp-serialize]\n" + textwrap.dedent(body), encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# globs


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("third_party", ["third_party", "third_party/lib/x.cpp", "src/third_party/y.h"], ["third_party_x/a", "src/ops/a.cpp"]),
        ("/third_party", ["third_party/lib/x.cpp"], ["src/third_party/y.h"]),
        ("third_party/", ["third_party/lib/x.cpp", "a/third_party/b"], ["third_partyx"]),
        ("*_template.cpp", ["a/b/x_template.cpp", "x_template.cpp"], ["x_template.cpp.bak", "template.cpp"]),
        ("src/*.py", ["src/a.py"], ["src/sub/a.py", "x/src/a.py"]),
        ("src/**/*.py", ["src/a.py", "src/sub/deep/a.py"], ["lib/a.py"]),
        ("build/**", ["build", "build/x/y.cpp"], ["rebuild/x"]),
        ("test_?.py", ["a/test_1.py"], ["a/test_12.py"]),
        ("[!a]*.cu", ["b.cu", "x/c.cu"], ["a.cu"]),
        ("**/gen/*.cpp", ["gen/a.cpp", "x/y/gen/a.cpp"], ["gen/x/a.cpp"]),
    ],
)
def test_glob_semantics(tmp_path, pattern, matches, misses):
    glob = compile_glob(pattern, str(tmp_path))
    assert [m for m in matches if not glob.matches(str(tmp_path / m))] == []
    assert [m for m in misses if glob.matches(str(tmp_path / m))] == []


# ------------------------------------------------------------------------------------------------
# [tool.pbp-serialize]


def test_no_table_means_defaults(repo, capsys):
    (repo / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 1
    assert sorted(records(out)) == [
        ("./src/ops/bad.schema", 1, "error", "syntax"),
        ("./src/ops/hex.schema", 1, "warning", "misread-number"),
        ("./third_party/lib/vendored.schema", 1, "error", "syntax"),
    ]


def test_exclude_and_severity(repo, capsys):
    pyproject(repo, 'exclude = ["third_party"]\nseverity = { misread-number = "error", syntax = "warning" }\n')
    code, out, err = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 1
    assert sorted(records(out)) == [("./src/ops/bad.schema", 1, "warning", "syntax"), ("./src/ops/hex.schema", 1, "error", "misread-number")]
    assert err == "checked 2 schemas: 1 error, 1 warning\n"


def test_severity_off_and_note(repo, capsys):
    pyproject(repo, 'exclude = ["third_party/"]\nseverity = { misread-number = "off", syntax = "note" }\n')
    code, out, err = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 0  # notes never fail a run
    assert records(out) == [("./src/ops/bad.schema", 1, "note", "syntax")]
    assert err == "checked 2 schemas: 0 errors, 0 warnings, 1 note\n"


def test_include_replaces_the_suffix_rule(repo, capsys):
    pyproject(repo, 'include = ["src/**/*.txt", "*.schema"]\nexclude = ["third_party"]\n')
    code, out, err = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 1 and err == "checked 3 schemas: 1 error, 1 warning\n"  # list.txt is read, as plain text


def test_found_from_a_subfolder_with_patterns_relative_to_the_file(repo, capsys, monkeypatch):
    pyproject(repo, 'exclude = ["/src/ops/bad.schema"]\n')
    monkeypatch.chdir(repo / "src")
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", ".")
    assert (code, records(out)) == (0, [("./ops/hex.schema", 1, "warning", "misread-number")])


def test_exclude_applies_to_files_named_on_the_command_line(repo, capsys):
    # as pre-commit passes them: an excluded file stays excluded
    pyproject(repo, 'exclude = ["bad.schema"]\n')
    assert cli(capsys, "schema", "check", "src/ops/bad.schema") == (0, "checked 0 schemas: 0 errors, 0 warnings\n", "")


def test_command_line_exclude_adds_to_the_configured_one(repo, capsys):
    pyproject(repo, 'exclude = ["third_party"]\n')
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", "--exclude", "src/ops/bad.schema,*.txt", "--exclude", "nothing", ".")
    assert (code, records(out)) == (0, [("./src/ops/hex.schema", 1, "warning", "misread-number")])


def test_explicit_config_file(repo, capsys, tmp_path):
    other = tmp_path / "ci.toml"
    other.write_text('[tool.pbp-serialize]\nseverity = { syntax = "off", misread-number = "off" }\n', encoding="utf-8")
    assert cli(capsys, "schema", "check", "--config", str(other), ".") == (0, "checked 3 schemas: 0 errors, 0 warnings\n", "")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("exclud = []\n", "[tool.pbp-serialize] unknown key 'exclud' (known: include, exclude, severity, schema-functions)"),
        ("exclude = 'third_party'\n", "[tool.pbp-serialize] exclude must be a list of strings (glob patterns)"),
        ("severity = { misread-numbers = 'off' }\n", "[tool.pbp-serialize] severity: unknown rule 'misread-numbers' (known: syntax, "),
        ("severity = { syntax = 'fatal' }\n", "[tool.pbp-serialize] severity: 'syntax' must be one of error, warning, note, off, got 'fatal'"),
        ("exclude = [\n", "not valid TOML ("),
    ],
    ids=["unknown-key", "not-a-list", "unknown-rule", "bad-severity", "bad-toml"],
)
def test_configuration_errors_exit_2(repo, capsys, body, message):
    pyproject(repo, body)
    code, out, err = cli(capsys, "schema", "check", ".")
    assert (code, out) == (2, "")
    assert err.startswith(f"pbp-serialize: error: {repo / 'pyproject.toml'}: {message}")
    assert err.count("\n") == 1


def test_explicit_config_without_the_table(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text("[tool.other]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no \[tool.pbp-serialize\] table"):
        load_config(str(path))


def test_a_broken_pyproject_of_someone_else_is_not_ours_to_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project\nname = \n", encoding="utf-8")
    assert load_config(search_from=str(tmp_path)).source is None


# ------------------------------------------------------------------------------------------------
# pbp: ignore[rule]

CPP = """\
TORCH_LIBRARY(myops, m) {
  m.def("a(int x=0x10) -> ()");  // pbp: ignore[misread-number]
  m.def("b(int x=0x10, "  // pbp: ignore[misread-number] -- on the first line of the call
        "Tensor[][] y) -> ()");
  m.def("c(int x) -> ()");  // pbp: ignore[misread-number]
  /* pbp: ignore[misread-number, dispatcher-ignores] */ m.def("d(int x=0x10) -> ()");
  m.def("e(int x,) -> ()");  // pbp: ignore[syntx]
  m.def("f(int x) -> ()");  // pbp: ignore
  m.def("pbp: ignore[syntax] is text in a literal, not a comment");
}
"""


def test_cpp_suppressions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.cpp").write_text(CPP, encoding="utf-8")
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", "ops.cpp")
    assert code == 1
    got = [(r["line"], r["column"], r["severity"], r["code"], r["message"]) for r in map(json.loads, out.splitlines())]
    assert got == [
        (4, 10, "warning", "dispatcher-ignores", got[0][4]),  # not listed in the comment: still reported
        (5, 32, "warning", "unused-suppression", "unused suppression: no 'misread-number' finding on this line"),
        (6, 6, "warning", "unused-suppression", "unused suppression: no 'dispatcher-ignores' finding on this line"),
        (7, 18, "error", "syntax", got[3][4]),
        (7, 33, "warning", "unused-suppression", "unknown rule 'syntx' in 'pbp: ignore[syntx]'"),
        (8, 32, "warning", "unused-suppression", "'pbp: ignore' silences nothing: write the rules in brackets, like 'pbp: ignore[misread-number]'"),
        (9, 15, "error", "syntax", got[6][4]),
    ]


def test_python_and_yaml_suppressions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.py").write_text(
        "import torch\n"
        "lib = torch.library.Library('myops', 'DEF')\n"
        "lib.define('a(int x=0x10) -> ()')  # pbp: ignore[misread-number]\n"
        "lib.define(\n"
        "    'b(int x=0x10) -> ()'\n"
        ")  # pbp: ignore[misread-number] on the call's last line\n"
        "lib.define('c(int x) -> ()  # pbp: ignore[syntax]')  # the first is schema text, not a Python comment\n",
        encoding="utf-8",
    )
    (tmp_path / "native.yaml").write_text(
        "- func: a(int x=0x10) -> ()  # pbp: ignore[misread-number]\n"
        "- func: 'b(str s=\"# pbp: ignore[x]\") -> ()'\n"
        "- func: c(int x=0x10) -> ()\n",
        encoding="utf-8",
    )
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 0
    assert [(r["path"], r["line"], r["code"]) for r in map(json.loads, out.splitlines())] == [
        ("./native.yaml", 3, "misread-number"),
    ]


def test_unused_suppression_can_be_turned_off(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ops.cpp").write_text('m.def("c(int x) -> ()");  // pbp: ignore[misread-number]\n', encoding="utf-8")
    assert cli(capsys, "schema", "check", "--strict", "ops.cpp")[0] == 1
    pyproject(tmp_path, 'severity = { unused-suppression = "off" }\n')
    assert cli(capsys, "schema", "check", "--strict", "ops.cpp") == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")
