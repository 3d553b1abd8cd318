"""Where each character of a schema was written: compact sequences of 1-based (line, column) pairs.

A site's ``positions`` has one entry per character of its text plus one just past the end. Most sites
are written in one piece, so the sequences here keep a few numbers (a start and a length, or one file
offset per character) and compute the pair on demand instead of holding a tuple per character: a file of
100,000 schemas would otherwise hold millions of tuples.

Imports: the standard library only.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from typing import overload

__all__ = ["Chunks", "LineIndex", "LinePositions", "OffsetPositions", "Run"]


class LinePositions(Sequence[tuple[int, int]]):
    """Positions of a schema written on one line from column ``column``: character i is at column + i.

    Kept as three numbers rather than a tuple per character: a plain-text file of 100,000 schemas would
    otherwise hold millions of tuples.
    """

    __slots__ = ("line", "column", "length")

    def __init__(self, line: int, length: int, column: int = 1) -> None:
        self.line = line
        self.column = column
        self.length = length

    def __len__(self) -> int:
        return self.length + 1

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i <= self.length:
            raise IndexError(i)
        return (self.line, self.column + i)


class Run(Sequence[tuple[int, int]]):
    """``length`` characters written one after the other on ``line`` from ``column`` (``step`` 0: all at one place)."""

    __slots__ = ("line", "column", "length", "step")

    def __init__(self, line: int, column: int, length: int, step: int = 1) -> None:
        self.line = line
        self.column = column
        self.length = length
        self.step = step

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        return (self.line, self.column + i * self.step)


class Chunks(Sequence[tuple[int, int]]):
    """Positions made of consecutive parts (the pieces of a folded Python string), looked up by bisection."""

    __slots__ = ("parts", "ends")

    def __init__(self, parts: list[Sequence[tuple[int, int]]]) -> None:
        self.parts = [part for part in parts if len(part)]
        ends: list[int] = []
        total = 0
        for part in self.parts:
            total += len(part)
            ends.append(total)
        self.ends = ends

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = bisect.bisect_right(self.ends, i)
        return self.parts[k][i - (self.ends[k - 1] if k else 0)]


class OffsetPositions(Sequence[tuple[int, int]]):
    """Positions kept as file offsets (one machine integer per character), turned into (line, column) on demand."""

    __slots__ = ("offsets", "where")

    def __init__(self, offsets: array[int], where: LineIndex) -> None:
        self.offsets = offsets
        self.where = where  # not ``index``: that name is Sequence.index

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self.where(o) for o in self.offsets[i]]
        return self.where(self.offsets[i])


class LineIndex:
    """Offset -> 1-based (line, column), from the offsets where lines start."""

    def __init__(self, text: str) -> None:
        starts = [0]
        k = text.find("\n")
        while k >= 0:
            starts.append(k + 1)
            k = text.find("\n", k + 1)
        self.starts = starts

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return (line, offset - self.starts[line - 1] + 1)
