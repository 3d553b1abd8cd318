"""Issue 31's table, family by family: export, save and load in a fresh process, and ONNX, each against eager.

The families: the mixture-of-experts ones of ``tests/_tiny_moe.py`` (two layers, hidden 32, four experts, two
per token), Llama 4 text (complex rotary), Jamba (a Mamba mixer), Qwen3-Next (a gated delta-net) and
LongCat-Flash (experts that loop in Python over the experts chosen), each tiny, built from config. Each is
exported automatically and with ``classes=`` its decoder layers, at a prefill (no cache) and at a decode step
(the cache in and out, two examples through ``torch.export.AdditionalInputs``; Llama 4 a third past its
attention chunk). One line per case:

- export: the report's verdict and max |diff| against eager, the pieces behind operators (those without a
  program of their own starred), or the error's class and first line;
- load: ``save``, then ``load_piece_by_piece`` in a fresh interpreter (this file with ``--load``), its outputs
  and caches against eager at three shapes the export did not see; when the load asks for ``implementations=``
  the classes it names (or the instances, when it says so) are given and the load retried, and the line says so;
  so is a piece with programs by size called at sizes none of its programs was exported for (its class is given);
- onnx: ``to_onnx``, then onnxruntime against eager at the same three shapes, or the refusal's first line.

Any other transformers model type (``python bench/families.py olmo2 cohere2 ...``) is built the same way from
its config (``tests/_tiny_models.py``'s sizes, with the few overrides of ``GENERIC`` its config needs) and runs
the same four cases: a sweep over families no test names; ``--automatic`` runs the automatic cut alone.

LongCat-Flash runs once more (``longcat_flash+translation``) with its experts' ONNX translation, the one of
tests/onnx_export/test_onnx_translations.py, given through ``to_onnx(..., translations=)``, and so do Jamba's and
MiniMax's prefills with the translations of their pieces that loop over the sequence (tests/_translations.py:
an ONNX ``Loop``), automatic mode. Not part of
``make bench`` (about an hour of exports on two cores); run ``python bench/families.py [family ...]`` from the
repository (``--list`` names the families).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
sys.path.insert(0, TESTS)

MOE = ("qwen2_moe", "qwen3_moe", "mixtral", "phimoe", "gpt_oss", "deepseek_v3", "glm4_moe", "granitemoehybrid", "minimax")
OTHERS = ("llama4", "jamba", "qwen3_next", "longcat_flash", "longcat_flash+translation", "jamba+translation", "minimax+translation")
# a family run once more with the translation of the pieces of one class (tests/_translations.py and
# tests/onnx_export/test_onnx_translations.py): (the class, which translation, the shapes it is for)
TRANSLATED = {
    "longcat_flash": ("LongcatFlashExperts", "experts", ("prefill", "step")),
    "jamba": ("JambaMambaMixer", "mixer", ("prefill",)),  # its loop over the sequence; the step has a program
    "minimax": ("MiniMaxLightningAttention", "attention", ("prefill",)),
}
# what a generic family's tiny config needs beyond tests/_tiny_models.py's sizes (a padding index inside its vocabulary)
GENERIC: dict[str, dict[str, Any]] = {
    "phi3": dict(pad_token_id=0), "smollm3": dict(pad_token_id=0), "glm4": dict(pad_token_id=0), "glm": dict(pad_token_id=0),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2),
    "flex_olmo": dict(pad_token_id=0), "kimi_linear": dict(pad_token_id=0),
    "mamba2": dict(num_heads=8, head_dim=8, n_groups=1, state_size=4, chunk_size=4),
    # one expert by default: its router's histc(min=0, max=0) has no ONNX translation in torch.onnx
    "hunyuan_v1_moe": dict(num_experts=4, moe_topk=2),
    "jetmoe": dict(num_local_experts=4, num_experts_per_tok=2, kv_channels=8, num_key_value_heads=4),
    "granitemoe": dict(num_local_experts=4, num_experts_per_tok=2),
    "granitemoeshared": dict(num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=16),
    "lfm2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, num_dense_layers=1, layer_types=["conv", "full_attention"]),
    "dots1": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
    "bamba": dict(mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=4, mamba_d_conv=4, mamba_chunk_size=4, attn_layer_indices=[1]),
    "falcon_h1": dict(mamba_d_ssm=32, mamba_n_heads=4, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=4, mamba_d_conv=4, mamba_chunk_size=4),
}  # fmt: skip
TIMEOUT = 900  # seconds a step may take before it counts as a hang


def build(family: str) -> Any:
    """The tiny model of ``family`` (its cache class registered where the serializer needs it)."""
    import _tiny_models as tiny
    import _tiny_moe

    family = family.removesuffix("+translation")
    if family == "minimax":
        tiny.register_minimax_cache()
    if family in MOE:
        return _tiny_moe.moe(family)
    named = {"llama4": tiny.llama4, "jamba": tiny.jamba, "qwen3_next": tiny.qwen3_next, "longcat_flash": _tiny_moe.longcat_flash}
    if family in named:
        return named[family]()
    return tiny._causal(tiny.config(family, **GENERIC.get(family, {})))


def _new_tokens(family: str) -> tuple[int, int, int, int]:
    """New tokens of the decode step: the two examples', then the unseen cases' (the third takes one)."""
    # MiniMax's lightning-attention cache takes one new token at a time (its eager forward fails on more)
    return (1, 1, 1, 1) if family == "minimax" else (3, 2, 2, 3)


def inputs(model: Any, family: str, shape: str) -> tuple[list[Any], Any, list[Any]]:
    """(the examples, the dynamic shapes, three unseen cases) of ``shape``, each example or case (args, kwargs)."""
    import torch

    import _tiny_models as tiny

    if shape == "prefill":
        batch, seq = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=2, max=128)
        x = tiny.ids(6, 2)
        shapes = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
        unseen = [((tiny.ids(n, b, 5),), {"attention_mask": torch.ones(b, n, dtype=torch.long), "use_cache": False}) for b, n in ((1, 3), (4, 11), (2, 20))]
        return [((x,), {"attention_mask": torch.ones_like(x), "use_cache": False})], shapes, unseen
    new = _new_tokens(family.removesuffix("+translation"))
    examples = [((tiny.ids(new[0], 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]})]
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(new[1], 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    if family == "llama4":  # past its attention chunk (16), where the mask takes the other branch (docs/export.md)
        other.add((tiny.ids(1, 2),), {"cache": tiny.prefill(model, 20, batch=2)[1]})
    unseen = [((tiny.ids(n, b, 9),), {"cache": tiny.prefill(model, past, batch=b)[1]}) for b, past, n in ((1, 6, new[2]), (4, 11, new[3]), (2, 30, 1))]
    return examples, other, unseen


def max_diff(got: list[Any], want: list[Any]) -> float:
    """The largest |difference| over flat outputs (a mismatch of count, shape or dtype raises)."""
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs where eager has {len(want)}")
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            raise AssertionError(f"an output {g.dtype} {tuple(g.shape)} where eager has {w.dtype} {tuple(w.shape)}")
        if w.numel():
            worst = max(worst, (g.double() - w.double()).abs().max().item())
    return worst


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[0][:220]}"


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang(f"no answer in {TIMEOUT} s")


def _export(model: Any, family: str, mode: str, shape: str) -> tuple[Any, str]:
    """The export (None when it failed) and its cell of the table."""
    from piece_by_piece_serialize import export_piece_by_piece

    try:
        examples, shapes, _ = inputs(model, family, shape)
    except Exception as exc:  # the tiny model's own eager call fails (a config it does not accept): no case to run
        return None, f"not run: eager fails on the example, {_first_line(exc)}"
    classes = tuple(dict.fromkeys(type(layer) for layer in model.model.layers)) if mode == "classes" else None
    try:
        (args, kwargs), = examples
        result = export_piece_by_piece(model, args, kwargs, dynamic_shapes=shapes, classes=classes)
    except Exception as exc:  # a cell of the table, the rest goes on
        return None, f"FAILED {_first_line(exc)}"
    report = result.report
    pieces = [p + ("" if report.pieces[p].program is not None else "*") for p in report.behind_operators]
    diff = "n/a" if report.root.max_abs_diff is None else f"{report.root.max_abs_diff:.1e}"
    verdict = {None: "not compared", True: "pass", False: "FAIL " + ",".join(report.failed)}[report.passed]
    cut = ", ".join(pieces) if len(pieces) <= 3 else f"{len(pieces)} pieces, {sum(p.endswith('*') for p in pieces)} without program"
    return result, f"{verdict} |d| {diff} {report.seconds:.0f}s [{cut}]"


def _load_cell(result: Any, family: str, shape: str, folder: str) -> str:
    """``save``, then the load in a fresh interpreter: its cell of the table."""
    path = os.path.join(folder, f"{family}-{shape}.pt2")
    try:
        result.save(path)
    except Exception as exc:
        return f"save FAILED {_first_line(exc)}"
    command = [sys.executable, os.path.abspath(__file__), "--load", path, family, shape]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"HANG (no answer in {TIMEOUT} s)"
    if out.returncode != 0:
        return f"CRASHED (exit {out.returncode}): {(out.stderr.strip().splitlines() or [''])[-1][:220]}"
    return out.stdout.strip().splitlines()[-1]


def _onnx_cell(result: Any, model: Any, family: str, shape: str, folder: str) -> str:
    """``to_onnx``, then onnxruntime against eager at the unseen shapes: its cell of the table."""
    from _onnx_compare import eager_outputs, run_onnx

    translations = _translations(result, family)
    path = os.path.join(folder, f"{family}-{shape}.onnx")
    try:
        written = result.to_onnx(path, translations=translations)
    except Exception as exc:
        return f"refused/FAILED {_first_line(exc)}"
    try:
        diffs = [max_diff(run_onnx(path, a, k), eager_outputs(model, a, k)) for a, k in inputs(model, family, shape)[2]]
    except Exception as exc:
        # the file's own refusal (Note [the file's sizes]) sits deep in onnxruntime's nested If errors: shown by name
        refusal = re.search(r"(by_size_refused|refused): [^\n']{0,200}", str(exc))  # ends where the node's name does
        return f"onnxruntime refused by name: {refusal.group(0)}" if refusal else f"onnxruntime FAILED {_first_line(exc)}"
    return f"max |d| {max(diffs):.1e} (to_onnx's own {written.model_diff:.1e}, {written.seconds:.0f}s)"


def _translations(result: Any, family: str) -> dict[Any, Any] | None:
    """For a ``+translation`` family, its translated class -> the translation its test writes (LongCat-Flash's
    experts; Jamba's Mamba mixer and MiniMax's lightning attention, prefill): ``to_onnx`` gives it to every piece of
    that class, and refuses by name a class that is no piece's."""
    if not family.endswith("+translation"):
        return None
    sys.path.insert(0, os.path.join(TESTS, "onnx_export"))
    from test_onnx_translations import _longcat_experts

    import _translations

    name, translation, _ = TRANSLATED[family.removesuffix("+translation")]
    fn = {"experts": _longcat_experts, "mixer": _translations.jamba_mamba_mixer, "attention": _translations.minimax_lightning_attention}[translation]
    classes = {piece.module_class for piece in result.pieces.values() if piece.module_class.__name__ == name}
    return dict.fromkeys(classes, fn)


def case(family: str, mode: str, shape: str, folder: str) -> str:
    """One line of the table: export | fresh load | onnx."""
    try:
        model = build(family)
    except Exception as exc:  # a tiny config the family's validation refuses
        return f"not built: {_first_line(exc)}"
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT)
    try:
        result, export = _export(model, family, mode, shape)
    except _Hang as exc:
        return f"export HANG ({exc})"
    finally:
        signal.alarm(0)
    if result is None:
        return f"export {export}"
    cells = [f"export {export}"]
    for name, cell in (("load", lambda: _load_cell(result, family, shape, folder)), ("onnx", lambda: _onnx_cell(result, model, family, shape, folder))):
        signal.alarm(TIMEOUT)
        try:
            cells.append(f"{name} {cell()}")
        except _Hang as exc:
            cells.append(f"{name} HANG ({exc})")
        finally:
            signal.alarm(0)
    result.close()  # its operators' names are free again for the next case
    return " | ".join(cells)


# what a refused load asks for: a class by its qualified name, or an instance of the piece
_ASKS = [
    re.compile(r"the piece (?P<piece>\S+) \((?P<cls>[\w.]+)\) is stored without a program"),
    re.compile(r"the piece (?P<piece>\S+)(?: \(its submodule \S+\))? is a (?P<cls>[\w.]+): pass that class"),
    re.compile(r"the piece (?P<piece>\S+)(?: \(its submodule \S+\))? holds attributes the archive cannot carry.*pass an (?P<instance>instance)"),
]


def _asked(reason: str) -> tuple[str, str, bool] | None:
    """(piece, class, whether an instance is asked) of a load refused for want of ``implementations=``."""
    for pattern in _ASKS:
        found = pattern.search(reason)
        if found:
            groups = found.groupdict()
            return groups["piece"], groups.get("cls") or "", "instance" in groups
    return None


def _class(qualified: str) -> Any:
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def fresh_load(path: str, family: str, shape: str) -> str:
    """In a fresh interpreter: load ``path``, giving what the load asks for, and compare with eager."""
    from _onnx_compare import eager_outputs
    from piece_by_piece_serialize import ArtifactError, load_piece_by_piece

    model = build(family)
    classes: list[Any] = []
    instances: dict[str, Any] = {}
    given: list[str] = []
    outside = []  # pieces by size called at sizes none of their programs holds for: given their class
    for _ in range(12):
        try:
            loaded = load_piece_by_piece(path, implementations=[*classes, *instances.values()])
        except ArtifactError as exc:
            several = re.search(r"needs \d+ classes: (.*); pass those classes", exc.reason)
            if several:  # a class rebuilt from the archive, and its submodules' classes, named at once
                for cls in re.findall(r"([\w.]+) \((?:its submodule \S+|the piece)\)", several.group(1)):
                    classes.append(_class(cls))
                    given.append(cls.rpartition(".")[2])
                continue
            asked = _asked(exc.reason)
            if asked is None:
                return f"refused/FAILED {_first_line(exc)}" + (f" (given {', '.join(given)})" if given else "")
            piece, cls, instance = asked
            if instance:
                instances[piece] = model.get_submodule(piece)
                given.append(f"instance of {piece}")
            else:
                classes.append(_class(cls))
                given.append(cls.rpartition(".")[2])
            continue
        try:
            diffs = [max_diff(eager_outputs(loaded, a, k), eager_outputs(model, a, k)) for a, k in inputs(model, family, shape)[2]]
            break
        except ValueError as exc:  # a piece by size at sizes it has no program for: the load asks for its class
            found = re.search(r"(\S+) has no program for these input sizes \(([^)]*)\)", str(exc))
            if found is None:
                raise
            loaded.close()
            outside.append(f"{found.group(1)} at {found.group(2)}")
            cls = type(model.get_submodule(found.group(1)))
            classes.append(cls)
            given.append(cls.__name__)
    else:
        return f"refused after giving {', '.join(given)}"
    needs = f" (needs implementations=: {', '.join(given)})" if given else ""
    sized = f" (no program by size for {'; '.join(outside)})" if outside else ""
    return f"max |d| {max(diffs):.1e}{needs}{sized}"


def main() -> None:
    import _tiny_moe

    assert set(MOE) == set(_tiny_moe.FAMILIES), "tests/_tiny_moe.py's families changed: update MOE"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("families", nargs="*", default=[*MOE, *OTHERS])
    parser.add_argument("--list", action="store_true", help="name the families and stop")
    parser.add_argument("--automatic", action="store_true", help="the automatic cut alone (no classes=)")
    parser.add_argument("--load", nargs=3, metavar=("ARCHIVE", "FAMILY", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        try:
            print(fresh_load(*args.load), flush=True)
        except Exception as exc:  # the parent prints the last line
            print(f"FAILED {_first_line(exc)}", flush=True)
        return
    if args.list:
        print(" ".join([*MOE, *OTHERS]))
        return
    folder = tempfile.mkdtemp(prefix="families-")
    start = time.perf_counter()
    for family in args.families:
        for mode in ("automatic",) if args.automatic else ("automatic", "classes"):
            if family.endswith("+translation") and mode == "classes":
                continue  # the translation is for the pieces cut automatically
            for shape in TRANSLATED[family.removesuffix("+translation")][2] if family.endswith("+translation") else ("prefill", "step"):
                print(f"{family:25} {mode:9} {shape:7} {case(family, mode, shape, folder)}", flush=True)
    print(f"total {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
