"""Real tiny models (built from config, eager attention) with their layers behind custom operators.

Eager: a prefill then decode steps give the same logits as the untouched model, bit for bit, and the
caller's cache ends in the same state (every attribute of every layer): the updates the layers make
behind the operator are written back. Export: ``torch.export.export(strict=False)`` with a dynamic
batch and sequence gives one call node per replaced layer and the same outputs as eager at other
shapes, Qwen3-Next included, which does not export whole (the negative control below).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
from _pbp_compare import assert_same_state  # noqa: E402

from piece_by_piece_serialize import replace_with_custom_ops, restore_modules  # noqa: E402

_ns = (f"pbpm{i}" for i in itertools.count())  # operator namespaces are process-wide: one per test


def _layers(model: Any) -> tuple[type, ...]:
    """The classes of the decoder layers (several for a hybrid model)."""
    return tuple(dict.fromkeys(type(layer) for layer in model.model.layers))


DECODERS = {
    "llama": tiny.llama,
    "mistral": tiny.mistral,  # window 5: the 7-token prefill and the decode steps run past it
    "gemma2": tiny.gemma2,
    "gemma3": tiny.gemma3,
    "qwen3_next": tiny.qwen3_next,
    "lfm2": tiny.lfm2,
}


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_eager_prefill_and_decode_equal_the_model(family: str) -> None:
    model = DECODERS[family]()
    reference = copy.deepcopy(model)
    paths = replace_with_custom_ops(model, _layers(model), next(_ns))
    assert paths == [f"model.layers.{i}" for i in range(len(model.model.layers))]
    for batch in (1, 2):
        got_logits, got_cache = tiny.prefill(model, 7, batch=batch)
        want_logits, want_cache = tiny.prefill(reference, 7, batch=batch)
        assert torch.equal(got_logits, want_logits)
        assert_same_state(want_cache, got_cache)
        for got, want in zip(tiny.decode(model, got_cache, 4, batch), tiny.decode(reference, want_cache, 4, batch)):
            assert torch.equal(got, want)
        assert got_cache.get_seq_length() == 11
        assert_same_state(want_cache, got_cache)
    assert restore_modules(model) == paths
    assert all(type(layer) in _layers(reference) for layer in model.model.layers)


@pytest.mark.parametrize("family", ["t5", "whisper"])
def test_encoder_decoder_blocks_with_their_cache(family: str) -> None:
    model = getattr(tiny, family)()
    reference = copy.deepcopy(model)
    decoder = model.get_decoder()
    blocks = decoder.block if family == "t5" else decoder.layers
    paths = replace_with_custom_ops(model, type(blocks[0]), next(_ns))
    assert len(paths) == (4 if family == "t5" else 2)  # T5's encoder blocks are of the same class
    got_logits, got_cache, got_encoder = tiny.encoder_decoder_prefill(model, 5)
    want_logits, want_cache, want_encoder = tiny.encoder_decoder_prefill(reference, 5)
    assert type(got_cache).__name__ == "EncoderDecoderCache"
    assert torch.equal(got_logits, want_logits)
    assert_same_state(want_cache, got_cache)
    steps = zip(
        tiny.encoder_decoder_decode(model, got_cache, got_encoder, 3),
        tiny.encoder_decoder_decode(reference, want_cache, want_encoder, 3),
    )
    for got, want in steps:
        assert torch.equal(got, want)
    assert_same_state(want_cache, got_cache)
    restore_modules(model)


def _export(model: Any) -> Any:
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=128)
    return torch.export.export(tiny.Logits(model), (tiny.ids(6, 2),), dynamic_shapes=({0: batch, 1: seq},), strict=False)


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2", "gemma3", "qwen3_next", "lfm2"])
def test_export_piece_by_piece_with_dynamic_batch_and_sequence(family: str) -> None:
    model = DECODERS[family]()
    reference = copy.deepcopy(model)
    namespace = next(_ns)
    paths = replace_with_custom_ops(model, _layers(model), namespace)
    with torch.no_grad():  # calibration: two eager calls of other sizes teach the operators their output shapes
        for batch, n in ((2, 5), (3, 9)):
            model(tiny.ids(n, batch), use_cache=False)
    program = _export(model)
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == namespace]
    assert [n.target.name() for n in calls] == [f"{namespace}::model__layers__{i}" for i in range(len(paths))]
    exported = program.module()
    for batch, n in ((1, 3), (4, 11), (2, 70)):  # 70 > the window of mistral and gemma2, > qwen3_next's chunk 64
        x = tiny.ids(n, batch, seed=5)
        with torch.no_grad():
            want = reference(x, use_cache=False).logits
            got = exported(x)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    restore_modules(model)


def test_qwen3_next_does_not_export_whole() -> None:
    """The negative control of the test above: its linear attention guards on the sequence length."""
    with pytest.raises(Exception, match="seq"):
        _export(tiny.qwen3_next())


class _Seq2SeqLogits(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: Any, mask: Any, decoder_ids: Any, decoder_mask: Any) -> Any:
        if self.model.config.model_type == "t5":
            encoder = {"input_ids": inputs, "attention_mask": mask}
        else:
            encoder = {"input_features": inputs}
        return self.model(**encoder, decoder_input_ids=decoder_ids, decoder_attention_mask=decoder_mask, use_cache=False).logits


def _seq2seq_inputs(family: str, batch: int, n: int, m: int, seed: int = 0) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, tiny.VOCAB, (batch, n), generator=g) if family == "t5" else torch.randn(batch, 8, 32, generator=g)
    # One padded position: transformers drops an all-ones mask in eager mode but builds it under tracing, so the
    # calibration calls would not have the structure of the traced ones (the error says so) without it.
    mask = torch.ones(batch, n, dtype=torch.long)
    mask[0, -1] = 0
    decoder_mask = torch.ones(batch, m, dtype=torch.long)
    decoder_mask[0, -1] = 0
    return inputs, mask, torch.randint(0, tiny.VOCAB, (batch, m), generator=g), decoder_mask


@pytest.mark.parametrize("family", ["t5", "whisper"])
def test_export_encoder_decoder_blocks(family: str) -> None:
    model = getattr(tiny, family)()
    reference = _Seq2SeqLogits(copy.deepcopy(model))
    encoder, decoder = model.get_encoder(), model.get_decoder()
    classes = tuple({type(m) for m in (*getattr(encoder, "block", getattr(encoder, "layers", ())), *getattr(decoder, "block", getattr(decoder, "layers", ())))})
    namespace = next(_ns)
    paths = replace_with_custom_ops(model, classes, namespace)
    assert len(paths) == 4
    wrapped = _Seq2SeqLogits(model)
    with torch.no_grad():
        for batch, n, m in ((2, 5, 3), (3, 9, 6)):
            wrapped(*_seq2seq_inputs(family, batch, n, m))
    batch, seq, target = (torch.export.Dim(name, min=1 if name == "b" else 2, max=60) for name in ("b", "s", "t"))
    shapes = ({0: batch, 1: seq}, {0: batch, 1: seq}) if family == "t5" else ({0: batch}, {0: batch, 1: seq})
    program = torch.export.export(
        wrapped, _seq2seq_inputs(family, 2, 6, 4), dynamic_shapes=(*shapes, {0: batch, 1: target}, {0: batch, 1: target}), strict=False
    )
    calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == namespace]
    assert len(calls) == len(paths)
    for b, n, m in ((1, 3, 2), (4, 11, 7)):
        x = _seq2seq_inputs(family, b, n, m, seed=5)
        with torch.no_grad():
            torch.testing.assert_close(program.module()(*x), reference(*x), rtol=0, atol=1e-5)
    restore_modules(model)


def test_a_structure_seen_only_under_tracing_is_named() -> None:
    """Calibrated without padding, T5's encoder blocks never saw the mask that tracing builds: the error lists
    what was recorded, so the difference (None where a Tensor is traced) shows."""
    model = tiny.t5()
    replace_with_custom_ops(model, type(model.get_encoder().block[0]), next(_ns))
    wrapped = _Seq2SeqLogits(model)
    no_padding = lambda b, n, m: tuple(torch.ones_like(t) if i % 2 else t for i, t in enumerate(_seq2seq_inputs("t5", b, n, m)))  # noqa: E731
    with torch.no_grad():
        wrapped(*no_padding(2, 5, 3))
    with pytest.raises(Exception, match=r"never called eagerly with this call structure, \(\('Tensor', 'Tensor'.*Recorded: \(\('Tensor', 'None'"):
        torch.export.export(wrapped, no_padding(2, 6, 4), strict=False)
    restore_modules(model)


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen3_next"])
def test_eager_decode_on_a_static_cache(family: str) -> None:
    """StaticLayer updates its tensors in place (index_copy_): the one in-place change allowed, and written back."""
    model = DECODERS[family]()
    reference = copy.deepcopy(model)
    replace_with_custom_ops(model, _layers(model), next(_ns))
    ours = transformers.StaticCache(config=model.config, max_cache_len=16)
    theirs = transformers.StaticCache(config=reference.config, max_cache_len=16)
    got, _ = tiny.prefill(model, 7, ours)
    want, _ = tiny.prefill(reference, 7, theirs)
    assert torch.equal(got, want)
    for got, want in zip(tiny.decode(model, ours, 4), tiny.decode(reference, theirs, 4)):
        assert torch.equal(got, want)
    assert int(ours.get_seq_length()) == 11
    assert_same_state(theirs, ours)
    restore_modules(model)


_DECODE_EXPORT = r'''
import copy, sys
import torch
import torch.utils._pytree as pytree
sys.path.insert(0, sys.argv[1])
import _tiny_models as tiny
from transformers.integrations.executorch import register_dynamic_cache_export_support
from piece_by_piece_serialize import replace_with_custom_ops

register_dynamic_cache_export_support()  # a DynamicCache becomes a pytree node: it can be an export input
model = tiny.llama()
reference = copy.deepcopy(model)
replace_with_custom_ops(model, type(model.model.layers[0]), "pbpdecode")

class Step(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, ids, cache):
        out = self.model(ids, cache=cache, use_cache=True)
        return out.logits, out.cache

with torch.no_grad():  # calibration: decode steps of two sizes on caches of two sizes
    for batch, n, steps in ((2, 5, 1), (3, 9, 3)):
        _, cache = tiny.prefill(model, n, batch=batch)
        model(tiny.ids(steps, batch), cache=cache)
    _, cache = tiny.prefill(model, 6, batch=2)
b, s, p = torch.export.Dim("b", min=1, max=32), torch.export.Dim("s", min=1, max=64), torch.export.Dim("p", min=1, max=64)
program = torch.export.export(
    Step(model), (tiny.ids(2, 2), cache), dynamic_shapes=({0: b, 1: s}, [[{0: b, 2: p}] * 2, [{0: b, 2: p}] * 2]), strict=False
)
calls = [n for n in program.graph.nodes if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == "pbpdecode"]
assert len(calls) == 2, calls
for batch, past, new in ((1, 4, 1), (3, 10, 2), (2, 30, 5)):
    _, ours = tiny.prefill(reference, past, batch=batch)
    _, theirs = tiny.prefill(reference, past, batch=batch)
    x = tiny.ids(new, batch, seed=9)
    with torch.no_grad():
        logits, cache = program.module()(x, ours)
        want = reference(x, cache=theirs, use_cache=True)
    torch.testing.assert_close(logits, want.logits, rtol=0, atol=1e-5)
    assert cache.get_seq_length() == theirs.get_seq_length() == past + new
    for a, b_ in zip(cache.layers, theirs.layers):
        torch.testing.assert_close(a.keys, b_.keys, rtol=0, atol=1e-6)
        torch.testing.assert_close(a.values, b_.values, rtol=0, atol=1e-6)
print("ok")
'''


def test_export_a_decode_step_with_a_cache_input() -> None:
    """A DynamicCache as an input of the exported program (transformers' pytree registration, in a process of its
    own since it is global): the layers' operators take the cache and return it, and the program's cache output
    equals eager's after one to five new tokens on pasts of 4 to 30."""
    import subprocess
    import sys
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _DECODE_EXPORT, tests], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def test_a_model_output_holding_the_cache() -> None:
    """LlamaModel behind one operator: its output is a ModelOutput whose ``cache`` is the cache it was given
    (or made); decoding on gives the same logits, and the cache in the output is the caller's own object, as
    from the model itself. Its forward is decorated (it reads use_cache from **kwargs): keyword arguments stay
    keyword arguments."""
    from piece_by_piece_serialize import as_custom_op

    model = tiny.llama()
    reference = copy.deepcopy(model)
    model.model = as_custom_op(model.model, f"{next(_ns)}::llama_model")
    with torch.no_grad():
        ours, theirs = model(tiny.ids(6, 2), use_cache=True), reference(tiny.ids(6, 2), use_cache=True)
        assert type(ours).__name__ == "CausalLMOutputWithPast" and torch.equal(ours.logits, theirs.logits)
        assert_same_state(theirs.cache, ours.cache)
        for step in range(3):
            token = tiny.ids(1, 2, seed=step)
            got, want = model(token, cache=ours.cache), reference(token, cache=theirs.cache)
            assert torch.equal(got.logits, want.logits)
            assert got.cache is ours.cache and want.cache is theirs.cache
        assert_same_state(theirs.cache, ours.cache)
        out = model.model(tiny.ids(3, 2))
    assert type(out).__name__ == "BaseModelOutputWithPast" and list(out.keys()) == ["last_hidden_state", "cache"]
