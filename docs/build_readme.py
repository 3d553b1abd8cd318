"""Assemble README.md from the documentation sections, so that each section has one source.

The sections live in ``docs/*.md`` (each checked by its own tests where it shows code and output) and the
benchmark table in ``bench/RESULTS.md`` (written by ``make bench``). ``tests/test_readme.py`` fails when
README.md is not what this script produces: run ``python docs/build_readme.py`` after editing a section.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

SECTIONS = ["custom_op.md", "schema.md", "treespec_names.md", "serialization.md", "cli.md", "fuzzing.md"]


def _benchmarks() -> str:
    results = ROOT / "bench" / "RESULTS.md"
    head = (
        "## Benchmarks\n\n"
        "`make bench` measures ours against the alternatives in the same process, interleaved, with warm-up "
        "and repeats, and reports ratios of medians (these machines are shared and noisy: absolute times are "
        "not comparable from run to run, ratios are). Details and methods: [`bench/`](bench/).\n\n"
    )
    if not results.is_file():
        return head + "No results yet: run `make bench`.\n"
    body = results.read_text(encoding="utf-8")
    # The results file opens with its own title; inside the README it is a sub-section.
    lines = body.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    chart = "\n![ours / baseline ratios](bench/ratios.svg)\n" if (ROOT / "bench" / "ratios.svg").is_file() else ""
    return head + "\n".join(lines).strip() + "\n" + chart


def build() -> str:
    parts = [(DOCS / "_intro.md").read_text(encoding="utf-8").rstrip() + "\n"]
    for name in SECTIONS:
        parts.append((DOCS / name).read_text(encoding="utf-8").rstrip() + "\n")
    parts.append(_benchmarks())
    return "\n".join(parts)


def main() -> int:
    text = build()
    target = ROOT / "README.md"
    if "--check" in sys.argv[1:]:
        return 0 if target.read_text(encoding="utf-8") == text else 1
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
