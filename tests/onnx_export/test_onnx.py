"""PieceByPieceExport.to_onnx on real tiny models: each piece an ONNX local function, identical pieces one
function, the model checked by onnx.checker (full check) and run by onnxruntime against eager at shapes the
export did not see, with and without a cache.

The flat inputs fed to onnxruntime here are the test's own: the call flattened by the library's serializer,
the eager outputs flattened the same way, compared tensor by tensor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
import _toy_models as toy  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import dynamic_shapes_from_examples, export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.onnx_export import OnnxExportError  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)


def _assert_equal(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-5)


def _nodes(nodes: Any) -> Any:
    """The nodes and those of their subgraphs (an If's branches)."""
    for node in nodes:
        yield node
        for attribute in node.attribute:
            for graph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _nodes(graph.node)


def _functions(path: Path) -> dict[str, int]:
    """The functions of pieces' programs and how many times the main graph calls each, through the function that
    checks a piece's sizes (Note [a piece's own sizes])."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    inner = {f.name: [n.op_type for n in _nodes(f.node) if n.domain == "pbp.pieces"] for f in model.functions if f.domain == "pbp.pieces"}
    assert set(inner) == {*inner, *(c for called in inner.values() for c in called)}  # each one called is in the file
    calls: dict[str, int] = {}
    for node in model.graph.node:
        if node.domain == "pbp.pieces":
            # a checking function calls one program's function; a piece by size's dispatch is counted as itself
            for name in inner[node.op_type] if node.op_type.endswith("__checked") else [node.op_type]:
                calls[name] = calls.get(name, 0) + 1
    reached = {*calls, *(c for name in calls for c in inner[name])}
    assert reached | {n for n in inner if n.endswith("__checked")} == set(inner)  # no function is left uncalled
    return calls


def _logits_export(model: Any, classes: Any) -> Any:
    ids = tiny.ids(6, 2)
    return export_piece_by_piece(
        model, (ids,), {"attention_mask": torch.ones_like(ids), "use_cache": False},
        dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ}}, classes=classes,
    )  # fmt: skip


def _layer_classes(model: Any) -> tuple[type, ...]:
    return tuple(dict.fromkeys(type(layer) for layer in model.model.layers))


@pytest.mark.parametrize(
    ("family", "functions"),
    # lfm2: conv and attention layers. Gemma2's sliding and full layers compute the same function of their inputs
    # in a prefill (the window is in the mask, made outside the layers): one function; their caches differ (below)
    [("llama", 1), ("gemma2", 1), ("lfm2", 2)],
)
def test_identical_layers_share_one_function_and_onnxruntime_equals_eager(family: str, functions: int, tmp_path: Path, caplog: Any) -> None:
    model = tiny.CAUSAL[family]()
    caplog.set_level("INFO", logger="piece_by_piece_serialize")
    result = _logits_export(model, _layer_classes(model))
    shared = [r.getMessage() for r in caplog.records if ": the program of model.layers." in r.getMessage()]
    written = result.to_onnx(tmp_path / "model.onnx")
    progress = [r.getMessage() for r in caplog.records if r.name == "piece_by_piece_serialize.onnx_export"]
    assert sum(m.startswith("ONNX function ") for m in progress) == functions  # one export per distinct function
    assert f"the main graph: {len(model.model.layers)} piece call(s) of {functions} function(s)" in progress
    if family == "llama":  # identical layers: every layer after the first takes the first one's program
        assert len(shared) == len(model.model.layers) - 1
    calls = _functions(tmp_path / "model.onnx")
    assert len(calls) == functions and sum(calls.values()) == len(model.model.layers)
    assert sum(len(v) for v in written.functions.values()) == len(model.model.layers)
    assert written.model_diff <= 1e-5 and all(d <= 1e-5 for d in written.piece_diffs.values())
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]
    assert session.get_outputs()[0].name == "output.logits"
    # the dynamic dimensions carry the names of the user's Dims, inputs and outputs alike
    assert [i.shape for i in session.get_inputs()] == [["batch", "seq"], ["batch", "seq"]]
    assert session.get_outputs()[0].shape == ["batch", "seq", tiny.VOCAB]
    for batch, n in ((1, 3), (4, 11), (2, 70)):
        x = tiny.ids(n, batch, seed=5)
        kwargs = {"attention_mask": torch.ones_like(x), "use_cache": False}
        _assert_equal(run_onnx(tmp_path / "model.onnx", (x,), kwargs), eager_outputs(model, (x,), kwargs))
    assert "onnx |d|" in str(result.report) and f"{functions} function" in str(result.report)


@pytest.mark.parametrize(("family", "functions"), [("llama", 1), ("mistral", 1), ("gemma2", 2)])  # gemma2: a sliding and a full cache layer
def test_a_decode_step_with_its_cache_in_and_out(family: str, functions: int, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    model = tiny.CAUSAL[family]()
    _, cache = tiny.prefill(model, 6, batch=2)
    _, other = tiny.prefill(model, 8, batch=3)
    shapes = torch.export.AdditionalInputs()
    shapes.add((tiny.ids(2, 3),), {"cache": other})
    result = export_piece_by_piece(model, (tiny.ids(3, 2),), {"cache": cache}, dynamic_shapes=shapes, classes=_layer_classes(model))
    result.to_onnx(tmp_path / "step.onnx")
    calls = _functions(tmp_path / "step.onnx")
    assert len(calls) == functions and sum(calls.values()) == len(model.model.layers)  # though each updates its own slot
    capfd.readouterr()
    session = onnxruntime.InferenceSession(str(tmp_path / "step.onnx"), providers=["CPUExecutionProvider"])
    # the main graph's check reads the caches written back from their source, not through an Identity onnxruntime
    # cannot remove, which it warned of at every session, once per cache tensor
    assert "CanUpdateImplicitInputNameInSubgraphs" not in capfd.readouterr().err
    # Note [cache names]: the cache given is past, the cache given back present, layer by layer; the cache argument
    # after the call (its tensors are the output cache's) past.updated
    inputs, outputs = session.get_inputs(), session.get_outputs()
    assert [i.name for i in inputs][:3] == ["input_ids", "past.layers.0.keys", "past.layers.0.values"]
    assert [o.name for o in outputs][:3] == ["output.logits", "present.layers.0.keys", "present.layers.0.values"]
    assert "past.updated.layers.0.keys" in [o.name for o in outputs]
    # sizes no Dim named (two examples) are named where they first appear, and a size computed from them so
    assert inputs[0].shape == ["input_ids.shape[0]", "input_ids.shape[1]"]
    if family == "llama":  # a cache that grows: its length the past's and the new tokens'
        assert inputs[1].shape == ["input_ids.shape[0]", 2, "past.layers.0.keys.shape[2]", 8]
        assert outputs[1].shape[2] == "input_ids.shape[1] + past.layers.0.keys.shape[2]"
    for batch, past, new in ((1, 6, 2), (4, 11, 3), (2, 30, 5)):  # pasts past mistral's window of 5, as the examples
        _, ours = tiny.prefill(model, past, batch=batch)
        x = tiny.ids(new, batch, seed=9)
        _assert_equal(run_onnx(tmp_path / "step.onnx", (x,), {"cache": ours}), eager_outputs(model, (x,), {"cache": ours}))


def test_t5_blocks_of_the_encoder_and_the_decoder(tmp_path: Path) -> None:
    model = tiny.t5()

    def inputs(batch: int, n: int, m: int, seed: int = 0) -> dict[str, Any]:
        g = torch.Generator().manual_seed(seed)
        return {
            "input_ids": torch.randint(0, tiny.VOCAB, (batch, n), generator=g), "attention_mask": torch.ones(batch, n, dtype=torch.long),
            "decoder_input_ids": torch.randint(0, tiny.VOCAB, (batch, m), generator=g),
            "decoder_attention_mask": torch.ones(batch, m, dtype=torch.long), "use_cache": False,
        }  # fmt: skip

    target = torch.export.Dim("target", min=2, max=60)
    shapes = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ},
              "decoder_input_ids": {0: BATCH, 1: target}, "decoder_attention_mask": {0: BATCH, 1: target}}  # fmt: skip
    result = export_piece_by_piece(model, (), inputs(2, 6, 4), dynamic_shapes=shapes, classes=type(model.get_encoder().block[0]))
    written = result.to_onnx(tmp_path / "t5.onnx")
    calls = _functions(tmp_path / "t5.onnx")
    assert sum(calls.values()) == 4 and len(calls) == len(written.functions) >= 2  # encoder and decoder blocks differ
    for batch, n, m in ((1, 3, 2), (3, 11, 7), (2, 20, 9)):
        kwargs = inputs(batch, n, m, seed=5)
        _assert_equal(run_onnx(tmp_path / "t5.onnx", (), kwargs), eager_outputs(model, (), kwargs))


def test_a_piece_without_its_own_program_is_refused_by_name(tmp_path: Path) -> None:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    with pytest.raises(OnnxExportError, match=r"pieces without a program of their own cannot be ONNX functions: top\.mid\.leaf \(data-dependent guard: "):
        result.to_onnx(tmp_path / "deep.onnx")
    assert not (tmp_path / "deep.onnx").exists()


def test_a_pieces_function_is_cut_from_its_program_without_copying_its_weights() -> None:
    """A piece program's example inputs are the model's own weights (its layer's): the pruned copy to_onnx exports
    and holds until the end does not copy them (a decoder layer's 116 MB raised the peak of a 1B bfloat16 model's
    to_onnx by as much), and the piece's own program keeps them as they are."""
    from piece_by_piece_serialize.onnx_export._pieces import prune

    model = tiny.llama()
    program = _logits_export(model, "LlamaDecoderLayer").pieces["model.layers.0"].program
    examples = program.example_inputs
    weights = {id(w) for w in model.model.layers[0].parameters()}
    assert weights <= {id(t) for t in torch.utils._pytree.tree_leaves(examples)}  # what the copy would duplicate
    cut = prune(program)
    assert cut.program.example_inputs is None
    assert program.example_inputs is examples and cut.program is not program


def test_a_decode_step_writing_a_static_cache_in_place(tmp_path: Path) -> None:
    model = tiny.llama()

    def static(batch: int, past: int) -> Any:
        cache = transformers.StaticCache(config=model.config, max_cache_len=32)
        with torch.no_grad():
            model(tiny.ids(past, batch), cache=cache, use_cache=True)
        return cache

    examples = [((tiny.ids(1, b, seed=3),), {"cache": static(b, 5), "cache_position": torch.tensor([5])}) for b in (2, 3)]
    shapes = dynamic_shapes_from_examples(model, examples)
    result = export_piece_by_piece(model, *examples[0], dynamic_shapes=shapes, classes=_layer_classes(model))
    written = result.to_onnx(tmp_path / "static.onnx")
    # each layer writes its own slot of the cache, yet computes the same function of what it is given
    assert _functions(tmp_path / "static.onnx") == {"model__layers__0": 2} and written.model_diff <= 1e-5
    for batch, past in ((1, 7), (4, 12)):
        kwargs = {"cache": static(batch, past), "cache_position": torch.tensor([past])}
        x = tiny.ids(1, batch, seed=9)
        got, want = run_onnx(tmp_path / "static.onnx", (x,), kwargs), eager_outputs(model, (x,), kwargs)
        _assert_equal(got, want)
        assert any(w[:, :, past].abs().sum() > 0 for w in want[1:] if w.dim() == 4)  # the step wrote the cache


def test_gemma3n_layers_that_store_and_that_read_shared_keys_are_two_functions(tmp_path: Path) -> None:
    model = tiny.gemma3n()
    result = _logits_export(model, "Gemma3nTextDecoderLayer")
    written = result.to_onnx(tmp_path / "gemma3n.onnx")
    # layers 0 and 1 compute and store their keys and values; layers 2 and 3 read them from the shared dict
    assert written.functions == {"model__layers__0": ["model.layers.0", "model.layers.1"], "model__layers__2": ["model.layers.2", "model.layers.3"]}
    assert _functions(tmp_path / "gemma3n.onnx") == {"model__layers__0": 2, "model__layers__2": 2}
    assert written.model_diff <= 1e-5 and all(d <= 1e-5 for d in written.piece_diffs.values())
    for batch, n in ((1, 3), (3, 11)):
        x = tiny.ids(n, batch, seed=5)
        kwargs = {"attention_mask": torch.ones_like(x), "use_cache": False}
        _assert_equal(run_onnx(tmp_path / "gemma3n.onnx", (x,), kwargs), eager_outputs(model, (x,), kwargs))


def test_a_bfloat16_model_onnxruntime_cannot_run_on_cpu_is_written_and_its_checks_said_not_run(tmp_path: Path) -> None:
    """onnxruntime 1.32 has no CPU kernel for Where in bfloat16: the file is written and valid, and to_onnx says its
    checks did not run and why (a warning, ``not_checked``, NaN differences, the report's note) instead of
    raising onnxruntime's own error after the file was written."""
    model = tiny.llama().to(torch.bfloat16)
    ids = tiny.ids(3, 2)
    result = export_piece_by_piece(model, (ids,), dynamic_shapes=({0: BATCH, 1: SEQ},), classes="LlamaDecoderLayer")
    with pytest.warns(UserWarning, match=r"passes onnx.checker, but its checks did not run: onnxruntime has no CPU kernel .*Where"):
        written = result.to_onnx(tmp_path / "bf16.onnx")
    assert written.not_checked is not None and "Where" in written.not_checked
    assert all(d != d for d in [written.model_diff, *written.piece_diffs.values()])  # NaN: not run, never a 0
    assert _functions(tmp_path / "bf16.onnx")  # onnx.checker's full check, one function called by the layers
    assert result.report.notes[-1].startswith("onnxruntime's checks of bf16.onnx not run: onnxruntime has no CPU kernel")
    assert "  note: onnxruntime's checks of bf16.onnx not run: onnxruntime has no CPU kernel" in str(result.report)
    # every weight is in the external-data file with the bits of the model's own tensor, as the model holds it (the
    # optimizer folded the lm_head's Transpose into a transposed copy, computed in ml_dtypes' bfloat16, before); none
    # stays in the proto
    from onnx import numpy_helper

    proto = onnx.load(str(tmp_path / "bf16.onnx"), load_external_data=False)
    big = [i for i in proto.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL or len(i.raw_data) >= 1024]
    assert big and all(i.data_location == onnx.TensorProto.EXTERNAL for i in big)
    onnx.external_data_helper.load_external_data_for_model(proto, str(tmp_path))
    weights = [t.float() for t in model.state_dict().values()]
    for init in big:
        value = torch.from_numpy(numpy_helper.to_array(init).astype("float32"))
        assert any(value.shape == w.shape and torch.equal(value, w) for w in weights), init.name
