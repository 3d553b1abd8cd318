"""Cost against depth: a decode step exported, saved and converted piece by piece (``make bench``, section ``growth``).

A tiny Llama (hidden 64) with 8, 32 and 64 decoder layers (8 and 32 with ``--quick``), a decode step on a
``DynamicCache`` with a dynamic batch, number of new tokens and past length. Ours: ``export_piece_by_piece(...,
classes="LlamaDecoderLayer")``, ``save`` and ``to_onnx``; each layer's operator carries only its own cache layer
and identical layers share one program (Note [cut calls] in custom_op/_slices.py, Note [renumbered layers] in
export/_reuse.py). Baseline: ``torch.export.export`` of the whole model and ``torch.onnx.export(dynamo=True)`` of
it, saved (issue 28's harness). One run each, in alternation per depth (exports take seconds to minutes: the
ratios are what to read). Per depth too, one decode step of the loaded archive against one of the whole model's
``torch.export`` program (``.module()``) and of the eager model, per-thread CPU time, the three in alternation
(Note [one check of the sizes] in artifact/_runnable.py). Then the fitted exponent of our time against the depth (target at most 1.1), the
manifest's size per depth, and the 32-layer decode step through the operators against the unreplaced model
(target at most 1.1x, the row of the ``custom_op`` section).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from _timing import Row, fitted_exponent, section

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tiny models of the tests


def _llama(layers: int) -> Any:
    from _tiny_models import llama_sized

    return llama_sized(64, layers, vocab=128)


def _step(model: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """A decode step's example (2 new tokens after 5, batch 2) and its dynamic shapes for ours."""
    import torch

    with torch.no_grad():
        cache = model(torch.randint(0, 128, (2, 5), generator=torch.Generator().manual_seed(0)), use_cache=True).cache
    ids = torch.randint(0, 128, (2, 2), generator=torch.Generator().manual_seed(1))
    batch, new, past = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("new", min=1, max=16), torch.export.Dim("past", min=1, max=64)
    shapes = {"input_ids": {0: batch, 1: new}, "cache": {0: batch, 2: past}}
    return ids, {"cache": cache, "use_cache": True}, shapes


def ours(model: Any, folder: str) -> dict[str, float]:
    """export_piece_by_piece + save + to_onnx of the decode step; the time of each and the manifest's bytes."""
    from piece_by_piece_serialize import export_piece_by_piece

    ids, kwargs, shapes = _step(model)
    times: dict[str, float] = {}
    start = time.perf_counter()
    result = export_piece_by_piece(model, (ids,), kwargs, dynamic_shapes=shapes, classes="LlamaDecoderLayer")
    times["export"] = time.perf_counter() - start
    archive = os.path.join(folder, "ours.pt2")
    start = time.perf_counter()
    result.save(archive)
    times["save"] = time.perf_counter() - start
    start = time.perf_counter()
    result.to_onnx(os.path.join(folder, "ours.onnx"))
    times["to_onnx"] = time.perf_counter() - start
    with zipfile.ZipFile(archive) as z:
        times["manifest"] = next(i.file_size for i in z.infolist() if i.filename.endswith("pbp_manifest.json"))
    times["programs"] = len({id(p.program) for p in result.pieces.values() if p.program is not None})
    result.close()
    return times


def call_times(modules: dict[str, Any], model: Any, rounds: int = 25, warm: int = 5) -> dict[str, float]:
    """The median per-thread CPU time of one decode step of each module, measured in alternation (one call of
    each per round, so that a slow spell of the machine hits them alike; it moved a row 2x when each was measured
    alone); each call on a fresh copy of the step's cache, which the call writes."""
    import torch

    times: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(rounds):
        for name, module in modules.items():
            ids, kwargs, _ = _step(model)
            start = time.thread_time()
            with torch.no_grad():
                module(ids, **kwargs)
            times[name].append(time.thread_time() - start)
    return {name: statistics.median(t[warm:]) for name, t in times.items()}


def whole(model: Any, folder: str) -> tuple[dict[str, float], Any]:
    """torch.export.export + torch.onnx.export (dynamo) of the whole model, its cache registered with pytree; the
    times, and the exported program as a module."""
    import torch
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()
    ids, kwargs, shapes = _step(model)
    layers = len(kwargs["cache"].layers)
    spec = {"input_ids": shapes["input_ids"], "cache": [[shapes["cache"]] * layers] * 2, "use_cache": None}
    times: dict[str, float] = {}
    start = time.perf_counter()
    exported = torch.export.export(model, (ids,), copy.deepcopy(kwargs), dynamic_shapes=spec, strict=False)
    times["export"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        program = torch.onnx.export(model, (ids,), kwargs=copy.deepcopy(kwargs), dynamic_shapes=spec, dynamo=True, verbose=False)
        program.save(os.path.join(folder, "whole.onnx"))
    except Exception:  # the baseline's failure is reported in the row's note, not raised
        # torch 2.13 fails on this step (SpecViolationError: "Constant tensor lifted_tensor_4 is not in the
        # constants dictionary"): the time to the failure is counted, and the note says so
        times["onnx_failed"] = 1.0
    times["onnx"] = time.perf_counter() - start
    return times, exported.module()


@section("growth")
def growth_rows(args: argparse.Namespace) -> list[Row]:
    from custom_op_overhead import _decode_ratio, one_thread

    depths = (8, 32) if args.quick else (8, 32, 64)
    rows: list[Row] = []
    totals: list[float] = []
    first: tuple[int, float] | None = None
    for layers in depths:
        model = _llama(layers)
        with tempfile.TemporaryDirectory() as folder:
            mine = ours(model, folder)
            theirs, program = whole(model, folder)
            from piece_by_piece_serialize import load_piece_by_piece

            loaded = load_piece_by_piece(os.path.join(folder, "ours.pt2"))
            calls = call_times({"loaded": loaded, "whole": program, "eager": model}, model)
            loaded.close()
        total = mine["export"] + mine["save"] + mine["to_onnx"]
        totals.append(total)
        note = (f"export {mine['export']:.1f} s, save {mine['save']:.1f} s, to_onnx {mine['to_onnx']:.1f} s, {mine['programs']:.0f} "
                f"layer program(s); torch.export {theirs['export']:.1f} s, torch.onnx.export {theirs['onnx']:.1f} s"
                + (" (failed: lifted constant not in the constants dictionary)" if "onnx_failed" in theirs else ""))  # fmt: skip
        rows.append(Row("growth", f"a loaded archive's decode step, {layers} layers", calls["loaded"],
                        "the whole model's torch.export program", calls["whole"],
                        note=f"eager {calls['eager'] * 1e3:.2f} ms; per-thread CPU time, median of 20 rounds, in alternation"))  # fmt: skip
        rows.append(Row("growth", f"export + save + to_onnx, decode step, {layers} layers", total,
                        "torch.export + torch.onnx.export of the whole model", theirs["export"] + theirs["onnx"], note=note))  # fmt: skip
        first = first or (layers, mine["manifest"])
        rows.append(Row("growth", f"archive manifest, {layers} layers", mine["manifest"], f"{first[0]} layers' scaled linearly",
                        first[1] * layers / first[0], unit="bytes", note=f"{mine['manifest'] / layers:.0f} bytes per layer"))  # fmt: skip
    expo = fitted_exponent([float(d) for d in depths], totals)
    rows.append(Row("growth", f"export + save + to_onnx time vs layers ({', '.join(map(str, depths))}): fitted exponent", expo,
                    "linear", 1.0, 1.1, unit=""))  # fmt: skip
    with one_thread():
        import torch

        with torch.no_grad():
            rows.append(_decode_ratio(args, "tiny Llama (hidden 32)", _llama_32(), 1.1))
    return rows


def _llama_32() -> Any:
    from _tiny_models import llama_sized

    return llama_sized(32, 32, vocab=128)
