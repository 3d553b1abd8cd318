"""Write the two generated documentation files, so that each text has one source.

* ``README.md`` is the site's home page, ``docs/index.md``, with its relative links re-rooted at the top of the
  repository (``custom_op.md`` becomes ``docs/custom_op.md``, ``../grammars/schema.lark`` becomes
  ``grammars/schema.lark``), so that they work on GitHub and in the sdist as they do on the site.
* ``docs/benchmarks.md`` is ``bench/RESULTS.md`` (written by ``make bench``) under a short introduction.

``tests/test_readme.py`` fails when either file is not what this script produces: run
``python docs/build_readme.py`` after editing ``docs/index.md`` or after ``make bench`` (which runs it).
``--check`` exits 1 instead of writing when a file is stale.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# A Markdown link or image target: `](target)`. Targets with a scheme (https:, mailto:) or starting with '#'
# or '/' are left alone.
_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")

_README_FOOTER = (
    "\n---\n\n"
    "This README is the home page of the documentation, `docs/index.md`, with its links re-rooted by "
    "`python docs/build_readme.py`; a test keeps the two in sync.\n"
)

_BENCH_HEAD = (
    "# Benchmarks\n\n"
    "`make bench` measures ours against the alternatives in the same process, interleaved, with warm-up "
    "and repeats, and reports ratios of medians (these machines are shared and noisy: absolute times are "
    "not comparable from run to run, ratios are). Methods and the benchmark code: `bench/README.md` in the "
    "repository.\n\n"
    "<!-- Generated from bench/RESULTS.md by docs/build_readme.py (make bench runs it): edit those, not this. -->\n\n"
)


def _reroot(match: re.Match[str]) -> str:
    target = match.group(1)
    path, sep, anchor = target.partition("#")
    rooted = posixpath.normpath(posixpath.join("docs", path))
    if path.endswith("/"):
        rooted += "/"
    return f"]({rooted}{sep}{anchor})"


def readme() -> str:
    """README.md: docs/index.md with every relative link re-rooted at the repository's top."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    return _LINK.sub(_reroot, home).rstrip("\n") + "\n" + _README_FOOTER


def benchmarks() -> str:
    """docs/benchmarks.md: the latest bench/RESULTS.md, its title replaced by the page's."""
    results = ROOT / "bench" / "RESULTS.md"
    if not results.is_file():
        return _BENCH_HEAD + "No results yet: run `make bench`.\n"
    lines = results.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    chart = "\n![ours / baseline ratios](../bench/ratios.svg)\n" if (ROOT / "bench" / "ratios.svg").is_file() else ""
    return _BENCH_HEAD + "\n".join(lines).strip() + "\n" + chart


def outputs() -> dict[Path, str]:
    """Every generated file and the text it must hold."""
    return {ROOT / "README.md": readme(), DOCS / "benchmarks.md": benchmarks()}


def main() -> int:
    stale = [path for path, text in outputs().items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if "--check" in sys.argv[1:]:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `python docs/build_readme.py`", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
