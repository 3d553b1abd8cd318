"""The mixture-of-experts families of transformers 5 through to_onnx and onnxruntime, the table of issue 31.

Each family of ``tests/_tiny_moe.py`` (two layers, hidden 32, four experts, two per token), exported
automatically and with ``classes=`` its decoder layers, at a prefill (no cache) and at a decode step (the cache
in and out, two examples), then ``to_onnx``, then onnxruntime against eager at three shapes the export did not
see. One line per case: the export, to_onnx (with its own checks), and the largest difference. Not part of
``make bench`` (minutes of exports); run ``python bench/onnx_moe_families.py [family ...]`` from the repository.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def _case(family: str, mode: str, shape: str, folder: str) -> str:
    import onnxruntime
    import torch

    import _tiny_models as tiny
    import _tiny_moe
    from piece_by_piece_serialize import export_piece_by_piece
    from piece_by_piece_serialize.custom_op._calls import describe_call, flat_outputs

    model = _tiny_moe.moe(family)
    if family == "minimax":
        tiny.register_minimax_cache()
    classes = tuple(dict.fromkeys(type(layer) for layer in model.model.layers)) if mode == "classes" else None
    batch, seq = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=2, max=128)
    start = time.perf_counter()
    try:
        if shape == "prefill":
            x = tiny.ids(6, 2)
            shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
            result = export_piece_by_piece(model, (x,), {"attention_mask": torch.ones_like(x), "use_cache": False}, dynamic_shapes=shapes, classes=classes)
            cases = [((tiny.ids(n, b, 5),), {"attention_mask": torch.ones(b, n, dtype=torch.long), "use_cache": False}) for b, n in ((1, 3), (4, 11), (2, 20))]
        else:
            # MiniMax's lightning-attention cache takes one new token at a time (its eager forward fails on more)
            new = (1, 1, 1, 1) if family == "minimax" else (3, 2, 2, 3)
            other = torch.export.AdditionalInputs()
            other.add((tiny.ids(new[1], 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
            result = export_piece_by_piece(model, (tiny.ids(new[0], 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other, classes=classes)
            cases = [((tiny.ids(n, b, 9),), {"cache": tiny.prefill(model, past, batch=b)[1]}) for b, past, n in ((1, 6, new[2]), (4, 11, new[3]), (2, 30, 1))]
    except Exception as exc:  # a line of the table, the rest goes on
        return f"export FAILED ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    exported = time.perf_counter() - start
    path = os.path.join(folder, f"{family}-{mode}-{shape}.onnx")
    try:
        written = result.to_onnx(path)
    except Exception as exc:
        return f"export {exported:.1f} s | to_onnx FAILED ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for args, kwargs in cases:
        _, tensors, _ = describe_call("bench", args, kwargs)
        got = session.run(None, {i.name: t.contiguous().numpy() for i, t in zip(session.get_inputs(), tensors, strict=True)})
        args, kwargs = copy.deepcopy((args, kwargs))
        with torch.no_grad():
            output = model(*args, **kwargs)
        want = flat_outputs("bench", output, [v for v in kwargs.values() if type(v).__name__.endswith("Cache")])[1]
        worst = max([worst, *((torch.from_numpy(g).double() - w.double()).abs().max().item() for g, w in zip(got, want, strict=True) if w.numel())])
    return f"export {exported:.1f} s | to_onnx {written.seconds:.1f} s, {len(written.functions)} function(s) | onnxruntime max |diff| {worst:.1e}"


def main() -> None:
    import _tiny_moe

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("families", nargs="*", default=list(_tiny_moe.FAMILIES))
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    for family in args.families:
        for mode in ("automatic", "classes"):
            for shape in ("prefill", "step"):
                print(f"{family:17} {mode:9} {shape:7} {_case(family, mode, shape, folder)}", flush=True)


if __name__ == "__main__":
    main()
