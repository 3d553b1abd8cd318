"""Long run of the export's contract (tests/property/test_export_contract.py): random small models and random
``dynamic_shapes``, each export equal to eager inside its declared ranges or a documented refusal.

Run: ``python fuzz/fuzz_export.py --examples 500`` (``make fuzz-export``), or ``--seconds 600`` for rounds of
fresh random examples until that time is spent; prints the counts (models generated, exports, refusals by their
first words) and exits non-zero on a finding, with hypothesis's falsifying example.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "property"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=None, help="run rounds of --examples until this time is spent")
    options = parser.parse_args()
    import test_export_contract as contract
    from hypothesis import HealthCheck, given, settings

    inner = contract.test_the_export_is_equal_to_eager_in_its_ranges_or_a_named_refusal.hypothesis.inner_test
    strategies = contract.test_the_export_is_equal_to_eager_in_its_ranges_or_a_named_refusal.hypothesis._given_kwargs
    # no example database: each round draws fresh examples rather than replaying the last round's
    run = settings(max_examples=options.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))(given(**strategies)(inner))
    failed, start, rounds = 0, time.monotonic(), 0
    try:
        while True:
            run()
            rounds += 1
            if options.seconds is None or time.monotonic() - start >= options.seconds:
                break
    except Exception as exc:  # a finding: hypothesis printed the falsifying example; say what it was and fail
        print(f"finding: {type(exc).__name__}: {exc}", file=sys.stderr)
        failed = 1
    print(f"{rounds} round(s) of up to {options.examples} examples in {time.monotonic() - start:.0f} s")
    for what, n in sorted(contract.COUNTS.items()):
        print(f"{n:6d}  {what}")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
