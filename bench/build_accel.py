"""Build the optional compiled LALR engine: ``_lalr/engine.py`` compiled with mypyc, as ``_lalr/_compiled``.

Run: ``python bench/build_accel.py [--if-possible]`` (``make accel``; ``make bench`` runs it with
``--if-possible``, which only prints why when mypyc or a C compiler is missing, and exits 0). Nothing else builds
it: ``make test`` and ``make demo`` never need a C compiler, and the package runs the pure-Python engine whenever
no compiled one is there or the one there is stale.

The engine source is copied under another module name, with the SHA-256 of the source appended as
``SOURCE_SHA256``, compiled in a temporary directory, and only the extension modules are copied into the package
(git-ignored); ``piece_by_piece_serialize._lalr.choice`` uses them while the stamp matches the source (Note
[compiled engine] there). ``ENGINE_SOURCE`` is the one place that names the source file.
"""

from __future__ import annotations

import argparse
import hashlib
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
# The pure engine's source (the one place that names it) and the package the compiled copy goes into
ENGINE_SOURCE = PACKAGE_DIR / "_lalr" / "engine.py"
SUBPACKAGE = "_lalr"
TARGET_DIR = PACKAGE_DIR / SUBPACKAGE
# The compiled copy's module name; _lalr/choice.py imports it by this name
COMPILED = "_compiled"


def missing_tool() -> str | None:
    """Why the engine cannot be compiled here (no mypyc, no C compiler), or None."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install mypy)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", compiler).split()[0]) is None:
        return f"no C compiler ({compiler}) on PATH"
    return None


def artifacts() -> list[Path]:
    """The compiled engine's files in the package (the extension module and mypyc's shared part)."""
    return sorted(TARGET_DIR.glob(f"{COMPILED}*.so")) + sorted(TARGET_DIR.glob(f"{COMPILED}*.pyd"))


def build() -> list[Path]:
    """Compile the engine and copy it into the package, replacing an earlier build; the files written."""
    source = ENGINE_SOURCE.read_bytes()
    stamp = hashlib.sha256(source).hexdigest()
    with tempfile.TemporaryDirectory(prefix="pbp-accel-") as tmp:
        # the package layout, so that the compiled module is named piece_by_piece_serialize._lalr._compiled
        package = Path(tmp) / PACKAGE / SUBPACKAGE
        package.mkdir(parents=True)
        (package.parent / "__init__.py").write_text("", encoding="utf-8")
        (package / "__init__.py").write_text("", encoding="utf-8")
        copy = package / f"{COMPILED}.py"
        copy.write_bytes(
            source + f"\n\n# the SHA-256 of the source this copy was compiled from (bench/build_accel.py)\n"
            f'SOURCE_SHA256 = "{stamp}"\n'.encode()
        )
        # mypyc checks the copy as mypy --strict would; a type error stops the build instead of being compiled in
        # (its compiler lines are shown only when it fails)
        done = subprocess.run([sys.executable, "-m", "mypyc", "--strict", f"{PACKAGE}/{SUBPACKAGE}/{COMPILED}.py"], cwd=tmp,
                              capture_output=True, text=True)
        if done.returncode:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"mypyc failed on {ENGINE_SOURCE.relative_to(REPO)} (exit {done.returncode}); the pure engine runs")
        built = sorted(package.glob(f"{COMPILED}*.so")) + sorted(package.glob(f"{COMPILED}*.pyd"))
        if not built:
            raise RuntimeError(f"mypyc wrote no extension module for {COMPILED}")
        for old in artifacts():
            old.unlink()
        written = []
        for path in built:
            shutil.copy2(path, TARGET_DIR / path.name)
            written.append(TARGET_DIR / path.name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--if-possible", action="store_true", help="exit 0, with a message, when mypyc or a C compiler is missing")
    parser.add_argument("--clean", action="store_true", help="remove the compiled engine instead (the pure one runs)")
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
    for path in build():
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
