"""The wheel ships the grammars: build it, install it into a scratch venv (no system site-packages, no source
tree on the path) and parse a schema there.

Slow (a wheel build and a venv), marked ``slow``; it is still part of ``make test``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_grammars_and_parses_from_a_clean_venv(tmp_path: Path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("piece_by_piece_serialize-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert "piece_by_piece_serialize/grammars/schema.lark" in names
    assert "piece_by_piece_serialize/py.typed" in names
    # a compiled engine built in the checkout (make accel, git-ignored) is not shipped: the wheel is pure Python
    assert not [name for name in names if "_compiled" in name]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel), "lark"],
        check=True,
        capture_output=True,
        text=True,
    )
    code = (
        "import piece_by_piece_serialize as p, piece_by_piece_serialize._lalr.grammar as g; "
        "print(g.grammar_dir()); "
        "print(p.parse_schema('aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor')); "
        "print(p.extract_names_from_schema('((Tensor x, Tensor y) -> Tensor)')); "
        "import piece_by_piece_serialize._lalr.choice as e; print(e.NAME)"
    )
    # (PBP_ENGINE too: the suite may be running on the compiled engine, which the wheel does not have)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PBP_ENGINE")}
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path, env=env)
    grammar_dir, schema, names, engine = out.stdout.splitlines()
    assert engine == "python"
    assert Path(grammar_dir).is_relative_to(venv)
    assert schema == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert names == "['x', 'y']"
