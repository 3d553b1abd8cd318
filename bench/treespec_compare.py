"""Section 3: TreeSpec names against the original pickle scheme and torch's JSON ``treespec_dumps``.

The original scheme is re-implemented here from its description (``"___" + base32(zlib(pickle((n, spec))))``
with ``=`` written ``_``, decoded with ``pickle.loads``); it lives in this benchmark only. On every case of the
realistic corpus (``tests/treespec_name/corpus_inputs.py``) it measures name lengths (ours, the original,
``treespec_dumps`` where torch can dump the spec) and, interleaved in the same run, the median time to encode
and to decode with ours, the original and ``treespec_dumps``/``treespec_loads``. "cold" decode bypasses our
cache (a name from another process); "warm" decode is the cached path callers hit on every forward (and on the
first decode of a name encoded in this process). Times are the median over the corpus of each case's median.

Run inside the suite (``bench/run.py --only treespec``) or alone for the per-case table:
``.venv/bin/python bench/treespec_compare.py``.
"""

from __future__ import annotations

import argparse
import base64
import pickle
import statistics
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "treespec_name"))

from _timing import Row, interleaved, section  # noqa: E402


def original_as_name(spec: Any, n: int) -> str:
    return "___" + base64.b32encode(zlib.compress(pickle.dumps((n, spec)))).decode("ascii").replace("=", "_")


def original_from_name(name: str) -> tuple[int, Any]:
    return pickle.loads(zlib.decompress(base64.b32decode(name[3:].replace("_", "="))))


def measure(repeats: int, number: int) -> list[dict[str, Any]]:
    """One record per corpus case: lengths and median times (seconds) of each operation."""
    import torch.utils._pytree as pytree
    from corpus_inputs import build_corpus

    from piece_by_piece_serialize import treespec_name
    from piece_by_piece_serialize.treespec_name import tree_spec_as_name, tree_spec_from_name

    warnings.simplefilter("ignore", FutureWarning)  # the original's pickles reference the deprecated LeafSpec
    cold_decode = treespec_name._decode  # the uncached path
    # treespec_loads is wrapped in an unbounded functools.lru_cache: time its uncached body, like our cold decode
    _uncached_loads = getattr(pytree.treespec_loads, "__wrapped__", pytree.treespec_loads)
    limits = treespec_name.DEFAULT_LIMITS
    tree_spec_from_name("___v1_X")  # build the parser once, outside the timings
    records = []
    for case, tree in build_corpus().items():
        flat, spec = pytree.tree_flatten(tree)
        n = len(flat)
        ours = tree_spec_as_name(spec, n)
        orig = original_as_name(spec, n)
        if tree_spec_from_name(ours)[1] != spec or original_from_name(orig)[1] != spec:
            raise AssertionError(f"{case}: a name does not decode to its spec")
        try:
            dumped = pytree.treespec_dumps(spec)
        except Exception:  # torch cannot dump this spec (unregistered namedtuple, return_types, ...)
            dumped = None
        fns = {
            "enc_ours": lambda: tree_spec_as_name(spec, n),
            "enc_orig": lambda: original_as_name(spec, n),
            "dec_ours_cold": lambda: cold_decode(ours, limits),
            "dec_orig": lambda: original_from_name(orig),
            "dec_ours_warm": lambda: tree_spec_from_name(ours),
        }
        if dumped is not None:
            fns["enc_dumps"] = lambda: pytree.treespec_dumps(spec)
            fns["dec_loads"] = lambda: _uncached_loads(dumped)
        times = interleaved(fns, repeats=repeats, number=number)
        records.append({"case": case, "ours": len(ours), "orig": len(orig),
                        "dumps": None if dumped is None else len(dumped), "t": times})
    return records


def _med(values: list[float]) -> float:
    return statistics.median(values)


@section("treespec")
def treespec_rows(args: argparse.Namespace) -> list[Row]:
    records = measure(3 if args.quick else 7, 10 if args.quick else 40)
    n = len(records)
    dumpable = [r for r in records if r["dumps"] is not None]
    note = f"{n} corpus cases"
    dnote = f"{len(dumpable)} cases treespec_dumps handles"

    def t(key: str, rs: list[dict[str, Any]] = records) -> float:
        return _med([r["t"][key] for r in rs])

    length = lambda key, rs=records: _med([float(r[key]) for r in rs])  # noqa: E731
    return [
        Row("treespec", "median name length", length("ours"), "original pickle name", length("orig"), 0.4,
            unit="chars", note=note),
        Row("treespec", "max name length", float(max(r["ours"] for r in records)), "original pickle name",
            float(max(r["orig"] for r in records)), unit="chars", note=note),
        Row("treespec", "median name length", length("ours", dumpable), "treespec_dumps JSON",
            length("dumps", dumpable), unit="chars", note=dnote),
        Row("treespec", "max name length", float(max(r["ours"] for r in dumpable)), "treespec_dumps JSON",
            float(max(r["dumps"] for r in dumpable)), unit="chars", note=dnote),
        Row("treespec", "encode, per name", t("enc_ours"), "original pickle name", t("enc_orig"), 1.0, note=note),
        Row("treespec", "decode, cold, per name", t("dec_ours_cold"), "original pickle name", t("dec_orig"), 1.0,
            note=note),
        Row("treespec", "decode, warm (cached), per name", t("dec_ours_warm"), "original pickle name",
            t("dec_orig"), 0.05, note=note),
        Row("treespec", "encode, per name", t("enc_ours", dumpable), "treespec_dumps", t("enc_dumps", dumpable),
            note=dnote),
        Row("treespec", "decode, cold, per name", t("dec_ours_cold", dumpable), "treespec_loads",
            t("dec_loads", dumpable), note=dnote),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=40)
    args = parser.parse_args(argv)
    records = measure(args.repeat, args.number)
    print("| case | ours | original | dumps | enc ours/orig µs | cold dec ours/orig µs | warm dec µs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in records:
        t = r["t"]
        print(f"| {r['case']} | {r['ours']} | {r['orig']} | {'' if r['dumps'] is None else r['dumps']} "
              f"| {t['enc_ours'] * 1e6:.1f} / {t['enc_orig'] * 1e6:.1f} "
              f"| {t['dec_ours_cold'] * 1e6:.1f} / {t['dec_orig'] * 1e6:.1f} | {t['dec_ours_warm'] * 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
