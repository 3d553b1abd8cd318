"""Shared plumbing for the fuzz harnesses: byte reader, finding reports, counters, atheris start-up.

Every harness is split in two: a pure property function ``check(data: bytes) -> None`` that raises
:class:`Finding` (or lets an unexpected exception escape, wrapped with the input's repr) when a property
fails, and a thin ``main()`` that instruments the project's modules and hands ``check`` to atheris.
The pytest replay (``tests/fuzz/test_replay.py``) calls the same ``check`` on the seed corpus and the
regression cases, so nothing here may need atheris at import time.

Invariants: the byte reader is deterministic and total (any byte string, including the empty one, reads
to a value), so a corpus file replays to the same input under pytest and under libFuzzer. No wall-clock
measurement is used anywhere: "time proportional to the input" is checked by counting operations.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator, Sequence

FUZZ_DIR = Path(__file__).resolve().parent
REPO_DIR = FUZZ_DIR.parent
CORPUS_DIR = FUZZ_DIR / "corpus"
DICT_DIR = FUZZ_DIR / "dicts"
REGRESSION_DIR = REPO_DIR / "tests" / "corpus" / "regressions"


class Finding(AssertionError):
    """A property failed on a fuzz input; the message carries the input's repr so it can be replayed.

    An ``AssertionError`` subclass so pytest shows it as a test failure, but raised explicitly (never by
    an ``assert`` statement, which ``python -O`` would remove).
    """


def fail(data: object, message: str) -> Finding:
    """A :class:`Finding` for ``data`` (return it, so call sites read ``raise fail(...)``)."""
    return Finding(f"{message}\n  input: {data!r}")


@contextlib.contextmanager
def reporting(data: bytes) -> Iterator[None]:
    """Re-raise anything but a :class:`Finding` as a Finding naming the input that caused it.

    The harness bodies catch only the project's own error class where the property allows it; any other
    exception that reaches here (lark's exceptions, ``RecursionError``, ``IndexError``, torch errors we
    did not expect, ...) is itself a finding.
    """
    try:
        yield
    except Finding:
        raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise fail(data, f"unexpected {type(exc).__name__}: {exc}") from exc


def decode_text(data: bytes) -> str:
    """Bytes to text the way every text harness does it: UTF-8, invalid sequences replaced.

    Replacement keeps every str reachable (libFuzzer mutates bytes, most of which are ASCII here) and
    keeps the text encodable again for torch, which a surrogate escape would not.
    """
    return data.decode("utf-8", "replace")


def bracket_depth(text: str) -> int:
    """The deepest nesting of ``([{`` in ``text``, counting brackets anywhere (strings and comments too).

    Used only to decide whether ``torch._C.parse_schema`` may see a text: torch's recursive-descent
    parser overflows the C++ stack (a segfault that would kill the harness) between 3,000 and 4,000
    nested tuples on this machine. Counting every bracket over-estimates the real nesting, which only
    makes the bound safer. It is never used to skip a check of our own parser.
    """
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}" and depth:
            depth -= 1
    return deepest


def longest_bracketed_number(text: str) -> int:
    """The most digits right after a ``[`` (whitespace allowed between) anywhere in ``text``.

    Used only to decide whether ``torch._C.parse_schema`` may see a text: torch expands the default of a
    fixed-size list (``int[N] x=1``, a type variable's list too) into N values, N truncated to 32 bits, and an
    N of about a billion grows the process past libFuzzer's memory limit before any exception (seen:
    ``int4[44444444442] s=1``, 3.3 GB). torch's lexer skips every blank between ``[`` and the size, a form
    feed too (seen: ``int4[\f44444444442]``, 3.2 GB, when only spaces were skipped here): any whitespace is
    skipped. Looking at every ``[`` over-estimates the sizes, which only makes the bound safer. It is never used to
    skip a check of our own parser.
    """
    longest = 0
    i = text.find("[")
    while i != -1:
        j = i + 1
        while j < len(text) and text[j].isspace():
            j += 1
        k = j
        while k < len(text) and text[k].isdigit():
            k += 1
        longest = max(longest, k - j)
        i = text.find("[", i + 1)
    return longest


class ByteReader:
    """A deterministic, total reader of fuzzer bytes: every read succeeds, past the end it reads zeros.

    Structure-aware harnesses draw every choice from here, so libFuzzer's byte mutations become
    structural mutations, and a corpus file replays identically without atheris.
    """

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        """How many bytes are left."""
        return max(0, len(self.data) - self.pos)

    def byte(self) -> int:
        """The next byte (0 past the end)."""
        if self.pos >= len(self.data):
            self.pos += 1
            return 0
        value = self.data[self.pos]
        self.pos += 1
        return value

    def below(self, n: int) -> int:
        """An int in ``range(n)`` (one byte for ``n <= 256``, two bytes otherwise)."""
        if n <= 1:
            return 0
        if n <= 256:
            return self.byte() % n
        return ((self.byte() << 8) | self.byte()) % n

    def flag(self) -> bool:
        """A boolean (low bit of one byte)."""
        return bool(self.byte() & 1)

    def pick(self, options: Sequence[object]) -> object:
        """One element of a non-empty sequence."""
        return options[self.below(len(options))]

    def count(self, limit: int) -> int:
        """A small count in ``range(limit + 1)``; shrinks to 0 at the end of the data."""
        return 0 if self.remaining() == 0 else self.below(limit + 1)

    def signed(self) -> int:
        """A signed integer of 1 to 8 bytes, so small values are common but big ones are reachable."""
        width = 1 + self.below(8)
        value = 0
        for _ in range(width):
            value = (value << 8) | self.byte()
        return value - (1 << (8 * width - 1))

    def text(self, limit: int, alphabet: str | None = None) -> str:
        """A string of at most ``limit`` characters; from ``alphabet`` if given, else any code point."""
        length = self.count(limit)
        if alphabet is not None:
            return "".join(alphabet[self.below(len(alphabet))] for _ in range(length))
        chars = []
        for _ in range(length):
            kind = self.below(4)
            if kind < 2:  # mostly printable ASCII
                chars.append(chr(32 + self.below(95)))
            elif kind == 2:
                chars.append(chr(self.below(0x800)))
            else:
                cp = ((self.byte() << 8) | self.byte()) % 0x110000
                # lone surrogates cannot be encoded, which no real key or string can contain either
                chars.append(chr(cp) if not 0xD800 <= cp < 0xE000 else "\ufffd")
        return "".join(chars)


class Stats:
    """Named counters a harness keeps (inputs compared, documented differences hit by rule, ...).

    ``print_at_exit()`` registers an ``atexit`` handler that prints them, because libFuzzer ends the
    process from C++ and this is the only moment a Python harness gets to report.
    """

    # libFuzzer ends a run that reached -max_total_time with C exit(), which skips Python's atexit: the
    # counters are therefore also written every DUMP_EVERY inputs to the file named by $PBP_FUZZ_STATS
    # (fuzz/run_all.py sets it and reads it back).
    DUMP_EVERY = 256

    def __init__(self, title: str) -> None:
        self.title = title
        self.counts: Counter[str] = Counter()
        self._registered = False
        self._inputs = 0

    def add(self, key: str, n: int = 1) -> None:
        """Count ``n`` more of ``key``."""
        self.counts[key] += n

    def input_done(self) -> None:
        """Count one input; every DUMP_EVERY inputs, write the counters to $PBP_FUZZ_STATS if set."""
        self._inputs += 1
        if self._inputs % self.DUMP_EVERY == 0:
            self.dump()

    def dump(self) -> None:
        """Write the report to the file named by $PBP_FUZZ_STATS (no-op when unset)."""
        path = os.environ.get("PBP_FUZZ_STATS")
        if path:
            Path(path).write_text(f"{self.report()}\n  inputs checked: {self._inputs}\n", encoding="utf-8")

    def report(self) -> str:
        """One line per counter, sorted by name."""
        lines = [f"[{self.title}] counters:"]
        lines += [f"  {key}: {value}" for key, value in sorted(self.counts.items())]
        return "\n".join(lines)

    def print_at_exit(self) -> None:
        """Print the counters on stderr when the process ends (once)."""
        if not self._registered:
            self._registered = True
            atexit.register(lambda: (self.dump(), print(self.report(), file=sys.stderr, flush=True)))


class CallCounter:
    """Counts Python-level calls (Python functions and C builtins) made while it is active.

    "Time proportional to the input" is asserted on this count, never on a clock: a decoder that does
    quadratic work in Python makes quadratically many calls. ``sys.setprofile`` sees calls, not loop
    iterations, so this is a coarse bound; it catches recursion blow-ups and per-character re-scans.
    """

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls = 0

    def _profile(self, frame: object, event: str, arg: object) -> None:
        if event == "call" or event == "c_call":
            self.calls += 1

    def run(self, fn: Callable[[], object]) -> object:
        """Call ``fn()`` with counting on and return its result (exceptions propagate)."""
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            return fn()
        finally:
            sys.setprofile(previous)


def over_budget(fn: Callable[[], object], budget: int, expected: type[BaseException]) -> int | None:
    """Call ``fn`` (which already ran once, uncounted or counted) again under a :class:`CallCounter`;
    return the call count if it exceeds ``budget``, else None. ``expected`` (the library's error class,
    which the caller has already checked on the first call) is the only exception swallowed here.

    Only the repeat is judged: the libraries build things lazily on first use (each lark lexer state,
    error tables, caches), a one-time cost that a first count would mistake for per-input work.
    """
    counter = CallCounter()
    try:
        counter.run(fn)
    except expected:
        pass  # the first call already checked this error; only the count matters here
    return counter.calls if counter.calls > budget else None


def corpus_files(target: str) -> list[Path]:
    """The committed seed files of one harness, sorted (empty if none)."""
    folder = CORPUS_DIR / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def regression_files(target: str) -> list[Path]:
    """The named regression inputs of one harness under ``tests/corpus/regressions/<target>/``."""
    folder = REGRESSION_DIR / target
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".md") if folder.is_dir() else []


def start(argv: list[str], test_one_input: Callable[[bytes], None], modules: Sequence[str], warm_up: Callable[[], None]) -> None:
    """Instrument ``modules`` (imported under atheris' import hook), warm up, and run libFuzzer.

    ``warm_up`` runs inside the hook too, so modules the target imports lazily on its first call (the
    lark-to-AST transformers, the grammar loader) are instrumented as well.
    """
    import importlib

    import atheris

    with atheris.instrument_imports(include=["piece_by_piece_serialize"]):
        for name in modules:
            importlib.import_module(name)
        warm_up()
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
