"""Small hand-made models whose export fails at a known place, for the export and artifact tests.

``Deep`` hides a data-dependent branch three levels down (``top.mid.leaf``, a ``Branchy``); it lives here, not in
a test module, so that a fresh process loading an artifact imports the very class the export saw.
"""

from __future__ import annotations

from typing import Any

import torch


class Branchy(torch.nn.Module):
    """A data-dependent branch: torch.export cannot trace it with unknown values."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        h = self.lin(x)
        if h.sum() > 0:
            return h * 2
        return h - 1


class Mid(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.before = torch.nn.Linear(4, 4)
        self.leaf = Branchy()

    def forward(self, x: Any) -> Any:
        return self.leaf(self.before(x)) + 1


class Top(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mid = Mid()
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x: Any) -> Any:
        return self.head(torch.relu(self.mid(x)))


class Deep(torch.nn.Module):
    """The branch three levels down: Deep -> top -> mid -> leaf."""

    def __init__(self) -> None:
        super().__init__()
        self.top = Top()
        self.norm = torch.nn.LayerNorm(2)

    def forward(self, x: Any) -> Any:
        return self.norm(self.top(x))


def deep() -> Deep:
    torch.manual_seed(0)
    return Deep().eval()


class PadToFour(torch.nn.Module):
    """Pads its sequence to a multiple of 4 only when it is not one: a guard on the sequence in its own code."""

    def forward(self, x: Any) -> Any:
        pad = (4 - x.shape[1] % 4) % 4
        if pad > 0:
            x = torch.nn.functional.pad(x, (0, 0, 0, pad))
        y = x.reshape(x.shape[0], -1, 4, x.shape[-1]).cumsum(2).reshape(x.shape[0], -1, x.shape[-1])
        return y[:, : y.shape[1] - pad]


class Chunked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.chunks = PadToFour()

    def forward(self, x: Any) -> Any:
        return self.chunks(self.lin(x))


class Below16(torch.nn.Module):
    """Doubles below 16 rows, triples from 16: a branch on a size, which a hint lets into the program as a guard
    (and torch into its range, rows <= 15)."""

    def forward(self, x: Any) -> Any:
        return x * 2 if x.shape[0] < 16 else x * 3
