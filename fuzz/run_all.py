"""Run every fuzz harness under libFuzzer for a fixed time and summarise the results.

``make fuzz`` calls ``python fuzz/run_all.py --seconds N``. Each harness runs in its own subprocess, one
after the other (the machine is shared), or ``--jobs J`` at a time (CI, on a machine of its own), with:

* ``-max_total_time=N``, the harness's dictionary ``fuzz/dicts/<target>.dict``, ``-timeout`` and
  ``-rss_limit_mb`` (a slow or memory-hungry input is a finding, not a stall), a per-target ``-max_len``;
* a work corpus ``fuzz/.work/<target>/corpus`` (gitignored; grows across runs) followed by the committed
  seeds ``fuzz/corpus/<target>`` (read only) and the named regression inputs;
* artifacts (crash-/timeout-/oom-/leak- files) written to ``fuzz/.work/<target>/findings/``.

Per harness it prints executions, coverage (libFuzzer's ``cov``/``ft``), the corpus size, findings and
the harness's own counters (differential agreement with torch and so on). The exit status is non-zero
if any harness produced a finding or ended abnormally. ``--ci`` starts every harness from the committed
seeds only (a fresh work corpus), so a CI result does not depend on an earlier local campaign.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
REPO_DIR = FUZZ_DIR.parent
WORK_DIR = FUZZ_DIR / ".work"
REGRESSION_DIR = REPO_DIR / "tests" / "corpus" / "regressions"

# target -> libFuzzer -max_len. Text harnesses get room for long inputs (long and deeply nested text is
# part of what they test); structure-aware harnesses need fewer bytes per choice.
TARGETS: dict[str, int] = {
    "schema": 4096,
    "schema_structured": 2048,
    "treespec_name": 4096,
    "pytree_roundtrip": 2048,
    "type_info": 2048,
    "engine": 4096,
    "manifest": 8192,
    "sym_expr": 2048,
    "archive": 512,
}

TIMEOUT_S = 20  # per input; every target answers in milliseconds, so this only catches hangs
RSS_LIMIT_MB = 3072  # torch and transformers alone take several hundred MB

ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


@dataclass
class Result:
    target: str
    returncode: int
    executions: int | None = None
    cov: int | None = None
    ft: int | None = None
    corpus_units: int | None = None
    findings: list[Path] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)
    log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.findings


def _int_after(line: str, key: str) -> int | None:
    """The integer that follows ``key`` in one libFuzzer status line (``cov: 123``, ``corp: 45/6b``)."""
    at = line.find(key)
    if at < 0:
        return None
    digits = ""
    for ch in line[at + len(key) :].lstrip():
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def parse_log(text: str, result: Result) -> None:
    """Fill executions, coverage and the harness counters from a libFuzzer log."""
    in_counters = False
    for line in text.splitlines():
        if "cov:" in line and line.startswith("#"):
            result.cov = _int_after(line, "cov:") or result.cov
            result.ft = _int_after(line, "ft:") or result.ft
            result.corpus_units = _int_after(line, "corp:") or result.corpus_units
            execs = _int_after(line, "#")
            if execs is not None:
                result.executions = max(execs, result.executions or 0)
        if line.startswith("stat::number_of_executed_units:"):
            result.executions = _int_after(line, "stat::number_of_executed_units:")
        elif line.startswith("Done ") and " runs in " in line:
            result.executions = _int_after(line, "Done ")
        if line.startswith("[") and "] counters:" in line:
            in_counters = True
            result.counters.append(line)
            continue
        if in_counters:
            if line.startswith("  "):
                result.counters.append(line)
            else:
                in_counters = False


def run_one(target: str, seconds: int, ci: bool, extra: list[str]) -> Result:
    work = WORK_DIR / (f"ci-{target}" if ci else target)
    corpus = work / "corpus"
    findings = work / "findings"
    if ci and work.exists():
        shutil.rmtree(work)
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in findings.iterdir()}
    seeds = [FUZZ_DIR / "corpus" / target, REGRESSION_DIR / target]
    cmd = [
        sys.executable,
        str(FUZZ_DIR / f"fuzz_{target}.py"),
        f"-max_total_time={seconds}",
        f"-timeout={TIMEOUT_S}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-max_len={TARGETS[target]}",
        f"-artifact_prefix={findings}/",
        "-print_final_stats=1",
        *extra,
    ]
    dict_file = FUZZ_DIR / "dicts" / f"{target}.dict"
    if dict_file.is_file():
        cmd.append(f"-dict={dict_file}")
    cmd += [str(corpus), *(str(s) for s in seeds if s.is_dir() and any(s.iterdir()))]
    log = work / "log.txt"
    stats_file = work / "counters.txt"
    stats_file.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONHASHSEED="0", PBP_FUZZ_STATS=str(stats_file))
    with log.open("w", encoding="utf-8") as out:
        # The wall time is only a guard against a harness that ignores -max_total_time (startup loads
        # torch and replays the seeds, so allow generously beyond the fuzzing time).
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_DIR, env=env, timeout=seconds * 3 + 600)
            returncode = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = -9
    result = Result(target, returncode, log=log)
    parse_log(log.read_text(encoding="utf-8", errors="replace"), result)
    if not result.counters and stats_file.is_file():
        # a run that ended normally (libFuzzer's exit skips Python's atexit): the last periodic dump
        result.counters = stats_file.read_text(encoding="utf-8").splitlines()
    result.findings = sorted(
        p for p in findings.iterdir() if p.name not in before and p.name.startswith(ARTIFACT_PREFIXES)
    )
    return result


def summary(result: Result) -> str:
    status = "OK" if result.ok else f"FAILED (exit {result.returncode})"
    lines = [
        f"--- {result.target}: {status}",
        f"    executions: {result.executions}",
        f"    coverage: cov {result.cov}, ft {result.ft}, corpus units {result.corpus_units}",
        f"    findings: {len(result.findings)}" + "".join(f"\n      {p}" for p in result.findings),
        f"    log: {result.log}",
    ]
    lines += [f"    {line.strip()}" if not line.startswith("  ") else f"    {line}" for line in result.counters]
    if not result.ok and result.log is not None:
        tail = result.log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
        lines.append("    log tail:")
        lines += [f"      {line}" for line in tail]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=180, help="fuzzing time per harness (default 180)")
    parser.add_argument("--ci", action="store_true", help="start from the committed seeds only")
    parser.add_argument("--only", nargs="*", choices=sorted(TARGETS), help="run only these harnesses")
    parser.add_argument("--jobs", type=int, default=1, help="harnesses run at a time (default 1)")
    parser.add_argument("extra", nargs="*", help="extra libFuzzer flags (after --)")
    args = parser.parse_args(argv)
    targets = args.only or list(TARGETS)
    results = []
    started = time.monotonic()
    # each harness is a subprocess of its own, with its own work folder: threads only wait for them; the
    # summaries are printed in the targets' order, each when it and those before it are done
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        running = [pool.submit(run_one, target, args.seconds, args.ci, args.extra) for target in targets]
        for target, future in zip(targets, running):
            print(f"=== {target}: {args.seconds}s", flush=True)
            result = future.result()
            print(summary(result), flush=True)
            results.append(result)
    bad = [r.target for r in results if not r.ok]
    print(
        f"=== {len(results) - len(bad)}/{len(results)} harnesses without findings"
        f" ({time.monotonic() - started:.0f}s total)" + (f"; FAILED: {', '.join(bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
