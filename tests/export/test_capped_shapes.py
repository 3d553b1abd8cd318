"""Note [learned shapes]: an output dimension capped at a constant (a sliding window's cache keeps at most its
window) is learned from the recorded calls, carried by the archive, and holds at sizes the export never saw."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece  # noqa: E402


class Window(torch.nn.Module):
    """Keeps the last 4 positions of the past and the new ones, and at most 4 of the new ones."""

    def forward(self, x: Any, past: Any) -> Any:
        return torch.cat([past, x], dim=1)[:, -4:], x[:, -4:] * 2


class Top(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.window, self.linear = Window(), torch.nn.Linear(8, 8)

    def forward(self, x: Any, past: Any) -> Any:
        kept, new = self.window(self.linear(x), past)
        return kept.sum(1), new


def test_a_capped_dimension_exports_saves_and_loads(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Top().eval()
    more = torch.export.AdditionalInputs()
    for b, s, p in ((3, 2, 3), (2, 3, 3), (4, 6, 2)):  # 5, 6 and 8 positions: the window keeps 4 of them
        more.add((torch.randn(b, s, 8), torch.randn(b, p, 8)))
    result = export_piece_by_piece(model, (torch.randn(2, 2, 8), torch.randn(2, 3, 8)), dynamic_shapes=more, classes=Window)
    assert result.report.passed
    path = tmp_path / "window.pt2"
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(next(n for n in archive.namelist() if n.endswith("extra/pbp_manifest.json"))))
    (operator,) = manifest["operators"]
    kinds = {rule[0] for call in operator["calls"] for out in call["rules"] or () for rule in out}
    assert "min" in kinds  # both outputs' dim 1: the window keeps at most 4 positions
    loaded = load_piece_by_piece(path)
    try:
        for b, s, p in ((5, 2, 2), (2, 9, 7), (4, 2, 1), (1, 3, 12)):
            x, past = torch.randn(b, s, 8), torch.randn(b, p, 8)
            with torch.no_grad():
                got, want = loaded(x, past), model(x, past)
            assert [t.shape for t in got] == [t.shape for t in want]
            torch.testing.assert_close(got, want)
    finally:
        loaded.close()
