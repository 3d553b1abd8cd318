"""A one-line progress bar on stderr for long command-line runs.

The bar is drawn only when stderr is a terminal and the user did not ask for ``--quiet``; otherwise
every method is a no-op, so logs and pipes never receive carriage returns. Redraws are throttled by
count (at most ~100 per run) rather than by clock, so the output does not depend on timing. Findings
are printed through :meth:`Progress.clear` first so a bar never shares a line with a message.

Imports: the standard library only.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 30


class Progress:
    """Progress over ``total`` items, labelled ``label``; use as a context manager."""

    def __init__(self, total: int, label: str, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(not quiet and total > 0 and isatty is not None and isatty())
        self.total = total
        self.label = label
        self.done = 0
        self._step = max(1, total // 100)
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done; redraw every ~1% of the total."""
        before = self.done
        self.done = min(self.total, self.done + n)
        if self.enabled and (self.done // self._step != before // self._step or self.done == self.total):
            self._draw()

    def clear(self) -> None:
        """Erase the bar (before printing a message, and at the end)."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False

    def _draw(self) -> None:
        filled = _WIDTH * self.done // self.total
        bar = "#" * filled + "-" * (_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
        self.stream.flush()
        self._drawn = True
