"""onnxruntime against eager for the ONNX tests: a written model run on a call's flat tensors, and the model's own
flat outputs for the same call (the output, then each cache argument after the call)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import onnxruntime
import torch

from piece_by_piece_serialize.custom_op._calls import describe_call, flat_outputs


def run_onnx(path: Path, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The ONNX model at ``path`` in onnxruntime, fed the flat tensors of ``(args, kwargs)`` in order."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    _, tensors, _ = describe_call("test", args, kwargs)
    feeds = {i.name: t.contiguous().numpy() for i, t in zip(session.get_inputs(), tensors, strict=True)}
    return [torch.from_numpy(x) for x in session.run(None, feeds)]


def eager_outputs(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """``model``'s flat outputs on a copy of the call: the output, then every cache argument after the call."""
    args, kwargs = copy.deepcopy((args, kwargs))
    with torch.no_grad():
        output = model(*args, **kwargs)
    caches = [v for v in (*args, *kwargs.values()) if type(v).__name__.endswith("Cache")]
    return flat_outputs("test", output, caches)[1]


def written(result: Any, folder: Path, name: str) -> tuple[Any, Any]:
    """``result`` written as ``<name>.onnx`` and saved as ``<name>.pt2`` in ``folder``, then closed: an onnxruntime
    session of the file, and the archive loaded (in this process)."""
    from piece_by_piece_serialize import load_piece_by_piece

    result.to_onnx(folder / f"{name}.onnx")
    result.save(folder / f"{name}.pt2")
    result.close()
    session = onnxruntime.InferenceSession(str(folder / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    return session, load_piece_by_piece(folder / f"{name}.pt2")
