"""`schema check` over a folder shaped like the real custom-operator repositories, in every output format.

`tests/cli/real_world/` holds small files written in the idioms of pytorch/FBGEMM (Jinja templates, a
misread hex default, `torch::schema`), pytorch/ao (Objective-C++ `.mm`, a Metal kernel-list YAML, literals
continued with backslash splices), flash-attention (a default built with a `STRING()` macro), xformers
(`TORCH_SELECTIVE_SCHEMA`, an `#if` between literals, `torch::jit::parseSchema`), bitsandbytes
(`torch.library.define` with adjacent literals), mamba (`custom_op` with f-strings), torchcodec and
extension-cpp, plus a plain-text list of nameless `infer_schema` output, a native_functions-shaped YAML and
a half-merged `.py` that does not parse. The test adds a FIFO with a `.py` name, which must be passed over,
never opened (opening it would block the walk forever).

Every format must report exactly the same findings and the same exit code; the counts are pinned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from piece_by_piece_serialize.cli import run

HERE = Path(__file__).parent
CORPUS = HERE / "real_world"
EXPECTED_TEXT = HERE / "real_world_expected.txt"
SARIF_SCHEMA = HERE / "data" / "sarif-schema-2.1.0.json"

# (path, line, column, severity, code) of every finding, in output order
EXPECTED = [
    ("bitsandbytes/_ops.py", 47, 57, "warning", "unused-suppression"),
    ("fbgemm_gpu/codegen/training/embedding_split_host_template.cpp", 21, 33, "note", "template"),
    ("fbgemm_gpu/codegen/training/embedding_split_host_template.cpp", 24, 1, "note", "template"),
    ("fbgemm_gpu/src/split_embeddings_utils/split_embeddings_utils_cpu.cpp", 26, 28, "warning", "misread-number"),
    ("flash_attn/csrc/flash_api_torch_lib.cpp", 13, 26, "note", "not-static"),
    ("mamba_ssm/ops/selective_scan_interface.py", 24, 98, "note", "not-static"),
    ("mamba_ssm/ops/selective_scan_interface.py", 32, 13, "error", "nameless-expected"),
    ("torchao/experimental/ops/mps/mps_op_lib.mm", 33, 28, "error", "typevar"),
    ("torchcodec/_core/custom_ops.cpp", 14, 8, "warning", "dispatcher-ignores"),
    ("xformers/csrc/attention/attention_cutlass.cpp", 12, 1, "note", "not-static"),
]
SCHEMAS = 37  # checked: templates, macro-built and name-only literals are not among them
SUMMARY = f"checked {SCHEMAS} schemas: 2 errors, 3 warnings, 5 notes"
UNPARSEABLE = "scripts/register_legacy_ops.py"
STDERR = f"pbp-serialize: error: ./{UNPARSEABLE}:6:1: cannot parse Python source (invalid syntax); its schemas were not checked\n"


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(CORPUS, root)
    os.mkfifo(root / "mamba_ssm" / "ops" / "ops_pipe.py")  # a FIFO with a source suffix: never opened
    monkeypatch.chdir(root)
    return root


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_corpus_holds_every_idiom():
    names = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    assert {
        "fbgemm_gpu/codegen/training/embedding_split_host_template.cpp",
        "torchao/experimental/ops/mps/mps_op_lib.mm",
        "torchao/experimental/kernels/mps/metal.yaml",
        "flash_attn/csrc/flash_api_torch_lib.cpp",
        "xformers/csrc/sparse24/sparse24_meta.cpp",
        UNPARSEABLE,
    } <= names
    assert Counter(Path(n).suffix for n in names) >= Counter({".cpp": 7, ".py": 3, ".mm": 1, ".yaml": 2, ".schema": 1})


def test_text(repo, capsys):
    code, out, err = cli(capsys, "schema", "check", ".")
    assert code == 2  # the file that does not parse fails the run, named on stderr
    assert err == STDERR
    assert out == EXPECTED_TEXT.read_text(encoding="utf-8")
    heads = [line for line in out.splitlines() if line[:1] not in (" ", "")]
    assert [tuple(h.split(": ")[0].split(":")) + (h.split(": ")[1],) for h in heads[:-1]] == [
        (f"./{p}", str(line), str(col), f"{severity}[{code}]") for p, line, col, severity, code in EXPECTED
    ]
    assert heads[-1] == SUMMARY


def test_json(repo, capsys):
    code, out, err = cli(capsys, "schema", "check", "--format", "json", ".")
    assert code == 2
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["path"].removeprefix("./"), r["line"], r["column"], r["severity"], r["code"]) for r in records] == EXPECTED
    assert err == STDERR + SUMMARY + "\n"
    # the schema torch would receive, joined from three adjacent C++ literals
    (fbgemm,) = [r for r in records if r["code"] == "misread-number"]
    assert fbgemm["schema"].startswith("transpose_embedding_input(    Tensor hash_size_cumsum,     int total_hash_size_bits, ")
    assert [r["schema"] for r in records if r["severity"] == "note"] == [None] * 5


def test_github(repo, capsys):
    code, out, err = cli(capsys, "schema", "check", "--format", "github", ".")
    assert code == 2
    lines = out.splitlines()
    levels = {"error": "error", "warning": "warning", "note": "notice"}
    expected = [
        f"::{levels[severity]} file={path},line={line},col={col},title=pbp-serialize ({code})::"
        for path, line, col, severity, code in EXPECTED
    ]
    # the file that does not parse is annotated too, where the walk meets it
    assert f"::error file={UNPARSEABLE},line=6,col=1,title=pbp-serialize::./{UNPARSEABLE}:6:1: cannot parse Python source (invalid syntax); its schemas were not checked" in lines
    findings = [line for line in lines if "title=pbp-serialize (" in line]
    assert [line[: len(prefix)] for line, prefix in zip(findings, expected)] == expected
    assert len(findings) == len(EXPECTED) and len(lines) == len(EXPECTED) + 1
    assert err == STDERR + SUMMARY + "\n"


def test_sarif(repo, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    code, out, err = cli(capsys, "schema", "check", "--format", "sarif", ".")
    assert code == 2
    assert err == STDERR + SUMMARY + "\n"
    doc = json.loads(out)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(doc)
    (run_,) = doc["runs"]
    rules = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    got = []
    for result in run_["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        region = physical["region"]
        got.append((physical["artifactLocation"]["uri"], region["startLine"], region["startColumn"], result["level"], result["ruleId"]))
    assert got == EXPECTED
    (invocation,) = run_["invocations"]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == UNPARSEABLE
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.as_uri() + "/"


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_excluding_the_unparseable_file_gives_exit_1(repo, capsys, fmt):
    code, out, err = cli(capsys, "schema", "check", "--format", fmt, "--exclude", "scripts", ".")
    assert code == 1  # two errors remain
    assert err == ("" if fmt == "text" else SUMMARY + "\n")
    assert (SUMMARY in out) == (fmt == "text")


def test_configured_in_pyproject(repo, capsys):
    # what a repository like this one would write: skip the half-merged scripts and the templates' notes,
    # turn the misread hex default into an error
    (repo / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n[tool.pbp-serialize]\nexclude = ['scripts/']\n"
        "severity = { template = 'off', misread-number = 'error' }\n",
        encoding="utf-8",
    )
    code, out, err = cli(capsys, "schema", "check", "--format", "json", ".")
    assert (code, err.splitlines()) == (1, [f"checked {SCHEMAS} schemas: 3 errors, 2 warnings, 3 notes"])
    records = [json.loads(line) for line in out.splitlines()]
    assert Counter(r["code"] for r in records) == Counter(
        {"not-static": 3, "misread-number": 1, "nameless-expected": 1, "typevar": 1, "unused-suppression": 1, "dispatcher-ignores": 1}
    )
    assert [r["severity"] for r in records if r["code"] == "misread-number"] == ["error"]


def test_strict_counts_the_warnings(repo, capsys):
    code, out, err = cli(capsys, "schema", "check", "--strict", "--quiet", "--exclude", "scripts", ".")
    assert code == 1 and err == ""
    heads = [line for line in out.splitlines() if line[:1] not in (" ", "")]
    assert Counter(h.split(": ")[1].partition("[")[0] for h in heads) == Counter({"error": 5, "note": 5})


def test_pre_commit_style_file_list_is_the_same(repo):
    # pre-commit passes every file on the command line; the answer must not change
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".mm", ".yaml", ".schema"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["pbp-serialize", "schema", "check", "--format", "json", *files], cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["path"], r["line"], r["column"], r["severity"], r["code"]) for r in records) == sorted(EXPECTED)
    assert result.stderr.splitlines()[-1] == SUMMARY
