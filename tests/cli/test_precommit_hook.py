"""The `pbp-schema-check` pre-commit hook, run the way pre-commit runs it.

pre-commit reads `.pre-commit-hooks.yaml`, keeps the repository's tracked files whose path matches
the hook's `files` pattern, and runs `entry` with those file names appended as arguments, from the
repository root. This test does exactly that on a temporary git repository holding good and bad
files of every kind (pre-commit itself is not a dependency).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
BIN = Path(sys.executable).parent


def hook_definition() -> dict[str, str]:
    """The single hook's scalar keys (the file is ours and flat: `key: value` lines under one `- id:`)."""
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    hook: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.lstrip("- ").partition(":")
        hook[key.strip()] = value.strip()
    return hook


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def run_hook(repo: Path) -> subprocess.CompletedProcess[str]:
    hook = hook_definition()
    pattern = re.compile(hook["files"])
    files = [f for f in git(repo, "ls-files").splitlines() if pattern.search(f)]
    entry = hook["entry"].split()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([*entry, *files], cwd=repo, capture_output=True, text=True, env=env, timeout=120)


def make_repo(tmp_path: Path, names: list[str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name in names:
        shutil.copy(FIXTURES / name, repo / name)
    (repo / "README.md").write_text("m.def(\"not checked: wrong suffix(\")\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "fixtures")
    return repo


def test_hook_declaration():
    hook = hook_definition()
    assert hook["id"] == "pbp-schema-check"
    assert hook["entry"].split()[:3] == ["pbp-serialize", "schema", "check"]
    assert hook["language"] == "python"
    pattern = re.compile(hook["files"])
    assert [bool(pattern.search(n)) for n in ("a.py", "b.cpp", "c.cu", "n.yaml", "x.schema", "README.md", "a.txt", "ops.mm", "k.metal")] == [
        True, True, True, True, True, False, False, True, False,
    ]


def test_hook_files_are_the_suffixes_the_checker_reads():
    from piece_by_piece_serialize.cli.sources import CPP_SUFFIXES, PYTHON_SUFFIXES, TEXT_SUFFIXES, YAML_SUFFIXES

    pattern = re.compile(hook_definition()["files"])
    suffixes = CPP_SUFFIXES | PYTHON_SUFFIXES | TEXT_SUFFIXES | YAML_SUFFIXES
    assert [s for s in sorted(suffixes) if not pattern.search("x" + s)] == []


GOOD = ["good.schema", "good_ops.py", "good_ops.cpp", "good_native.yaml"]


@pytest.mark.slow
def test_hook_passes_on_good_files(tmp_path):
    result = run_hook(make_repo(tmp_path, GOOD))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr == ""


@pytest.mark.slow
def test_hook_fails_on_bad_files_and_names_them(tmp_path):
    repo = make_repo(tmp_path, GOOD + ["bad.schema", "bad_ops.py", "bad_ops.cpp", "bad_native.yaml"])
    result = run_hook(repo)
    assert result.returncode == 1, result.stdout + result.stderr
    heads = [line for line in result.stdout.splitlines() if line[:1] not in (" ", "")]
    assert {h.split(":")[0] for h in heads} == {"bad.schema", "bad_ops.py", "bad_ops.cpp", "bad_native.yaml"}
    assert all(": error[" in h or ": warning[" in h for h in heads)
    assert "Traceback" not in result.stderr
