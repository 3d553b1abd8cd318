"""The package as users install it: the wheel ships the grammars, installs without torch (the schema tooling and
the name views run there, what needs torch says how to install it), and the sdist carries everything its own
tests read.

Each test builds a distribution and, for the wheel, installs it into a scratch venv (no system site-packages, no
source tree on the path) with its declared dependencies resolved by pip, as ``pip install`` and the pre-commit
hook do. Slow (a build and a venv), marked ``slow``; still part of ``make test``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "cli" / "fixtures"
TORCH_EXTRA = "pip install 'piece-by-piece-serialize[torch]'"


def _build(kind: str, outdir: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "build", f"--{kind}", "--outdir", str(outdir), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    (found,) = outdir.glob("piece_by_piece_serialize-*.whl" if kind == "wheel" else "piece_by_piece_serialize-*.tar.gz")
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build("wheel", tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A venv holding the wheel and what pip resolves for it: the dependencies users get, torch not among them."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True, text=True
    )
    return venv


def _env() -> dict[str, str]:
    # (PBP_ENGINE too: the suite may be running on the compiled engine, which the wheel does not have)
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PBP_ENGINE")}


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120)


@pytest.mark.slow
def test_wheel_ships_grammars_and_parses_from_a_clean_venv(wheel: Path, venv: Path, tmp_path: Path):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert "piece_by_piece_serialize/grammars/schema.lark" in names
    assert "piece_by_piece_serialize/py.typed" in names
    # a compiled engine built in the checkout (make accel, git-ignored) is not shipped: the wheel is pure Python
    assert not [name for name in names if "_compiled" in name]
    code = (
        "import piece_by_piece_serialize as p, piece_by_piece_serialize._lalr.grammar as g; "
        "print(g.grammar_dir()); "
        "print(p.parse_schema('aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor')); "
        "print(p.extract_names_from_schema('((Tensor x, Tensor y) -> Tensor)')); "
        "import piece_by_piece_serialize._lalr.choice as e; print(e.NAME)"
    )
    out = _run(venv, "python", "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    grammar_dir, schema, names, engine = out.stdout.splitlines()
    assert engine == "python"
    assert Path(grammar_dir).is_relative_to(venv)
    assert schema == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert names == "['x', 'y']"


@pytest.mark.slow
def test_the_wheel_installs_without_torch(venv: Path, tmp_path: Path):
    installed = _run(venv, "python", "-m", "pip", "list", "--format", "freeze", cwd=tmp_path).stdout.lower()
    packages = sorted(line.partition("==")[0] for line in installed.splitlines())
    assert "torch" not in packages and "numpy" not in packages and "transformers" not in packages
    assert "piece-by-piece-serialize" in packages and "lark" in packages
    probe = _run(venv, "python", "-c", "import importlib.util as u; print(u.find_spec('torch'))", cwd=tmp_path)
    assert probe.stdout == "None\n"


@pytest.mark.slow
def test_schema_tooling_runs_without_torch(venv: Path, tmp_path: Path):
    # the pre-commit hook's command on the fixture files: the same findings as with torch
    check = _run(venv, "pbp-serialize", "schema", "check", "bad_ops.py", "bad_ops.cpp", "good_ops.py", "good_ops.cpp", cwd=FIXTURES)
    assert check.returncode == 1, check.stderr
    assert check.stdout.splitlines()[-1] == "checked 14 schemas: 4 errors, 2 warnings"
    assert [line.split(": ")[1] for line in check.stdout.splitlines() if line.startswith("bad_ops")] == [
        "error[syntax]", "error[typevar]", "error[define-format]", "warning[misread-number]", "warning[misread-size]", "error[syntax]",
    ]
    fmt = _run(venv, "pbp-serialize", "schema", "format", "good.schema", cwd=FIXTURES)
    assert fmt.returncode == 0 and len(fmt.stdout.splitlines()) == len(
        [line for line in (FIXTURES / "good.schema").read_text().splitlines() if line.strip() and not line.startswith("#")]
    )
    names = _run(venv, "pbp-serialize", "schema", "names", "f(Tensor x, *, float eps=1e-05) -> Tensor", cwd=tmp_path)
    assert (names.returncode, names.stdout) == (0, "x\neps\n")
    decode = _run(venv, "pbp-serialize", "name", "decode", "WithCaches__1_DynamicCache_2D___v1_D_logits_X_cache_X_E", cwd=tmp_path)
    assert decode.returncode == 0, decode.stderr
    assert decode.stdout.splitlines()[:2] == [
        "pytree with 1 transformers cache among its leaves (5 items)",
        "  leaf 1: DynamicCache (2 layers, 4 items)",
    ]


@pytest.mark.slow
def test_what_needs_torch_says_how_to_install_it(venv: Path, tmp_path: Path):
    encode = _run(venv, "pbp-serialize", "name", "encode", "(*, *)", cwd=tmp_path)
    assert encode.returncode == 2 and encode.stdout == ""
    assert encode.stderr.startswith(f"pbp-serialize: error: pbp-serialize name encode needs torch, which is not installed: {TORCH_EXTRA}")
    registry = _run(venv, "pbp-serialize", "schema", "check", cwd=tmp_path)
    assert registry.returncode == 2 and TORCH_EXTRA in registry.stderr and "Traceback" not in registry.stderr
    code = (
        "import piece_by_piece_serialize as p\n"
        "for call in (lambda: p.serialize_args((1,), None, None), lambda: p.tree_spec_from_name('___v1_T_X2_E')):\n"
        "    try:\n"
        "        call()\n"
        "    except ModuleNotFoundError as exc:\n"
        "        print(exc.name, '|', exc)\n"
    )
    out = _run(venv, "python", "-c", code, cwd=tmp_path)
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stderr
    assert all(line.startswith("torch | ") and TORCH_EXTRA in line for line in lines)


def _tracked() -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout (an unpacked sdist has nothing to compare with)")
    return {name for name in listed.stdout.splitlines() if (ROOT / name).is_file()}


@pytest.mark.slow
def test_the_sdist_holds_what_its_tests_read(tmp_path: Path):
    tracked = _tracked()
    sdist = _build("sdist", tmp_path)
    with tarfile.open(sdist) as tf:
        shipped = {name.partition("/")[2] for name in tf.getnames() if tf.getmember(name).isfile()}
        tf.extractall(tmp_path / "unpacked", filter="data")
    # everything tracked but the CI entry point; nothing untracked but PKG-INFO
    assert sorted(tracked - shipped) == sorted(n for n in tracked if n.startswith(".ci/"))
    assert sorted(shipped - tracked) == ["PKG-INFO"]
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=unpacked, capture_output=True, text=True, env=_env()
    )
    assert collected.returncode == 0, collected.stdout[-2000:]
    assert "error" not in collected.stdout.splitlines()[-1]
