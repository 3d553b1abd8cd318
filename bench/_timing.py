"""Timing helpers for the benchmark suite: warm-up, repeats, median.

Every comparison in the suite is a ratio of two medians measured in the same process, one right after
the other, because the machines are shared and noisy: absolute times are not comparable across runs,
ratios measured side by side are.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Row:
    """One line of the results table: ours against a baseline, and the target for the ratio."""

    section: str
    what: str
    ours: float  # seconds (or characters for length rows)
    baseline_name: str
    baseline: float
    target: float | None = None  # ratio ours/baseline that must not be exceeded
    unit: str = "s"
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("inf")

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio <= self.target


def median_time(fn: Callable[[], object], *, repeats: int = 7, number: int = 1, warmup: int = 1) -> float:
    """Median over ``repeats`` of the mean time of ``number`` calls of ``fn``, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples)


def interleaved(fns: dict[str, Callable[[], object]], *, repeats: int = 7, number: int = 1) -> dict[str, float]:
    """Median times of several functions measured in alternation, so that drift hits all of them alike."""
    return {k: statistics.median(v) for k, v in interleaved_samples(fns, repeats=repeats, number=number).items()}


def interleaved_samples(fns: dict[str, Callable[[], object]], *, repeats: int, number: int) -> dict[str, list[float]]:
    """The samples of :func:`interleaved`, ``repeats`` per function, each the mean of ``number`` calls; sample ``i``
    of every function is taken in the same round, so paired differences cancel a busy spell."""
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for key, fn in fns.items():
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                samples[key].append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def fastest_times(fns: dict[str, Callable[[], object]], *, repeats: int = 9, number: int = 1) -> dict[str, float]:
    """The fastest sample of each function, measured in alternation like :func:`interleaved`.

    For scaling fits only: noise on a shared machine only ever adds time, so the fastest sample is the closest
    to the cost of the work itself, and alternating the sizes spreads any busy period over all of them.
    """
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for key, fn in fns.items():
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                samples[key].append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {k: min(v) for k, v in samples.items()}


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.2f} µs"
    return f"{seconds * 1e9:.0f} ns"


# name -> function(args) -> rows; filled by the @section decorator in sections.py
SECTIONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {}


def section(name: str) -> Callable[[Callable[[argparse.Namespace], list[Row]]], Callable[[argparse.Namespace], list[Row]]]:
    def register(fn: Callable[[argparse.Namespace], list[Row]]) -> Callable[[argparse.Namespace], list[Row]]:
        SECTIONS[name] = fn
        return fn

    return register


def fitted_exponent(sizes: list[float], times: list[float]) -> float:
    """Slope of log(time) against log(size): 1.0 is linear, 2.0 quadratic."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


