"""README.md is assembled from docs/ and bench/RESULTS.md, and its first-look examples run as shown."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _builder():
    spec = importlib.util.spec_from_file_location("build_readme", ROOT / "docs" / "build_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_generated_from_docs() -> None:
    expected = _builder().build()
    actual = (ROOT / "README.md").read_text(encoding="utf-8")
    assert actual == expected, "README.md is stale: run `python docs/build_readme.py`"


def test_readme_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_first_look_examples_run_as_shown() -> None:
    result = doctest.testfile(str(ROOT / "docs" / "_intro.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0
