"""README.md is docs/index.md with its links re-rooted, docs/benchmarks.md is bench/RESULTS.md, both in sync;
the README stays short and its examples run as shown."""

from __future__ import annotations

import doctest
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _builder():
    spec = importlib.util.spec_from_file_location("build_readme", ROOT / "docs" / "build_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_in_sync() -> None:
    for path, expected in _builder().outputs().items():
        actual = path.read_text(encoding="utf-8")
        assert actual == expected, f"{path.relative_to(ROOT)} is stale: run `python docs/build_readme.py`"


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_bytes()) < 20_000


def test_readme_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_readme_links_to_every_page_and_each_link_resolves() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets and all((ROOT / t).exists() for t in targets), [t for t in targets if not (ROOT / t).exists()]
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")} - {"docs/index.md"}
    assert pages <= set(targets), pages - set(targets)
    assert "docs/api/index.md" in targets


def test_readme_examples_run_as_shown() -> None:
    # README.md's examples are docs/index.md's (the test above keeps them equal).
    result = doctest.testfile(str(ROOT / "docs" / "index.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 20
    assert result.failed == 0
