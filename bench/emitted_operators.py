"""Every operator the export path emits for the tiny model families of the tests, written to
tests/corpus/artifact/emitted_operators.txt (the oracle of tests/artifact/test_operator_allowlist.py).

Each family is exported as the tests export it (its layers behind operators, and whole; a decode step with a
dynamic and a static cache; the encoder-decoders' blocks behind operators), saved with ``save``, and the
targets of every node of every program in the archive counted. Run: ``PYTHONPATH=src python bench/emitted_operators.py``
(a few minutes on two cores).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "export")]

import test_models as tm  # noqa: E402
import torch  # noqa: E402

import _tiny_models as tiny  # noqa: E402
from piece_by_piece_serialize import dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402

OUT = ROOT / "tests" / "corpus" / "artifact" / "emitted_operators.txt"
HEADER = """\
# Every operator the export path emits for the tiny model families of the tests, with its number of nodes
# and the exports it appears in (bench/emitted_operators.py regenerates this file; the artifact's own
# operators, in a namespace of their own, are left out). tests/artifact/test_operator_allowlist.py checks
# that the rule of Note [operator allowlist] admits each one.
"""


def _layer(model: Any) -> type:
    return type(getattr(model, "model", model).layers[0])


def _seq2seq(family: str) -> Any:
    model = getattr(tiny, family)()
    target = torch.export.Dim("target", min=2, max=60)
    shapes: dict[str, Any] = {"decoder_input_ids": {0: tm.BATCH, 1: target}, "decoder_attention_mask": {0: tm.BATCH, 1: target}}
    if family == "t5":
        shapes.update(input_ids={0: tm.BATCH, 1: tm.SEQ}, attention_mask={0: tm.BATCH, 1: tm.SEQ})
    else:
        shapes.update(input_features={0: tm.BATCH})
    decoder = model.get_decoder()
    blocks = decoder.block if family == "t5" else decoder.layers
    return export_piece_by_piece(model, (), tm._seq2seq_inputs(family, 2, 6, 4), dynamic_shapes=shapes, classes=type(blocks[0]))


def _no_mask(model: Any) -> Any:  # as tests/artifact/test_artifact.py exports Llama
    return export_piece_by_piece(
        model, (tiny.ids(6, 2),), {"use_cache": False}, dynamic_shapes={"input_ids": {0: tm.BATCH, 1: tm.SEQ}}, classes=_layer(model)
    )


def _static() -> Any:
    model = tiny.llama()
    examples = [((tiny.ids(1, b, seed=3),), {"cache": tm._static_cache(model, b, 5), "cache_position": torch.tensor([5])}) for b in (2, 3)]
    return export_piece_by_piece(model, *examples[0], dynamic_shapes=dynamic_shapes_from_examples(model, examples), classes="LlamaDecoderLayer")


def jobs() -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for family in ("llama", "mistral", "gemma2", "gemma3", "qwen3_next", "lfm2", "minimax", "gemma3n"):
        out.append((f"{family}/classes", lambda f=family: (lambda m: tm._logits_export(m, classes=_layer(m)))(getattr(tiny, f)())))
        out.append((f"{family}/whole", lambda f=family: tm._logits_export(getattr(tiny, f)())))
    out.append(("llama/no-mask", lambda: _no_mask(tiny.llama())))
    out.extend((f"{f}/classes", lambda f=f: _seq2seq(f)) for f in ("t5", "whisper"))
    out.append(("llama-decode/whole", lambda: tm._decode_step_export(tiny.llama())))
    out.append(("llama-decode/classes", lambda: (lambda m: tm._decode_step_export(m, _layer(m)))(tiny.llama())))
    out.append(("llama-static/classes", _static))
    return out


def main() -> None:
    counts: collections.Counter[str] = collections.Counter()
    where: dict[str, set[str]] = collections.defaultdict(set)
    for label, job in jobs():
        try:
            result = job()
        except Exception as exc:  # a family this torch/transformers cannot export: reported, the rest goes on
            print(f"{label}: export failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.pt2")
            result.save(path)
            result.close()
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    if "/models/" in name and name.endswith(".json"):
                        for node in json.loads(archive.read(name))["graph_module"]["graph"]["nodes"]:
                            if not node["target"].startswith("torch.ops.pbp_"):
                                counts[node["target"]] += 1
                                where[node["target"]].add(label)
        print(f"{label}: {len(counts)} operators so far", flush=True)
    lines = [f"{t} {counts[t]} {','.join(sorted(where[t]))}" for t in sorted(counts)]
    OUT.write_text(HEADER + "\n".join(lines) + "\n")
    print(f"{len(counts)} operators, {sum(counts.values())} nodes -> {OUT}")


if __name__ == "__main__":
    main()
