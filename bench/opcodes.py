"""The profile behind bench/README.md's "where the targets are not met": Python bytecodes executed, by function.

Counts are deterministic (``sys.settrace`` with opcode events), unlike times on a shared machine, and they rank
where a pure-Python parse spends its time well enough to choose what to change: a cold schema parse
(every 8th schema torch registers) or a cold TreeSpec name decode (the 48-case corpus, cache bypassed).
``--lines`` breaks the engine's parse loop down by source line.

Run: ``.venv/bin/python bench/opcodes.py schema|treespec [--lines]``.
"""

from __future__ import annotations

import argparse
import collections
import linecache
import os
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "treespec_name"))
# bytecodes are the pure engine's: a compiled one (make accel) executes none of its own, and would drop out of the
# profile; set before the package is imported, which chooses its engine once
os.environ.setdefault("PBP_ENGINE", "python")


def _texts(which: str) -> tuple[list[str], Callable[[str], Any]]:
    if which == "schema":
        import torch

        from piece_by_piece_serialize import schema

        corpus = [str(s) for s in torch._C._jit_get_all_schemas()][::8]
        return corpus, schema.parse_schema
    import torch.utils._pytree as pytree
    from corpus_inputs import build_corpus

    from piece_by_piece_serialize import treespec_name

    names = []
    for tree in build_corpus().values():
        flat, spec = pytree.tree_flatten(tree)
        names.append(treespec_name.tree_spec_as_name(spec, len(flat)))
    limits = treespec_name.DEFAULT_LIMITS
    return names, lambda name: treespec_name._decode(name, limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=("schema", "treespec"))
    parser.add_argument("--lines", action="store_true", help="the engine's parse loop by source line")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    texts, run = _texts(args.which)
    run(texts[0])  # engines built outside the count
    by_function: collections.Counter = collections.Counter()
    by_line: collections.Counter = collections.Counter()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            by_function[(Path(code.co_filename).name, code.co_name)] += 1
            if code.co_name == "parse" and code.co_filename.endswith("_lalr/engine.py"):
                by_line[(code.co_filename, frame.f_lineno)] += 1
        return trace

    sys.settrace(trace)
    try:
        for text in texts:
            run(text)
    finally:
        sys.settrace(None)
    n = len(texts)
    total = sum(by_function.values())
    print(f"{args.which}: {total / n:.0f} opcodes per text over {n} texts")
    for (filename, function), count in by_function.most_common(args.top):
        print(f"  {count / n:7.0f}  {100 * count / total:4.1f}%  {filename}:{function}")
    if args.lines:
        print("engine parse loop by line:")
        for (filename, line), count in sorted(by_line.items(), key=lambda item: item[0][1] or 0):
            if line:
                print(f"  {count / n:7.1f}  {line:4d} {linecache.getline(filename, line).rstrip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
