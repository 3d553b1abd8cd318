"""TreeSpec names against the original pickle scheme and torch's JSON ``treespec_dumps``, on the realistic corpus.

The original scheme is re-implemented here from its description (``"___" + base32(zlib(pickle((n, spec))))``
with ``=`` written ``_``, decoded with ``pickle.loads``); it lives in this benchmark only. For every corpus case
(``tests/treespec/corpus_inputs.py``) it measures name lengths (ours, original, ``treespec_dumps`` where torch can
dump the spec) and, in the same run and interleaved, the median time to encode and to decode with ours and with
the original. "cold" decode bypasses our cache (a name from another process); "warm" decode is the cached path
callers hit on every forward (and on the first decode of a name encoded in this process).

Run: ``.venv/bin/python bench/treespec_compare.py [--repeat N]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import base64
import pickle
import statistics
import sys
import time
import warnings
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "treespec"))

import torch.utils._pytree as pytree  # noqa: E402
from corpus_inputs import build_corpus  # noqa: E402

from piece_by_piece_serialize import treespec_name  # noqa: E402
from piece_by_piece_serialize.treespec_name import tree_spec_as_name, tree_spec_from_name  # noqa: E402


def original_as_name(spec: pytree.TreeSpec, n: int) -> str:
    return "___" + base64.b32encode(zlib.compress(pickle.dumps((n, spec)))).decode("ascii").replace("=", "_")


def original_from_name(name: str) -> tuple[int, pytree.TreeSpec]:
    return pickle.loads(zlib.decompress(base64.b32decode(name[3:].replace("_", "="))))


def _median_seconds(fn, repeat: int, number: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=50)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", FutureWarning)  # the original's pickles reference the deprecated LeafSpec

    corpus = build_corpus()
    rows = []
    cold_decode = treespec_name._decode  # the uncached path
    limits = treespec_name.DEFAULT_LIMITS
    tree_spec_from_name("___v1_X")  # build the parser once, outside the timings
    for case, tree in corpus.items():
        flat, spec = pytree.tree_flatten(tree)
        n = len(flat)
        ours = tree_spec_as_name(spec, n)
        orig = original_as_name(spec, n)
        assert tree_spec_from_name(ours)[1] == spec and original_from_name(orig)[1] == spec
        try:
            dumps = len(pytree.treespec_dumps(spec))
        except Exception:  # torch cannot dump this spec (unregistered namedtuple, return_types, ...)
            dumps = None
        timings = {}
        # Interleave ours and the original so that machine noise hits both alike.
        for label, fn in (
            ("enc_ours", lambda: tree_spec_as_name(spec, n)),
            ("enc_orig", lambda: original_as_name(spec, n)),
            ("dec_ours_cold", lambda: cold_decode(ours, limits)),
            ("dec_orig", lambda: original_from_name(orig)),
            ("dec_ours_warm", lambda: tree_spec_from_name(ours)),
        ):
            timings[label] = _median_seconds(fn, args.repeat, args.number)
        rows.append((case, len(ours), len(orig), dumps, timings))

    def med(values: list[float]) -> float:
        return statistics.median(values)

    ours_len = [r[1] for r in rows]
    orig_len = [r[2] for r in rows]
    dumps_len = [r[3] for r in rows if r[3] is not None]
    us = {k: med([r[4][k] for r in rows]) * 1e6 for k in rows[0][4]}
    print(f"corpus: {len(rows)} cases; torch.utils._pytree.treespec_dumps handled {len(dumps_len)} of them\n")
    print("| measure | ours | original (pickle) | treespec_dumps |")
    print("|---|---:|---:|---:|")
    print(f"| median name length (chars) | {med(ours_len):.0f} | {med(orig_len):.0f} | {med(dumps_len):.0f} |")
    print(f"| max name length (chars) | {max(ours_len)} | {max(orig_len)} | {max(dumps_len)} |")
    print(f"| median encode (µs) | {us['enc_ours']:.1f} | {us['enc_orig']:.1f} | |")
    print(f"| median decode, cold (µs) | {us['dec_ours_cold']:.1f} | {us['dec_orig']:.1f} | |")
    print(f"| median decode, warm/cached (µs) | {us['dec_ours_warm']:.2f} | | |")
    print(f"\nratios ours/original: encode {us['enc_ours'] / us['enc_orig']:.2f}, cold decode "
          f"{us['dec_ours_cold'] / us['dec_orig']:.2f}, warm decode {us['dec_ours_warm'] / us['dec_orig']:.3f}")
    print("\n| case | ours | original | dumps | enc ours/orig µs | cold dec ours/orig µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, lo, lg, ld, t in rows:
        print(f"| {case} | {lo} | {lg} | {'' if ld is None else ld} | {t['enc_ours'] * 1e6:.1f} / "
              f"{t['enc_orig'] * 1e6:.1f} | {t['dec_ours_cold'] * 1e6:.1f} / {t['dec_orig'] * 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
