"""The benchmark sections. Each function measures ours and its baselines in the same run and returns rows.

Baselines that no longer exist as code (the original regex name extraction, the original
pickle+zlib+base32 TreeSpec names, the original serialization algorithm) are re-implemented here from
their description, in the benchmark only: they are what users would otherwise run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

from _timing import Row, fastest_times, fitted_exponent, interleaved, section

# The original extract_names_from_schema: one regular expression (baseline only).
_ORIGINAL_NAMES_RE = re.compile(r"\w+\??\s+(\w+)")


def _original_extract_names(schema: str) -> list[str]:
    return _ORIGINAL_NAMES_RE.findall(schema)


def _repeats(args: argparse.Namespace, full: int) -> int:
    return 3 if args.quick else full


def _torch_schemas() -> list[str]:
    import torch

    return [str(s) for s in torch._C._jit_get_all_schemas()]


@section("schema")
def schema_parse(args: argparse.Namespace) -> list[Row]:
    import torch
    from torchgen.model import FunctionSchema as TorchgenSchema

    from piece_by_piece_serialize import schema as ours

    corpus = _torch_schemas()
    n = len(corpus)
    torchgen_ok = []
    for s in corpus:
        try:
            TorchgenSchema.parse(s)
        except Exception:  # torchgen rejects schemas it does not model; we only time those it accepts
            continue
        torchgen_ok.append(s)

    parse_schema = ours.parse_schema

    def ours_all() -> None:
        for s in corpus:
            parse_schema(s)

    def ours_subset() -> None:
        for s in torchgen_ok:
            parse_schema(s)

    def torch_all() -> None:
        for s in corpus:
            torch._C.parse_schema(s)

    def regex_all() -> None:
        for s in corpus:
            _original_extract_names(s)

    def torchgen_subset() -> None:
        for s in torchgen_ok:
            TorchgenSchema.parse(s)

    t = interleaved(
        {"ours": ours_all, "torch": torch_all, "regex": regex_all, "ours_sub": ours_subset, "torchgen": torchgen_subset},
        repeats=_repeats(args, 5),
    )
    note = f"{n} schemas"
    rows = [
        Row("schema", "parse, cold, per schema", t["ours"] / n, "torch._C.parse_schema (C++)", t["torch"] / n, 8.0, note=note),
        Row("schema", "parse, cold, per schema", t["ours"] / n, "original regex names", t["regex"] / n, note=note),
        Row(
            "schema",
            "parse, cold, per schema",
            t["ours_sub"] / len(torchgen_ok),
            "torchgen FunctionSchema.parse",
            t["torchgen"] / len(torchgen_ok),
            note=f"{len(torchgen_ok)} schemas torchgen accepts",
        ),
    ]

    # warm extract_names_from_schema: the hot-path case, the same schema again and again
    schema = "ns::op(Tensor x, Tensor? mask=None, *, int[] dims=[0, 1], float eps=1e-05) -> Tensor"
    extract = ours.extract_names_from_schema
    extract(schema)
    number = 2000 if args.quick else 10000
    tw = interleaved(
        {"ours": lambda: extract(schema), "regex": lambda: _original_extract_names(schema)},
        repeats=_repeats(args, 21),
        number=number,
    )
    rows.append(Row("schema", "extract_names_from_schema, warm", tw["ours"], "original regex", tw["regex"], 0.05))
    return rows


def _with_bytecode_caches() -> dict[str, str]:
    """The environment for timed processes: Python may write and read ``__pycache__``, as an installed package
    does (some sandboxes set PYTHONDONTWRITEBYTECODE, which makes every start compile every module again)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _subprocess_median(cmd: list[str], repeats: int) -> float:
    """Median wall time of a whole process (start-up included), after one untimed run that warms the caches."""
    env = _with_bytecode_caches()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _import_median(module: str, repeats: int) -> float:
    """Median time of ``import module`` in a fresh interpreter, timed inside it (start-up excluded)."""
    code = (
        "import sys, time; t = time.perf_counter(); import " + module + "; t = time.perf_counter() - t; "
        "assert 'torch' not in sys.modules and 'lark' not in sys.modules or '" + module + "' == 'lark'; print(t)"
    )
    env = _with_bytecode_caches()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    samples = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
        samples.append(float(out))
    return statistics.median(samples)


@section("startup")
def startup(args: argparse.Namespace) -> list[Row]:
    import tempfile
    from pathlib import Path

    py = sys.executable
    r = _repeats(args, 15)
    ours = _import_median("piece_by_piece_serialize", r)
    lark = _import_median("lark", r)
    rows = [
        Row("startup", "import piece_by_piece_serialize (no torch, no lark)", ours, "60 ms budget", 0.060, 1.0),
        Row("startup", "import piece_by_piece_serialize", ours, "import lark", lark),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one.schema"
        one.write_text("mylib::op(Tensor x, Tensor? mask=None, *, int[] dims=[0, 1], float eps=1e-05) -> Tensor\n")
        r = _repeats(args, 7)
        cli = _subprocess_median([py, "-m", "piece_by_piece_serialize", "schema", "check", "--quiet", str(one)], r)
        torch_check = _subprocess_median(
            [py, "-c", f"import torch; torch._C.parse_schema(open({str(one)!r}).read().strip())"], r
        )
        bare = _subprocess_median([py, "-c", "pass"], r)
    rows.append(Row("startup", "CLI `schema check` on one schema (whole process)", cli,
                    "python -c 'import torch; parse_schema(...)'", torch_check))
    rows.append(Row("startup", "CLI `schema check` on one schema (whole process)", cli, "bare `python -c pass`", bare))
    return rows


@section("scaling")
def scaling(args: argparse.Namespace) -> list[Row]:
    from piece_by_piece_serialize import schema as ours

    sizes = [1, 5, 25, 50, 100, 200]
    fns = {}
    for k in sizes:
        text = "ns::op(" + ", ".join(f"Tensor x{i}" for i in range(k)) + ") -> Tensor"
        fns[k] = lambda text=text: ours.parse_schema(text)
    fastest = fastest_times(fns, repeats=_repeats(args, 15), number=5)
    times = [fastest[k] for k in sizes]
    expo = fitted_exponent([float(s) for s in sizes[2:]], times[2:])
    rows = [
        Row("scaling", "schema parse time vs arguments (25..200): fitted exponent (fastest of repeats)", expo, "linear", 1.0, 1.1, unit="")
    ]
    rows.append(_union_scaling(args))
    rows.append(_name_scaling(args))
    return rows


def _union_scaling(args: argparse.Namespace) -> Row:
    """Parse time of a Union against its number of distinct members, 10 to 1,000: each member a Future of a
    3-tuple of builtin types, so that torch's merging loop tries every pair (none merges)."""
    import itertools

    from piece_by_piece_serialize import schema as ours

    atoms = "int str bool Tensor Device Stream float complex Generator Storage".split()
    sizes = [10, 30, 100, 300, 1000]
    fns = {}
    for k in sizes:
        members = itertools.islice(itertools.product(atoms, repeat=3), k)
        text = "f(Union(" + ", ".join(f"Future(({a}, {b}, {c}))" for a, b, c in members) + ") x) -> ()"
        fns[k] = lambda text=text: ours.parse_schema(text)
    fastest = fastest_times(fns, repeats=_repeats(args, 9))
    expo = fitted_exponent([float(s) for s in sizes], [fastest[k] for k in sizes])
    return Row("scaling", "Union of distinct Futures, parse time vs members (10..1000): fitted exponent (fastest of "
               "repeats)", expo, "linear", 1.0, 1.1, unit="")


def _name_scaling(args: argparse.Namespace) -> Row:
    """Encode + cold decode of a TreeSpec name against the number of spec nodes, 1 to 10,000."""
    import torch.utils._pytree as pytree

    from piece_by_piece_serialize import treespec_name

    # Each item is a dict {"a": leaf, "b": (leaf, leaf)}: 5 nodes of three kinds, so that nothing collapses
    # into a run; one item more or less changes the name, and the spec grows exactly linearly.
    counts = [1, 10, 100, 500, 1000, 2000]
    sizes, fns = [], {}
    for m in counts:
        tree = [{"a": 0, "b": (1, 2)} for _ in range(m)]
        flat, spec = pytree.tree_flatten(tree)
        name = treespec_name.tree_spec_as_name(spec, len(flat))
        limits = treespec_name.DEFAULT_LIMITS

        def one(spec=spec, n=len(flat), name=name) -> None:
            treespec_name.tree_spec_as_name(spec, n)
            treespec_name._decode(name, limits)

        fns[m] = one
        sizes.append(float(spec.num_nodes))
    fastest = fastest_times(fns, repeats=_repeats(args, 11))
    times = [fastest[m] for m in counts]
    expo = fitted_exponent(sizes[2:], times[2:])
    return Row("scaling", f"TreeSpec name encode+decode time vs nodes ({int(sizes[2])}..{int(sizes[-1])}): "
               "fitted exponent (fastest of repeats)", expo, "linear", 1.0, 1.1, unit="")
