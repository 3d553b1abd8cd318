"""Identical layers share one program, and in a load one graph runs it for all their operators (Note [flat graphs]
in artifact/_runnable.py). What an attacker may try on that: give one of the sharing operators a call record its
program does not compute, or a program whose graph cannot be made runnable. Each is refused with an
``ArtifactError`` naming the file, and no operator of the load's namespace is left registered; the genuine archive
still loads and computes equal to the model."""

from __future__ import annotations

import copy
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _archive_edit import MANIFEST  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import _runnable  # noqa: E402


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A 4-layer tiny Llama decode step saved: its four layer operators name one program."""
    model = tiny.llama_sized(32, 4)
    _, cache = tiny.prefill(model, 5, batch=2)
    shapes = {"input_ids": {0: torch.export.Dim("batch", max=8), 1: torch.export.Dim("new", max=8)},
              "cache": {0: torch.export.Dim("batch", max=8), 2: torch.export.Dim("past", max=32)}}  # fmt: skip
    result = export_piece_by_piece(model, (tiny.ids(2, 2),), {"cache": cache}, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
    path = tmp_path_factory.mktemp("shared") / "llama4.pt2"
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(MANIFEST)]
        operators = json.loads(archive.read(name))["operators"]
    assert len(operators) == 4 and {op["program"] for op in operators} == {"piece_0"}
    return path, model


def _rewrite(src: Path, dst: Path, change: Callable[[Any], None]) -> Path:
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename.endswith(MANIFEST):
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest).encode()
            new.writestr(info, data)
    return dst


def _own_operators() -> set[str]:
    return {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("pbp_")}


def _refused(path: Path, message: str) -> None:
    before = _own_operators()
    with pytest.raises(ArtifactError) as info:
        load_piece_by_piece(path)
    assert type(info.value) is ArtifactError and str(info.value).startswith(f"{path}: ")
    assert message in info.value.reason, info.value.reason
    assert not _own_operators() - before, "a refused load left operators registered"


def _loads_equal(path: Path, model: Any) -> None:
    loaded = load_piece_by_piece(path)
    try:
        _, ours = tiny.prefill(model, 6, batch=3)
        theirs = copy.deepcopy(ours)
        x = tiny.ids(2, 3, seed=5)
        with torch.no_grad():
            got, want = loaded(x, cache=ours), model(x, cache=theirs)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
    finally:
        loaded.close()


def test_a_sharing_operator_whose_record_its_program_does_not_compute_is_refused(shared: tuple[Path, Any], tmp_path: Path) -> None:
    path, model = shared

    def float64(manifest: Any) -> None:  # the third layer's operator only: the first two share the program first
        for call in manifest["operators"][2]["calls"]:
            call["out_dtypes"] = ["float64"] * len(call["out_dtypes"])

    _refused(_rewrite(path, tmp_path / "dtype.pt2", float64), "the program piece_0 of model.layers.2 returns")
    _loads_equal(path, model)


def test_a_shared_program_whose_graph_cannot_be_made_runnable_is_refused(shared: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path, model = shared
    made: list[Any] = []

    def broken(module: Any) -> Any:
        made.append(module)
        raise RuntimeError("generating the graph's code failed")

    with monkeypatch.context() as patch:
        patch.setattr(_runnable, "_flat_graph", broken)
        _refused(path, "the program piece_0 of model.layers.0 cannot be made runnable: RuntimeError: generating the graph's code failed")
    assert len(made) == 1  # the first operator's, then nothing more was tried
    _loads_equal(path, model)
