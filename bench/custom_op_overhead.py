"""The cost of a module behind a custom operator, eager, against the bare module and one raw operator call.

Per-call overhead rows (target ≤ 3): what a call behind the operator costs on top of the bare module (medians of
paired differences, ours − bare, in alternation), against one raw ``torch.library`` operator call that takes the
same ``Tensor[]`` (and weights, and the call string) and returns as many tensors from a kernel that does nothing:
the floor any operator pays. Rows: a tiny Llama decoder layer without a cache; a decode step of the tiny Llama
with its 7-token ``DynamicCache`` (the cache written back; per layer call); a decode step of a tiny LFM2 (a hybrid
cache of short-convolution and attention layers); the operators of a loaded artifact (a piece's operator against
its own program, and the loaded module against its top program), and the load of that artifact against the same
load with its checks switched off (target ≤ 1.1). Beside them, with no target, the part of the
overhead no wrapper avoids: the same bare layer run by a raw operator's kernel.

Decode-step rows (the model behind operators / the untouched model): the tiny Llama, a 32-layer tiny Llama (target
≤ 1.1) and two layers of a hidden-1024 Llama. The cache is cropped back after each step, on both sides.

torch runs on one thread here: on two shared cores a second intra-op thread made these tiny layers 10-20 times
slower whenever the other core was busy (a 2-layer decode step: 15.6 ms against 0.88 ms), which drowned the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _timing import Row, interleaved, interleaved_samples, section

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the tiny models of the tests

_ns = (f"pbpbench{i}" for i in itertools.count())
RAW = "one raw Tensor[] operator call (same tensors)"


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


_LIBS: list[Any] = []  # the benchmark's own operators, kept alive for the run


def _raw_op(n_out: int, weights: bool, kernel: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """An operator of the wrapper's schema whose kernel returns ``n_out`` ready tensors and does nothing else (or
    runs ``kernel``)."""
    import torch

    name = next(_ns)
    lib = torch.library.Library(name, "FRAGMENT")
    lib.define(f"raw({'Tensor[] tensors, Tensor[] weights' if weights else 'Tensor[] tensors'}, str call) -> Tensor[]")
    ready = [torch.zeros(1) for _ in range(n_out)]
    lib.impl("raw", kernel or (lambda *a: ready), "CompositeExplicitAutograd")
    _LIBS.append(lib)
    return getattr(torch.ops, name).raw.default  # type: ignore[no-any-return]


def overhead(fns: dict[str, Callable[[], object]], *, repeats: int, number: int) -> dict[str, float]:
    """Median of the paired differences ``<key> - bare`` for every other key but ``raw``, and ``raw``'s median;
    the samples alternate as in ``_timing.interleaved``, so a busy spell hits each pair alike."""
    samples = interleaved_samples(fns, repeats=repeats, number=number)
    out = {"raw": statistics.median(samples["raw"]), "bare": statistics.median(samples["bare"])}
    for key in fns:
        if key not in ("raw", "bare"):
            out[key] = statistics.median(a - b for a, b in zip(samples[key], samples["bare"], strict=True))
    return out


def _capture(op: Any) -> dict[str, Any]:
    """The tensors, weights and key of the next call of a wrapper's operator, and how many tensors it returned."""
    seen: dict[str, Any] = {}
    run = op.eager  # the kernel's work, reached with or without the dispatcher (Note [plain eager calls])

    def spy(tensors: list[Any], rest: tuple[Any, ...]) -> Any:
        out = run(tensors, rest)
        seen.update(tensors=tensors, key=rest[-1], n_out=len(out[0]), weights=rest[0] if len(rest) == 2 else None)
        return out

    op.eager = spy
    seen["restore"] = lambda: setattr(op, "eager", run)
    return seen


def _overhead_row(what: str, t: dict[str, float], per: int, note: str, key: str = "ours") -> Row:
    return Row("custom_op", what, t[key] / per, RAW, t["raw"], target=3.0, note=note)


def _layer_rows(args: argparse.Namespace) -> list[Row]:
    import torch

    from piece_by_piece_serialize import replace_with_custom_ops
    from piece_by_piece_serialize.cli._demo import tiny_llama

    model = tiny_llama()
    bare, wrapped = copy.deepcopy(model), copy.deepcopy(model)
    replace_with_custom_ops(wrapped, type(bare.model.layers[0]), next(_ns))
    layer, wrapped_layer = bare.model.layers[0], wrapped.model.layers[0]
    hidden = torch.randn(1, 7, 32)
    position_ids = torch.arange(7)[None]
    embeddings = bare.model.rotary_emb(hidden, position_ids)
    seen = _capture(wrapped_layer._pbp_op)
    wrapped_layer(hidden, position_embeddings=embeddings, position_ids=position_ids)
    seen["restore"]()
    raw = _raw_op(seen["n_out"], False)
    # an operator whose kernel runs the bare layer on the same arguments: the floor of any wrapper
    inside = _raw_op(0, False, lambda t, c: [layer(hidden, position_embeddings=embeddings, position_ids=position_ids)])
    t = overhead(
        {
            "ours": lambda: wrapped_layer(hidden, position_embeddings=embeddings, position_ids=position_ids),
            "inside": lambda: inside(seen["tensors"], seen["key"]),
            "bare": lambda: layer(hidden, position_embeddings=embeddings, position_ids=position_ids),
            "raw": lambda: raw(seen["tensors"], seen["key"]),
        },
        repeats=10 if args.quick else 60,
        number=5 if args.quick else 20,
    )
    note = f"tiny Llama, 7 tokens; the layer alone {t['bare'] * 1e6:.0f} µs"
    return [
        _overhead_row("per-call overhead, one decoder layer behind its operator, no cache (eager)", t, 1, note),
        Row("custom_op", "per-call overhead of the bare layer run by a raw operator's kernel (no wrapper: what is left "
            "outside our code)", t["inside"], RAW, t["raw"], note=note),  # fmt: skip
    ]


def _decode_rows(args: argparse.Namespace, label: str, model: Any, vocab: int) -> tuple[Row, dict[str, float]]:
    """A decode step with the model's cache: per layer call, the overhead against the raw operator."""
    import torch

    from piece_by_piece_serialize import make_copy, replace_with_custom_ops

    layers = model.model.layers
    bare, wrapped = copy.deepcopy(model), copy.deepcopy(model)
    paths = replace_with_custom_ops(wrapped, tuple({type(m) for m in layers}), next(_ns))
    ids = torch.randint(0, vocab, (1, 7), generator=torch.Generator().manual_seed(0))
    token = ids[:, :1]
    caches = {name: m(ids, use_cache=True).cache for name, m in (("ours", wrapped), ("bare", bare))}

    def step(model: Any, cache: Any) -> None:
        if croppable:
            model(token, cache=cache)
            cache.crop(-1)  # back to the 7 prefill tokens
        else:  # a linear-attention or convolution state cannot be cropped: a copy of the prefilled cache, both sides
            model(token, cache=make_copy(cache))

    croppable = all(hasattr(layer, "keys") for layer in caches["bare"].layers)
    seen = _capture(wrapped.get_submodule(paths[0])._pbp_op)
    with torch.enable_grad():  # through the kernel: a known structure's plain call is the module's own (Note [direct eager calls])
        step(wrapped, caches["ours"])
    seen["restore"]()
    raw = _raw_op(seen["n_out"], False)
    t = overhead(
        {"ours": lambda: step(wrapped, caches["ours"]), "bare": lambda: step(bare, caches["bare"]),
         "raw": lambda: raw(seen["tensors"], seen["key"])},
        repeats=5 if args.quick else 30, number=5 if args.quick else 20,
    )  # fmt: skip
    t["bare_step"] = t["bare"]
    note = f"{len(paths)} layers, 7-token cache, write-back included; {len(seen['tensors'])} tensors in, {seen['n_out']} out"
    return _overhead_row(f"per-call overhead, {label} decode step, per layer call (eager)", t, len(paths), note), t


def _decode_ratio(args: argparse.Namespace, label: str, model: Any, target: float | None) -> Row:
    import torch

    from piece_by_piece_serialize import replace_with_custom_ops

    # both sides are copies: a deep copy's weights can sit in memory that makes its matrix products slower
    # than the original's (measured: 13% on the hidden-1024 model), which would be charged to the operators
    bare, wrapped = copy.deepcopy(model), copy.deepcopy(model)
    n = len(replace_with_custom_ops(wrapped, type(bare.model.layers[0]), next(_ns)))
    ids = torch.randint(0, 128, (1, 7), generator=torch.Generator().manual_seed(0))
    token = ids[:, :1]
    caches = {name: m(ids, use_cache=True).cache for name, m in (("ours", wrapped), ("bare", bare))}

    def step(model: Any, cache: Any) -> None:
        model(token, cache=cache)
        cache.crop(-1)  # back to the 7 prefill tokens

    t = interleaved(
        {"ours": lambda: step(wrapped, caches["ours"]), "bare": lambda: step(bare, caches["bare"])},
        repeats=3 if args.quick else 15,
        number=max(2, (20 if args.quick else 100) // max(1, n // 2)),
    )
    return Row("custom_op", f"{label} decode step, {n} layers behind custom operators (eager)", t["ours"],
               "the same model, layers not replaced", t["bare"], target=target, note="7-token DynamicCache")  # fmt: skip


def _artifact_rows(args: argparse.Namespace) -> list[Row]:
    import torch

    from piece_by_piece_serialize import export_piece_by_piece, load_piece_by_piece
    from piece_by_piece_serialize.cli._demo import tiny_llama

    model = tiny_llama()
    ids = torch.randint(0, 128, (2, 6), generator=torch.Generator().manual_seed(0))
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=128)
    result = export_piece_by_piece(model, (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {0: batch, 1: seq}},
                                   classes="LlamaDecoderLayer")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "llama.pt2"
        result.save(path)
        result.close()
        load_row = _load_row(args, path)
        loaded = load_piece_by_piece(path)
    operator = loaded._finalizer.peek()[2][0][0]  # the loaded operators (weakref.finalize's arguments)
    seen: dict[str, Any] = {}
    runner = operator.runner

    def spy(*flat: Any) -> Any:
        n = len(operator.record.weights)
        seen.update(weights=list(flat[:n]), tensors=list(flat[n:]))
        return runner(*flat)

    operator.runner = spy
    loaded(ids, use_cache=False)
    operator.runner = runner
    op = getattr(getattr(torch.ops, loaded.manifest.namespace), operator.record.name).default
    key = operator.record.program_key
    n_out = len(runner(*seen["weights"], *seen["tensors"]))
    raw_w, raw_top = _raw_op(n_out, True), _raw_op(1, False)
    repeats, number = (5, 5) if args.quick else (40, 20)
    t = overhead(
        {"ours": lambda: op(seen["tensors"], seen["weights"], key), "bare": lambda: runner(*seen["weights"], *seen["tensors"]),
         "raw": lambda: raw_w(seen["tensors"], seen["weights"], key)},
        repeats=repeats, number=number,
    )  # fmt: skip
    rows = [_overhead_row("per-call overhead, a loaded artifact's operator (its piece's program)", t, 1,
                          f"tiny Llama decoder layer; the program alone {t['bare'] * 1e6:.0f} µs")]  # fmt: skip
    top = loaded.program
    flat = [ids.contiguous()]
    t = overhead(
        {"ours": lambda: loaded(ids, use_cache=False), "bare": lambda: top(*flat), "raw": lambda: raw_top(flat, loaded.key)},
        repeats=repeats, number=number,
    )  # fmt: skip
    rows.append(_overhead_row("per-call overhead, a loaded artifact called with the model's arguments", t, 1,
                              f"the top program alone {t['bare'] * 1e6:.0f} µs"))  # fmt: skip
    loaded.close()
    rows.append(load_row)
    return rows


def _load_row(args: argparse.Namespace, path: Path) -> Row:
    """``load_piece_by_piece`` of the tiny Llama archive against the same load with the strict reader, the
    operator allowlist, the expression and guard checks, the weight-placeholder check and the program digests
    switched off (Note [safe loading]): what refusing hostile archives costs a legitimate one."""
    from piece_by_piece_serialize import load_piece_by_piece
    from piece_by_piece_serialize.artifact import _archive

    def checked() -> None:
        load_piece_by_piece(path).close()

    def unchecked() -> None:
        saved = _archive.check_program, _archive._check_program, _archive._check_lifted, _archive.Archive.check_digest
        _archive.check_program, _archive._check_program, _archive._check_lifted = (lambda d, *a: d), (lambda *a: None), (lambda *a: None)
        _archive.Archive.check_digest = lambda *a: None  # type: ignore[method-assign]
        try:
            load_piece_by_piece(path).close()
        finally:
            _archive.check_program, _archive._check_program, _archive._check_lifted, _archive.Archive.check_digest = saved  # type: ignore[method-assign]

    t = interleaved({"ours": checked, "bare": unchecked}, repeats=3 if args.quick else 9)
    return Row("custom_op", "load_piece_by_piece, tiny Llama artifact (4 layers, one shared program)", t["ours"],
               "the same load without the loader's checks", t["bare"], target=1.1)  # fmt: skip


@section("custom_op")
def custom_op_overhead(args: argparse.Namespace) -> list[Row]:
    import torch
    from _tiny_models import lfm2, llama_sized

    from piece_by_piece_serialize.cli._demo import tiny_llama

    rows: list[Row] = []
    with one_thread(), torch.no_grad():
        rows.extend(_layer_rows(args))
        rows.append(_decode_rows(args, "tiny Llama, DynamicCache", tiny_llama(), 128)[0])
        rows.append(_decode_rows(args, "tiny LFM2, hybrid cache (conv and attention layers)", lfm2(), 64)[0])
        rows.extend(_artifact_rows(args))
        rows.append(_decode_ratio(args, "tiny Llama (hidden 32)", tiny_llama(), None))
        rows.append(_decode_ratio(args, "tiny Llama (hidden 32)", llama_sized(32, 32, vocab=128), 1.1))
        if not args.quick:
            rows.append(_decode_ratio(args, "Llama, hidden 1024", _medium_llama(), None))
    return rows


def _medium_llama() -> object:
    """Two decoder layers of a mid-sized Llama (hidden 1024, 16 heads, 4 key/value heads): a layer costs
    about a millisecond on a CPU core, closer to what the operators wrap in practice."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "llama", vocab_size=128, hidden_size=1024, intermediate_size=2816, num_hidden_layers=2,
        num_attention_heads=16, num_key_value_heads=4, head_dim=64,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


@section("export")
def export_time(args: argparse.Namespace) -> list[Row]:
    """``export_piece_by_piece(..., classes=LlamaDecoderLayer)`` (each piece also exported alone, identical ones
    sharing one program: Note [shared programs]) against ``torch.export.export`` of the whole model, in alternation;
    target ≤ 1: identical layers should make the piece-by-piece export cheaper, not dearer."""
    import torch
    from _tiny_models import llama_sized

    from piece_by_piece_serialize import export_piece_by_piece

    rows = []
    with one_thread():
        for layers in (8,) if args.quick else (8, 32):
            model = llama_sized(32, layers, vocab=128)
            ids = torch.randint(0, 128, (2, 6), generator=torch.Generator().manual_seed(0))
            batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=128)
            shapes = {"input_ids": {0: batch, 1: seq}}

            def whole() -> None:
                torch.export.export(model, (ids,), {"use_cache": False}, dynamic_shapes={**shapes, "use_cache": None}, strict=False)

            def ours() -> None:
                export_piece_by_piece(model, (ids,), {"use_cache": False}, dynamic_shapes=shapes, classes="LlamaDecoderLayer").close()

            samples: dict[str, list[float]] = {"ours": [], "whole": []}
            for _ in range(1 if args.quick or layers > 8 else 2):
                for key, fn in (("ours", ours), ("whole", whole)):
                    start = time.perf_counter()
                    fn()
                    samples[key].append(time.perf_counter() - start)
            rows.append(Row("export", f"export_piece_by_piece(classes=LlamaDecoderLayer), tiny Llama, {layers} layers",
                            statistics.median(samples["ours"]), "torch.export.export of the whole model",
                            statistics.median(samples["whole"]), target=1.0, note="dynamic batch and sequence"))  # fmt: skip
    return rows
