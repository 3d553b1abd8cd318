"""A piece that could not be exported is stored as its weights and the name of its class; loading it takes the
class (or an instance) from the user, and refuses clearly without it. The loaded model equals eager on both
sides of the data-dependent branch, in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
BATCH = torch.export.Dim("batch", min=1, max=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.report.behind_operators == ["top.mid.leaf"] and result.pieces["top.mid.leaf"].program is None
    path = tmp_path_factory.mktemp("deep") / "deep.pt2"
    result.save(path)
    result.close()  # its operators' names are free again: the same process may load the archive
    return path


_FRESH = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
import _toy_models as toy
from piece_by_piece_serialize import ArtifactError, load_piece_by_piece
try:
    load_piece_by_piece(sys.argv[2])
except ArtifactError as exc:
    print("refused:", exc.reason)
model = toy.deep()
for given in ([toy.Branchy], {"top.mid.leaf": model.top.mid.leaf}):
    loaded = load_piece_by_piece(sys.argv[2], implementations=given)
    for x in (torch.randn(5, 4) + 3, torch.randn(7, 4) - 3):  # both sides of the branch
        with torch.no_grad():
            print(type(given).__name__, torch.equal(loaded(x), model(x)))
    loaded.close()
"""


def test_a_piece_without_program_loads_with_its_class_or_an_instance_in_a_fresh_process(saved: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _FRESH, str(TESTS), str(saved)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == (
        "refused: the piece top.mid.leaf (_toy_models.Branchy) is stored without a program of its own (its export "
        "failed): pass its class or an instance of it in implementations= to load it"
    )
    assert lines[1:] == ["list True", "list True", "dict True", "dict True"]


def test_the_class_must_be_rebuildable_and_the_instance_must_hold_the_stored_weights(saved: Path) -> None:
    class NotIt(torch.nn.Module):
        pass

    with pytest.raises(TypeError, match="give module classes or module instances"):
        load_piece_by_piece(saved, implementations=["Branchy"])  # a name is not code: the loader imports nothing
    wrong = toy.Branchy()
    wrong.lin = torch.nn.Linear(4, 3)
    with pytest.raises(ArtifactError, match=r"the instance given for the piece top\.mid\.leaf has a torch\.float32 \(3, 4\) lin\.weight, where the archive has a torch\.float32 \(4, 4\)"):
        load_piece_by_piece(saved, implementations={"top.mid.leaf": wrong})
    with pytest.raises(ArtifactError, match=r"stored without a program"):
        load_piece_by_piece(saved, implementations=[NotIt])
    loaded = load_piece_by_piece(saved, implementations=[toy.Branchy])
    with pytest.raises(ArtifactError, match="already registered in this process"):
        load_piece_by_piece(saved, implementations=[toy.Branchy])
    loaded.close()
    load_piece_by_piece(saved, implementations=[toy.Branchy]).close()


def test_a_piece_holding_what_the_archive_cannot_carry_needs_an_instance(tmp_path: Path) -> None:
    model = toy.deep()
    model.top.mid.leaf.scale = lambda x: x  # an attribute no manifest can hold
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    result.save(tmp_path / "deep.pt2")
    result.close()
    with pytest.raises(ArtifactError, match=r"holds attributes the archive cannot carry: scale \(builtins\.function\); pass an instance"):
        load_piece_by_piece(tmp_path / "deep.pt2", implementations=[toy.Branchy])
    loaded = load_piece_by_piece(tmp_path / "deep.pt2", implementations={"top.mid.leaf": model.top.mid.leaf})
    x = torch.randn(4, 4)
    assert torch.equal(loaded(x), model(x))
    loaded.close()
