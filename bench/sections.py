"""The benchmark sections. Each function measures ours and its baselines in the same run and returns rows.

Baselines that no longer exist as code (the original regex name extraction, the original
pickle+zlib+base32 TreeSpec names, the original serialization algorithm) are re-implemented here from
their description, in the benchmark only: they are what users would otherwise run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time

from _timing import Row, fitted_exponent, interleaved, section

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
    number = 2000 if args.quick else 20000
    tw = interleaved(
        {"ours": lambda: extract(schema), "regex": lambda: _original_extract_names(schema)},
        repeats=_repeats(args, 7),
        number=number,
    )
    rows.append(Row("schema", "extract_names_from_schema, warm", tw["ours"], "original regex", tw["regex"], 0.05))
    return rows


@section("scaling")
def scaling(args: argparse.Namespace) -> list[Row]:
    from piece_by_piece_serialize import schema as ours

    sizes = [1, 5, 25, 50, 100, 200]
    times = []
    for k in sizes:
        text = "ns::op(" + ", ".join(f"Tensor x{i}" for i in range(k)) + ") -> Tensor"
        times.append(interleaved({"p": lambda text=text: ours.parse_schema(text)}, repeats=_repeats(args, 7), number=20)["p"])
    expo = fitted_exponent([float(s) for s in sizes[2:]], times[2:])
    return [
        Row("scaling", "schema parse time vs arguments (25..200): fitted exponent", expo, "linear", 1.0, 1.1, unit="")
    ]


def _subprocess_median(cmd: list[str], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@section("startup")
def startup(args: argparse.Namespace) -> list[Row]:
    py = sys.executable
    r = _repeats(args, 15)
    bare = _subprocess_median([py, "-c", "pass"], r)
    ours = _subprocess_median(
        [py, "-c", "import sys, piece_by_piece_serialize; assert 'torch' not in sys.modules"], r
    )
    lark = _subprocess_median([py, "-c", "import lark"], r)
    import_ms = ours - bare
    return [
        Row("startup", "import piece_by_piece_serialize (no torch), minus bare interpreter", import_ms, "60 ms budget", 0.060, 1.0),
        Row("startup", "import piece_by_piece_serialize", import_ms, "import lark", lark - bare),
    ]
