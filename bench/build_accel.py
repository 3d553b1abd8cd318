"""Build the optional compiled LALR engine and schema callbacks with mypyc (``_lalr/_compiled``, ``schema/_transform_compiled``).

``_lalr/engine.py`` and ``schema/_transform.py`` are what is compiled.

Run: ``python bench/build_accel.py [--if-possible] [--if-stale]`` (``make accel``; ``make bench`` runs it with
``--if-possible``, which only prints why when mypyc or a C compiler is missing, and exits 0, and ``--if-stale``,
which keeps copies the package would use: a build takes about 4 minutes). Nothing else builds
it: ``make test`` and ``make demo`` never need a C compiler, and the package runs the pure-Python engine whenever
no compiled one is there or the one there is stale.

Each source is copied under another module name, with its stamp appended as ``SOURCE_SHA256`` (the engine's:
the SHA-256 of engine.py; the callbacks': over every schema/*.py and engine.py), compiled in a temporary copy of
the package, and only the extension modules are copied into the package (git-ignored);
``piece_by_piece_serialize._lalr.choice`` and ``.schema._choice`` use them while the stamps match the sources
(Note [compiled engine]). ``COPIES`` is the one place that names the source files.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "piece_by_piece_serialize"
PACKAGE_DIR = REPO / "src" / PACKAGE
# What is compiled: (source, the copy's module path in the package). The copies' names are the ones
# _lalr/choice.py and schema/_choice.py import; the sources are named here only.
ENGINE_SOURCE = PACKAGE_DIR / "_lalr" / "engine.py"
CALLBACKS_SOURCE = PACKAGE_DIR / "schema" / "_transform.py"
COPIES = ((ENGINE_SOURCE, "_lalr/_compiled"), (CALLBACKS_SOURCE, "schema/_transform_compiled"))


def missing_tool() -> str | None:
    """Why the engine cannot be compiled here (no mypyc, no C compiler), or None."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install mypy)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", compiler).split()[0]) is None:
        return f"no C compiler ({compiler}) on PATH"
    return None


def _glob(folder: Path, copy: str) -> list[Path]:
    name = copy.rpartition("/")[2]
    return sorted(folder.glob(f"{name}*.so")) + sorted(folder.glob(f"{name}*.pyd"))


def artifacts() -> list[Path]:
    """The compiled copies' files in the package (each extension module and mypyc's shared part)."""
    return [path for _, copy in COPIES for path in _glob((PACKAGE_DIR / copy).parent, copy)]


def stamps() -> dict[str, str]:
    """Each copy's SOURCE_SHA256, computed by the functions the package checks it with (one definition)."""
    # the build must run whatever a stale build left, so the package's choice must not refuse it
    os.environ["PBP_ENGINE"] = "python"
    sys.path.insert(0, str(REPO / "src"))
    from piece_by_piece_serialize._lalr import choice
    from piece_by_piece_serialize.schema import _transform

    return {"_lalr/_compiled": choice.source_sha256(), "schema/_transform_compiled": choice.sources_sha256(_transform)}


def current() -> bool:
    """Whether the compiled copies are in the package and current: the package's own choice takes them (their
    stamps match the sources), asked in a fresh process that forces neither engine."""
    env = {k: v for k, v in os.environ.items() if k != "PBP_ENGINE"}
    code = (f"from {PACKAGE}._lalr import choice; from {PACKAGE}.schema import _choice; "
            "print(choice.NAME, _choice.NAME)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    return done.returncode == 0 and done.stdout.split() == ["compiled", "compiled"]


def build() -> list[Path]:
    """Compile the copies and put them into the package, replacing an earlier build; the files written."""
    stamp_of = stamps()
    with tempfile.TemporaryDirectory(prefix="pbp-accel-") as tmp:
        # the package's sources, so that each copy is type-checked against what it imports and named
        # piece_by_piece_serialize.<copy> (no build artifact is copied: *.py only)
        shutil.copytree(PACKAGE_DIR, Path(tmp) / PACKAGE, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", ".*_cache"))
        built = []
        # one mypyc run per copy: a run over both would put their shared library at the top level, outside the package
        for source, copy in COPIES:
            path = Path(tmp) / PACKAGE / f"{copy}.py"
            path.write_bytes(
                source.read_bytes() + f"\n\n# the stamp of the sources this copy was compiled from (bench/build_accel.py)\n"
                f'SOURCE_SHA256 = "{stamp_of[copy]}"\n'.encode()
            )
            # mypyc checks the copy as mypy --strict would; a type error stops the build instead of being compiled
            # in (its compiler lines are shown only when it fails)
            done = subprocess.run([sys.executable, "-m", "mypyc", "--strict", f"{PACKAGE}/{copy}.py"], cwd=tmp,
                                  capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(done.stdout + done.stderr)
                raise SystemExit(f"mypyc failed on {source.relative_to(REPO)} (exit {done.returncode}); the pure code runs")
            found = _glob(path.parent, copy)
            if not found:
                raise RuntimeError(f"mypyc wrote no extension module for {copy}")
            built += [(found_path, (PACKAGE_DIR / copy).parent) for found_path in found]
        for old in artifacts():
            old.unlink()
        written = []
        for path, folder in built:
            shutil.copy2(path, folder / path.name)
            written.append(folder / path.name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--if-possible", action="store_true", help="exit 0, with a message, when mypyc or a C compiler is missing")
    parser.add_argument("--if-stale", action="store_true", help="build only when the compiled copies are missing or stale")
    parser.add_argument("--clean", action="store_true", help="remove the compiled copies instead (the pure code runs)")
    args = parser.parse_args(argv)
    if args.clean:
        for path in artifacts():
            path.unlink()
            print(f"removed {path.relative_to(REPO)}")
        return 0
    why = missing_tool()
    if why is not None:
        print(f"compiled engine not built: {why}; the pure-Python engine runs", file=sys.stderr)
        return 0 if args.if_possible else 1
    if args.if_stale and current():
        print("compiled engine current: not rebuilt", file=sys.stderr)
        return 0
    for path in build():
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
