"""`--format text|json|github|sarif`: the same findings and the same exit code (0/1/2) in every format.

GitHub workflow commands are checked character by character (escapes included); SARIF documents are
validated against the OASIS SARIF 2.1.0 JSON schema vendored in `tests/cli/data/` (see its README for
where it comes from), and a broken document is shown to fail that validation, so the check has teeth.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from piece_by_piece_serialize.cli._rules import RULES
from piece_by_piece_serialize.cli import run

FIXTURES = Path(__file__).parent / "fixtures"
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
FORMATS = ("text", "json", "github", "sarif")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.fixture(autouse=True)
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


# ------------------------------------------------------------------------------------------------
# exit codes


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("paths", "code"),
    [(["good.schema", "good_ops.cpp"], 0), (["bad.schema"], 1), (["good.schema", "missing.schema"], 2)],
    ids=["clean", "findings", "io-error"],
)
def test_exit_codes_in_every_format(capsys, fmt, paths, code):
    assert cli(capsys, "schema", "check", "--format", fmt, *paths)[0] == code


def test_warnings_fail_only_with_strict_in_every_format(capsys, tmp_path):
    path = tmp_path / "w.schema"
    path.write_text("myops::g(int flags=0x10) -> ()\n", encoding="utf-8")
    for fmt in FORMATS:
        assert cli(capsys, "schema", "check", "--format", fmt, str(path))[0] == 0
        assert cli(capsys, "schema", "check", "--format", fmt, "--strict", str(path))[0] == 1


# ------------------------------------------------------------------------------------------------
# GitHub


def test_github_annotations(capsys):
    code, out, err = cli(capsys, "schema", "check", "--format", "github", "bad.schema", "bad_ops.cpp")
    assert code == 1
    assert out.splitlines() == [
        "::error file=bad.schema,line=2,col=16,title=pbp-serialize (syntax)::expected a type, '(', '...' or '*' after ',', got ')'",
        "::warning file=bad.schema,line=3,col=20,title=pbp-serialize (misread-number)::torch reads 0x10 as the integer 0, not 16",
        "::warning file=bad.schema,line=4,col=10,title=pbp-serialize (dispatcher-ignores)::the dispatcher ignores the tensors inside "
        "'Tensor[][]' when it picks a kernel (only Tensor, Tensor?, Tensor[] and Tensor?[] arguments are dispatch inputs)",
        "::warning file=bad_ops.cpp,line=5,col=14,title=pbp-serialize (misread-size)::torch reads the list size '2.5' as 2",
        "::error file=bad_ops.cpp,line=6,col=62,title=pbp-serialize (syntax)::invalid default value 'inf': expected a number, a string, "
        "True, False, None, or one of float, complex, long, strided, Mean, contiguous_format",
    ]
    assert err == "checked 5 schemas: 2 errors, 3 warnings\n"  # the log, not an annotation


def test_github_escapes_and_paths(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a,b:c%").mkdir()
    (tmp_path / "a,b:c%" / "n.schema").write_text('myops::f(str s="50%\\n", int x=0x10) -> ()\n', encoding="utf-8")
    code, out, _ = cli(capsys, "schema", "check", "--format", "github", "./a,b:c%/n.schema")
    assert code == 0
    # properties escape % , : and line ends; the message escapes % and line ends; './' is dropped
    assert out == "::warning file=a%2Cb%3Ac%25/n.schema,line=1,col=31,title=pbp-serialize (misread-number)::torch reads 0x10 as the integer 0, not 16\n"


def test_github_stdin_and_io_errors(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("myops::f(int x,) -> ()\n"))
    code, out, err = cli(capsys, "schema", "check", "--format", "github", "-", "missing.schema")
    assert code == 2
    assert out.splitlines() == [
        "::error file=missing.schema,title=pbp-serialize::cannot read missing.schema: no such file or directory",
        "::error title=pbp-serialize (syntax)::<stdin>:1:16: expected a type, '(', '...' or '*' after ',', got ')'",
    ]
    assert err.splitlines()[0] == "pbp-serialize: error: cannot read missing.schema: no such file or directory"


# ------------------------------------------------------------------------------------------------
# SARIF


def sarif(capsys, *argv: str) -> tuple[int, dict, str]:
    code, out, err = cli(capsys, "schema", "check", "--format", "sarif", *argv)
    return code, json.loads(out), err


def test_sarif_document(capsys, validator):
    code, doc, err = sarif(capsys, "bad.schema", "bad_ops.cpp", "bad_ops.py", "bad_native.yaml")
    assert code == 1 and err == "checked 11 schemas: 6 errors, 5 warnings\n"
    validator.validate(doc)
    assert doc["version"] == "2.1.0"
    (run_,) = doc["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "pbp-serialize"
    assert [r["id"] for r in driver["rules"]] == list(RULES)
    assert all(r["defaultConfiguration"]["level"] == RULES[r["id"]].level for r in driver["rules"])
    assert run_["columnKind"] == "unicodeCodePoints"
    assert run_["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]
    results = run_["results"]
    assert len(results) == 11
    first = results[0]
    assert first == {
        "ruleId": "syntax",
        "level": "error",
        "message": {"text": "expected a type, '(', '...' or '*' after ',', got ')'"},
        "ruleIndex": 0,
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "bad.schema", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 2, "startColumn": 16, "snippet": {"text": "myops::f(int x,) -> ()"}},
                }
            }
        ],
        "properties": {"schema": "myops::f(int x,) -> ()"},
    }
    # the same findings as the JSON lines
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", "bad.schema", "bad_ops.cpp", "bad_ops.py", "bad_native.yaml")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [(r["code"], r["line"]) for r in lines]


def test_sarif_clean_run_and_configured_levels(capsys, validator, tmp_path):
    config = tmp_path / "pbp.toml"
    config.write_text('[tool.pbp-serialize]\nseverity = { dispatcher-ignores = "off", misread-number = "error" }\n', encoding="utf-8")
    code, doc, _ = sarif(capsys, "--config", str(config), "good.schema")
    assert code == 0
    validator.validate(doc)
    (run_,) = doc["runs"]
    assert run_["results"] == []
    levels = {r["id"]: r["defaultConfiguration"] for r in run_["tool"]["driver"]["rules"]}
    assert levels["dispatcher-ignores"] == {"level": "none", "enabled": False}
    assert levels["misread-number"] == {"level": "error"}


def test_sarif_io_errors_and_stdin(capsys, validator, monkeypatch):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("myops::f(int x,) -> ()\n"))
    code, doc, _ = sarif(capsys, "-", "missing.schema")
    assert code == 2
    validator.validate(doc)
    (run_,) = doc["runs"]
    (invocation,) = run_["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    assert invocation["toolExecutionNotifications"] == [
        {
            "level": "error",
            "message": {"text": "cannot read missing.schema: no such file or directory"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": "missing.schema", "uriBaseId": "%SRCROOT%"}}}],
        }
    ]
    (result,) = run_["results"]
    assert "locations" not in result  # standard input is not a file a viewer can open


def test_sarif_uri_is_percent_encoded(capsys, validator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my ops").mkdir()
    (tmp_path / "my ops" / "é.schema").write_text("myops::f(int x,) -> ()\n", encoding="utf-8")
    code, doc, _ = sarif(capsys, ".")
    validator.validate(doc)
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert (code, uri) == (1, "my%20ops/%C3%A9.schema")


def test_the_validator_rejects_a_broken_document(capsys, validator):
    _, doc, _ = sarif(capsys, "bad.schema")
    for breaking in (
        lambda d: d.update(version="2.0.0"),
        lambda d: d["runs"][0]["results"][0].update(level="fatal"),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=0),
        lambda d: d["runs"][0]["tool"].pop("driver"),
    ):
        broken = copy.deepcopy(doc)
        breaking(broken)
        assert not validator.is_valid(broken)


@pytest.mark.slow
def test_sarif_over_torchs_registry(capsys, validator):
    code, doc, err = sarif(capsys)
    assert code == 1  # torch's own static_runtime::clamp_nan_to_num declares an argument name twice
    validator.validate(doc)
    results = doc["runs"][0]["results"]
    assert {r["ruleId"] for r in results} <= {"dispatcher-ignores", "torch-own-print", "duplicate-argument"}
    levels = {"torch-own-print": "note", "dispatcher-ignores": "warning", "duplicate-argument": "error"}
    assert all(r["level"] == levels[r["ruleId"]] for r in results)
    assert all("locations" not in r for r in results)  # '<torch>' is no file
    warnings = sum(r["level"] == "warning" for r in results)
    assert f"  1 error, {warnings} warnings" in err.splitlines()


def test_github_message_escapes():
    from piece_by_piece_serialize.cli._report import Reporter

    assert Reporter._github("error", "a.py", 3, 4, "syntax", "50% done\r\nthen: more, less") == (
        "::error file=a.py,line=3,col=4,title=pbp-serialize (syntax)::50%25 done%0D%0Athen: more, less"
    )
