"""export_piece_by_piece on real tiny transformers models built from config (no download, eager attention).

Equality is the test: the runnable module of each export against the untouched model at sizes the example did
not have (other batches and lengths, a decode step on pasts of other lengths), logits and cache state alike.
Llama, T5 and Whisper export whole; ``classes=`` puts the layers of Mistral and the blocks of T5 and Whisper behind
operators; a decode step takes a ``DynamicCache`` and gives it back grown, or a ``StaticCache`` and writes it in
place (the program, and the artifact loaded from it). Qwen3-Next, which does not export whole
and is cut automatically, is the example of docs/export.md, run by test_export_docs.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402
from piece_by_piece_serialize import dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.export import PieceStatus  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)


def _logits_export(model: Any, classes: Any = None) -> Any:
    ids = tiny.ids(6, 2)
    return export_piece_by_piece(
        model, (ids,), {"attention_mask": torch.ones_like(ids), "use_cache": False},
        dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ}}, classes=classes,
    )  # fmt: skip


def _assert_logits_equal(result: Any, model: Any, sizes: Any) -> None:
    runnable = result.module()
    for batch, n in sizes:
        x = tiny.ids(n, batch, seed=5)
        with torch.no_grad():
            got = runnable(x, attention_mask=torch.ones_like(x), use_cache=False).logits
            want = model(x, attention_mask=torch.ones_like(x), use_cache=False).logits
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_llama_exports_whole() -> None:
    model = tiny.llama()
    result = _logits_export(model)
    assert result.pieces == {} and len(result.report.attempts) == 1 and result.report.root.max_abs_diff == 0
    _assert_logits_equal(result, model, ((1, 3), (4, 11), (2, 70)))


def _seq2seq_inputs(family: str, batch: int, n: int, m: int, seed: int = 0) -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    if family == "t5":
        encoder = {"input_ids": torch.randint(0, tiny.VOCAB, (batch, n), generator=g), "attention_mask": torch.ones(batch, n, dtype=torch.long)}
    else:
        encoder = {"input_features": torch.randn(batch, 8, 32, generator=g)}
    decoder = {"decoder_input_ids": torch.randint(0, tiny.VOCAB, (batch, m), generator=g), "decoder_attention_mask": torch.ones(batch, m, dtype=torch.long)}
    return {**encoder, **decoder, "use_cache": False}


@pytest.mark.parametrize("family", ["t5", "whisper"])
@pytest.mark.parametrize("by_class", [False, True], ids=["automatic", "classes"])
def test_encoder_decoder_models(family: str, by_class: bool) -> None:
    model = getattr(tiny, family)()
    target = torch.export.Dim("target", min=2, max=60)
    shapes: dict[str, Any] = {"decoder_input_ids": {0: BATCH, 1: target}, "decoder_attention_mask": {0: BATCH, 1: target}}
    if family == "t5":
        shapes.update(input_ids={0: BATCH, 1: SEQ}, attention_mask={0: BATCH, 1: SEQ})
    else:
        shapes.update(input_features={0: BATCH})
    decoder = model.get_decoder()
    blocks = decoder.block if family == "t5" else decoder.layers
    classes = type(blocks[0]) if by_class else None
    result = export_piece_by_piece(model, (), _seq2seq_inputs(family, 2, 6, 4), dynamic_shapes=shapes, classes=classes)
    if by_class:
        assert len(result.report.behind_operators) == (4 if family == "t5" else 2)  # T5's encoder blocks share the class
        assert all(result.pieces[p].program is not None for p in result.report.behind_operators)
    else:
        assert result.pieces == {}  # both export whole
    runnable = result.module()
    for batch, n, m in ((1, 3, 2), (4, 11, 7)):
        x = _seq2seq_inputs(family, batch, n, m, seed=5)
        with torch.no_grad():
            torch.testing.assert_close(runnable(**x).logits, model(**x).logits, rtol=0, atol=1e-5)


def test_classes_put_mistrals_layers_behind_operators_each_with_its_own_program() -> None:
    model = tiny.mistral()  # a window of 5: lengths 11 and 70 run past it
    layer = type(model.model.layers[0])
    result = _logits_export(model, classes=layer)
    assert result.report.behind_operators == ["model.layers.0", "model.layers.1"] and result.report.mode == "classes"
    for path in result.report.behind_operators:
        piece = result.pieces[path]
        assert piece.program is not None and piece.own_export_failure is None and piece.max_abs_diff == 0
        node = [n for n in result.program.graph.nodes if n.op == "call_function" and str(n.target) == f"{piece.operator.replace('::', '.')}.default"]
        assert len(node) == 1
    assert result.pieces["model.embed_tokens"].status is PieceStatus.IN_GRAPH
    _assert_logits_equal(result, model, ((1, 3), (4, 11), (2, 70)))


def _decode_step_export(model: Any, classes: Any = None, *, examples: bool = False) -> Any:
    _, cache = tiny.prefill(model, 5, batch=2)
    ids = tiny.ids(2, 2)
    if examples:  # the dynamic shapes from a second example, the cache's tensors included
        _, other = tiny.prefill(model, 8, batch=3)
        shapes: Any = torch.export.AdditionalInputs()
        shapes.add((tiny.ids(3, 3),), {"cache": other, "use_cache": True})
    else:
        past = torch.export.Dim("past", min=1, max=64)
        shapes = {"input_ids": {0: BATCH, 1: torch.export.Dim("new", min=1, max=16)}, "cache": {0: BATCH, 2: past}}
    return export_piece_by_piece(model, (ids,), {"cache": cache, "use_cache": True}, dynamic_shapes=shapes, classes=classes)


@pytest.mark.parametrize("mode", ["whole", "classes", "examples"])
def test_a_decode_step_takes_a_dynamic_cache_and_writes_it_back(mode: str) -> None:
    model = tiny.llama()
    classes = type(model.model.layers[0]) if mode == "classes" else None
    result = _decode_step_export(model, classes, examples=mode == "examples")
    assert len(result.report.behind_operators) == (2 if mode == "classes" else 0)
    runnable = result.module()
    for batch, past, new in ((1, 4, 1), (3, 10, 2), (2, 30, 5)):
        _, ours = tiny.prefill(model, past, batch=batch)
        theirs = copy.deepcopy(ours)
        x = tiny.ids(new, batch, seed=9)
        with torch.no_grad():
            got = runnable(x, cache=ours, use_cache=True)
            want = model(x, cache=theirs, use_cache=True)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
        assert got.cache is ours and ours.get_seq_length() == past + new  # the caller's cache, grown in place
        assert_same_state(theirs, ours)


def test_dynamic_shapes_from_examples_covers_every_tensor_of_a_cache() -> None:
    model = tiny.llama()
    _, small = tiny.prefill(model, 5, batch=2)
    _, large = tiny.prefill(model, 9, batch=3)
    shapes = dynamic_shapes_from_examples(model, [((tiny.ids(2, 2),), {"cache": small}), ((tiny.ids(4, 3),), {"cache": large})])
    dynamic = torch.export.Dim.DYNAMIC
    assert shapes["input_ids"] == {0: dynamic, 1: dynamic}
    assert shapes["cache"] == [{0: dynamic, 2: dynamic}] * 4  # k0, v0, k1, v1
    assert all(v is None for k, v in shapes.items() if k not in ("input_ids", "cache"))
    reference = copy.deepcopy(model)
    result = export_piece_by_piece(model, (tiny.ids(2, 2),), {"cache": small}, dynamic_shapes=shapes)
    _, ours = tiny.prefill(reference, 7, batch=4)
    theirs = copy.deepcopy(ours)
    x = tiny.ids(3, 4, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(result.module()(x, cache=ours).logits, reference(x, cache=theirs).logits, rtol=0, atol=1e-5)
    assert_same_state(theirs, ours)


def _static_cache(model: Any, batch: int, past: int) -> Any:
    """A StaticCache of 32 positions holding a prefill of ``past`` tokens: written in place, never grown."""
    cache = transformers.StaticCache(config=model.config, max_cache_len=32)
    with torch.no_grad():
        model(tiny.ids(past, batch), cache=cache, use_cache=True)
    return cache


@pytest.mark.parametrize("classes", [None, "LlamaDecoderLayer"])
def test_a_decode_step_writes_a_static_cache_in_place_and_the_artifact_too(classes: Any, tmp_path: Any) -> None:
    from piece_by_piece_serialize import load_piece_by_piece

    model = tiny.llama()
    position = torch.tensor([5])
    examples = [((tiny.ids(1, b, seed=3),), {"cache": _static_cache(model, b, 5), "cache_position": position}) for b in (2, 3)]
    shapes = dynamic_shapes_from_examples(model, examples)
    result = export_piece_by_piece(model, *examples[0], dynamic_shapes=shapes, classes=classes)
    assert len(result.report.behind_operators) == (0 if classes is None else 2)
    result.save(tmp_path / "static.pt2")
    _assert_static_steps(model, result.module())
    result.close()  # its operators go: the artifact registers its own
    loaded = load_piece_by_piece(tmp_path / "static.pt2")
    _assert_static_steps(model, loaded)
    loaded.close()


def _assert_static_steps(model: Any, runnable: Any) -> None:
    for batch, past in ((1, 7), (3, 4)):
        ours, theirs = _static_cache(model, batch, past), _static_cache(model, batch, past)
        x, at = tiny.ids(1, batch, seed=9), torch.tensor([past])
        with torch.no_grad():
            got = runnable(x, cache=ours, cache_position=at)
            want = model(x, cache=theirs, cache_position=at)
        torch.testing.assert_close(got.logits, want.logits, rtol=0, atol=1e-5)
        assert_same_state(theirs, ours)  # position ``past`` written in every layer, in place
        assert all(layer.keys[:, :, past].abs().sum() > 0 for layer in ours.layers)


def test_gemma3n_layers_sharing_keys_and_values_each_with_its_own_program() -> None:
    # the layers' shared dict is written back like a cache: recorded after each call and compared with the programs
    model = tiny.gemma3n()
    result = _logits_export(model, classes="Gemma3nTextDecoderLayer")
    cut = result.report.behind_operators
    assert cut == [f"model.layers.{i}" for i in range(4)]
    for path in cut:
        piece = result.pieces[path]
        assert piece.program is not None and piece.max_abs_diff == 0 and piece.checked_calls == 2
    _assert_logits_equal(result, model, [(1, 3), (3, 11), (2, 40)])
    result.close()
