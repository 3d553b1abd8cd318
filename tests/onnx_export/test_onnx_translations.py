"""ONNX translations of operators torch.onnx does not know: transformers' experts operator
(``transformers::grouped_mm_fallback``) against eager under every kind of routing, the mixture-of-experts families
of transformers 5 through to_onnx and onnxruntime, and the ``translations=`` hook with the error that names it.

onnxruntime is fed the call flattened by the library's serializer, as in test_onnx.py, and compared tensor by
tensor with eager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
transformers = pytest.importorskip("transformers")

import _tiny_models as tiny  # noqa: E402
import _tiny_moe  # noqa: E402
from _onnx_compare import eager_outputs, run_onnx  # noqa: E402
from piece_by_piece_serialize import export_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.onnx_export import OnnxExportError  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)
TOKENS = torch.export.Dim("tokens", min=2, max=256)


def _max_diff(got: list[Any], want: list[Any]) -> float:
    assert len(got) == len(want)
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.numel():
            worst = max(worst, (g.double() - w.double()).abs().max().item())
    return worst


def _routing(experts: list[list[int]], seed: int) -> tuple[Any, Any, Any]:
    """Hidden states of len(experts) tokens, each routed to its two given experts with random weights."""
    g = torch.Generator().manual_seed(seed)
    index = torch.tensor(experts)
    return torch.randn(len(experts), 32, generator=g), index, torch.rand(index.shape, generator=g)


def test_the_experts_operator_equals_eager_under_every_routing(tmp_path: Path) -> None:
    experts = _tiny_moe.moe("qwen3_moe").model.layers[0].mlp.experts  # four experts, two per token
    result = export_piece_by_piece(experts, _routing([[0, 1], [2, 3], [1, 2]], 0), dynamic_shapes=({0: TOKENS}, {0: TOKENS}, {0: TOKENS}))
    assert any(n.target == torch.ops.transformers.grouped_mm_fallback.default for n in result.program.graph.nodes)
    written = result.to_onnx(tmp_path / "experts.onnx")
    assert written.model_diff <= 1e-5
    routings = {
        "every expert": [[0, 1], [2, 3], [3, 0], [1, 2], [2, 0]],
        "the first expert gets none": [[1, 2], [3, 2], [1, 3]],
        "the last expert gets none": [[0, 1], [2, 0], [1, 2], [0, 2]],
        "only the middle experts": [[1, 2], [2, 1]],
        "one expert gets every token twice": [[3, 3], [3, 3], [3, 3]],
        "many tokens": torch.randint(0, 4, (200, 2), generator=torch.Generator().manual_seed(1)).tolist(),
    }
    diffs = {name: _max_diff(run_onnx(tmp_path / "experts.onnx", _routing(r, i), {}), eager_outputs(experts, _routing(r, i), {}))
             for i, (name, r) in enumerate(routings.items())}  # fmt: skip
    assert max(diffs.values()) <= 1e-5, diffs


@torch.library.custom_op("pbp_onnx_test::shifted_square", mutates_args=())
def _shifted_square(x: torch.Tensor, shift: float) -> torch.Tensor:
    return x * x + shift


@_shifted_square.register_fake
def _(x: torch.Tensor, shift: float) -> torch.Tensor:
    return torch.empty_like(x)


class _Squares(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.pbp_onnx_test.shifted_square(self.linear(x), 0.5)


def test_an_operator_without_translation_is_named_with_the_hook_that_gives_one(tmp_path: Path) -> None:
    model = _Squares().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    with pytest.raises(OnnxExportError) as caught:
        result.to_onnx(tmp_path / "squares.onnx")
    assert str(caught.value) == (
        "to_onnx: the top program calls the operator pbp_onnx_test::shifted_square, which has no ONNX translation; "
        "give one with to_onnx(..., translations={torch.ops.pbp_onnx_test.shifted_square.default: function}), a "
        "function of the operator's arguments built from onnxscript ops (docs/onnx.md, 'Operators without a translation')"
    )
    assert not (tmp_path / "squares.onnx").exists()

    def shifted_square(x: Any, shift: float) -> Any:
        from onnxscript import opset18 as op

        return op.Add(op.Mul(x, x), op.CastLike(op.Constant(value_float=shift), x))

    written = result.to_onnx(tmp_path / "squares.onnx", translations={torch.ops.pbp_onnx_test.shifted_square: shifted_square})
    assert written.model_diff <= 1e-6
    x = torch.randn(7, 4)
    assert _max_diff(run_onnx(tmp_path / "squares.onnx", (x,), {}), eager_outputs(model, (x,), {})) <= 1e-6
    with pytest.raises(OnnxExportError, match=r"a key of translations= must be a torch operator"):
        result.to_onnx(tmp_path / "other.onnx", translations={"pbp_onnx_test::shifted_square": shifted_square})


def test_onnxruntime_outside_the_exports_tolerances_is_refused_by_name(tmp_path: Path) -> None:
    """Note [onnxruntime's verdict]: a translation that computes otherwise than eager (off by 1e-3, ten times the
    float32 tolerance) was returned with only its difference as a number; to_onnx now raises, naming the output,
    and strict=False returns the file with what differs listed."""

    def off(x: Any, shift: float) -> Any:
        from onnxscript import opset18 as op

        return op.Add(op.Mul(x, x), op.CastLike(op.Constant(value_float=shift + 1e-3), x))

    model = _Squares().eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    translations = {torch.ops.pbp_onnx_test.shifted_square: off}
    with pytest.raises(OnnxExportError) as caught:
        result.to_onnx(tmp_path / "off.onnx", translations=translations)
    message = str(caught.value)
    assert message.startswith("to_onnx: onnxruntime computes 1 output(s) outside the export's tolerances against eager: output (max |diff| 0.001")
    assert message.endswith("off.onnx is written, to look into; to_onnx(..., strict=False) returns it") and (tmp_path / "off.onnx").exists()
    written = result.to_onnx(tmp_path / "off.onnx", translations=translations, strict=False)
    assert len(written.differs) == 1 and written.differs[0].startswith("output (max |diff| 0.001") and 9e-4 < written.model_diff < 1.1e-3
    assert "note: onnxruntime's results of off.onnx outside the tolerances against eager: output (max |diff| 0.001" in str(result.report)
    # within a tolerance the user gave the export, it passes
    loose = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), atol=1e-2)
    assert loose.to_onnx(tmp_path / "loose.onnx", translations=translations).differs == ()


def _decoder_layers(model: Any) -> tuple[type, ...]:
    return tuple(dict.fromkeys(type(layer) for layer in model.model.layers))


# Each family of transformers 5 whose experts call transformers::grouped_mm_fallback, one way each to keep the
# suite short (bench/families.py runs every family both ways, at prefill and with the cache): with its
# decoder layers behind operators (one ONNX function per distinct layer) or exported automatically (the model
# exports whole, the operator in the top program); a prefill, or a step with the cache in and out (one new token
# for MiniMax and Granite-MoE-hybrid, whose layers' programs hold one length of new tokens: MiniMax's lightning
# attention guards on its block size, Granite's Mamba mixer pads to its chunk of 4).
_CASES = [
    ("qwen3_moe", "classes", "step"),
    ("mixtral", "automatic", "step"),
    ("deepseek_v3", "classes", "prefill"),
    ("qwen2_moe", "automatic", "prefill"),
    ("phimoe", "classes", "step"),
    ("gpt_oss", "automatic", "step"),
    ("glm4_moe", "automatic", "prefill"),
    ("granitemoehybrid", "classes", "token"),  # its Mamba mixer pads to its chunk of 4: one program per length
    ("minimax", "classes", "token"),  # one new token: its lightning attention's cache takes no more (eager neither)
]


@pytest.mark.parametrize(("family", "mode", "shape"), _CASES, ids=["-".join(c) for c in _CASES])
def test_mixture_of_experts_families_in_onnxruntime(family: str, mode: str, shape: str, tmp_path: Path) -> None:
    model = _tiny_moe.moe(family)
    classes = _decoder_layers(model) if mode == "classes" else None
    if shape == "prefill":
        x = tiny.ids(6, 2)
        shapes = {"input_ids": {0: BATCH, 1: SEQ}, "attention_mask": {0: BATCH, 1: SEQ}}
        result = export_piece_by_piece(model, (x,), {"attention_mask": torch.ones_like(x), "use_cache": False}, dynamic_shapes=shapes, classes=classes)
        cases = [((tiny.ids(n, b, 5),), {"attention_mask": torch.ones(b, n, dtype=torch.long), "use_cache": False}) for b, n in ((1, 3), (3, 17))]
    else:
        new = (3, 2, 3) if shape == "step" else (1, 1, 1)  # tokens of the two examples, then of the second case
        if family == "minimax":
            tiny.register_minimax_cache()
        other = torch.export.AdditionalInputs()
        other.add((tiny.ids(new[1], 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
        result = export_piece_by_piece(model, (tiny.ids(new[0], 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other, classes=classes)
        cases = [((tiny.ids(n, b, 9),), {"cache": tiny.prefill(model, past, batch=b)[1]}) for b, past, n in ((1, 5, 1), (4, 11, new[2]))]
    written = result.to_onnx(tmp_path / "model.onnx")
    if classes is not None:
        assert sum(map(len, written.functions.values())) == len(model.model.layers)
    diffs = [_max_diff(run_onnx(tmp_path / "model.onnx", args, kwargs), eager_outputs(model, args, kwargs)) for args, kwargs in cases]
    assert written.model_diff <= 1e-4 and max(diffs) <= 1e-4, (written.model_diff, diffs)


def _branchy(tensors: Any, weights: Any, call: str) -> list[Any]:
    """The translation of tests/_toy_models.py's Branchy: its linear, then doubled or less one by the sign of the sum."""
    from onnxscript import opset18 as op

    (x,), (weight, bias) = tensors, weights
    h = op.Add(op.MatMul(x, op.Transpose(weight, perm=[1, 0])), bias)
    positive = op.Greater(op.ReduceSum(h, keepdims=0), op.CastLike(op.Constant(value_float=0.0), h))
    two, one = op.CastLike(op.Constant(value_float=2.0), h), op.CastLike(op.Constant(value_float=1.0), h)
    return [op.Where(positive, op.Mul(h, two), op.Sub(h, one))]


def test_a_piece_without_a_program_is_written_by_the_translation_given_for_its_operator(tmp_path: Path) -> None:
    import _toy_models as toy

    model = toy.deep()  # top.mid.leaf branches on its data: it has no program, alone or in the model
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    piece = result.pieces["top.mid.leaf"]
    assert piece.program is None and piece.own_export_failure is not None  # exported alone too: its branch fails there
    namespace, _, name = piece.operator.partition("::")
    operator = getattr(getattr(torch.ops, namespace), name).default
    with pytest.raises(OnnxExportError, match=rf"give each its ONNX translation with to_onnx\(\.\.\., translations=\{{torch\.ops\.{namespace}\.{name}\.default: function\}}\)"):
        result.to_onnx(tmp_path / "deep.onnx")

    written = result.to_onnx(tmp_path / "deep.onnx", translations={operator: _branchy})
    assert written.model_diff <= 1e-6 and written.functions == {}
    signs = set()
    for seed in range(6):  # both branches
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(seed)) + (4.0 if seed % 2 else -4.0)
        with torch.no_grad():
            signs.add(bool(model.top.mid.leaf.lin(model.top.mid.before(x)).sum() > 0))
        # 1e-4 as elsewhere: the inputs shifted by 4 give outputs in the tens, whose float32 sums onnxruntime may
        # order otherwise on more threads (1.4e-5 seen beside another run)
        assert _max_diff(run_onnx(tmp_path / "deep.onnx", (x,), {}), eager_outputs(model, (x,), {})) <= 1e-4
    assert signs == {True, False}


def test_a_translation_keyed_by_a_class_serves_its_pieces_and_a_class_no_piece_has_is_refused_by_name(tmp_path: Path) -> None:
    import _toy_models as toy

    model = toy.deep()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.report.behind_operators == ["top.mid.leaf"]
    # the class, where the operator's name (pbp_<random>::top__mid__leaf) had to be looked up in the report
    written = result.to_onnx(tmp_path / "deep.onnx", translations={toy.Branchy: _branchy})
    assert written.model_diff <= 1e-6 and written.functions == {}
    for shift in (4.0, -4.0):  # both branches
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1)) + shift
        assert _max_diff(run_onnx(tmp_path / "deep.onnx", (x,), {}), eager_outputs(model, (x,), {})) <= 1e-4
    # classes= its parent puts the class inside a piece written whole: said, with the classes= that would serve
    whole = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=toy.Mid)
    with pytest.raises(OnnxExportError, match=r"translations= names the class Branchy, and no piece is of that class: its modules are inside top\.mid \(Mid\), behind an operator whole: export with classes= Branchy in place of the class of that piece"):
        whole.to_onnx(tmp_path / "whole.onnx", translations={toy.Branchy: _branchy})
    with pytest.raises(OnnxExportError, match=r"names the class GRU, and no piece is of that class: the model has no module of that class behind an operator"):
        result.to_onnx(tmp_path / "gru.onnx", translations={torch.nn.GRU: _branchy})
    whole.close()


class _Padded(torch.nn.Module):
    """Pads its sequence to a multiple of 4: a branch on a size, which an own program keeps as a guard."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] % 4:
            x = torch.nn.functional.pad(x, (0, 0, 0, 4 - x.shape[1] % 4))
        return x.reshape(x.shape[0], -1, 4, x.shape[2]).sum(2)


class _WithPadded(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.padded = _Padded()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.padded(x).mean(1)


def test_a_piece_whose_own_program_refuses_its_other_calls_has_none_and_is_refused_by_name(tmp_path: Path) -> None:
    # its program, exported at 6 positions (not a multiple of 4), guards on that; the second example (8) breaks it.
    # That failure is the piece's, in the report, not the export's (it raised out of export_piece_by_piece)
    model = _WithPadded()
    result = export_piece_by_piece(model, (torch.randn(2, 6, 3),), dynamic_shapes=({0: BATCH, 1: SEQ},), classes=_Padded)
    piece = result.pieces["padded"]
    assert piece.program is None and piece.own_export_failure is not None and "Guard failed" in piece.own_export_failure.message
    for n in (5, 8):
        x = torch.randn(3, n, 3)
        torch.testing.assert_close(result.module()(x), model(x), rtol=0, atol=0)
    # it has programs by size (Note [programs by size]), but its output's length is the number of chunks of 4, which
    # its recorded calls (2 chunks at 6 and 8 positions) do not tie to its input's: the main graph has no size to
    # give it elsewhere, and the piece is named
    assert piece.by_size is not None and piece.by_size.startswith("3 programs by size")
    with pytest.raises(OnnxExportError, match=r"the main graph cannot be written: the operator of padded cannot give its output's sizes"):
        result.to_onnx(tmp_path / "padded.onnx")


def _longcat_experts(tensors: Any, weights: Any, call: str) -> list[Any]:
    """LongCat-Flash's experts in ONNX: every token through every routed expert (one batched MatMul, as for
    transformers' grouped experts), the zero experts the identity, each token's outputs weighted by its routing
    (one-hot of its chosen experts) and summed; eager loops over the experts chosen instead."""
    from onnxscript import opset18 as op

    (x, index, routing), (gate_up, down) = tensors, weights  # x (tokens, hidden); gate_up has rows for the zero experts too
    routed, every = op.Shape(down, start=0, end=1), op.Shape(gate_up, start=0, end=1)
    zero, one, two = op.Constant(value_ints=[0]), op.Constant(value_ints=[1]), op.Constant(value_ints=[2])
    h = op.MatMul(x, op.Transpose(op.Slice(gate_up, zero, routed, zero), perm=[0, 2, 1]))  # (routed, tokens, 2 ffn)
    gate, up = op.Split(h, axis=2, num_outputs=2)
    y = op.MatMul(op.Mul(op.Mul(gate, op.Sigmoid(gate)), up), op.Transpose(down, perm=[0, 2, 1]))  # SiLU, then down
    identity = op.Expand(op.Unsqueeze(x, zero), op.Concat(op.Sub(every, routed), op.Shape(x), axis=0))
    chosen = op.OneHot(index, every, op.CastLike(op.Constant(value_floats=[0.0, 1.0]), routing))  # (tokens, k, every)
    share = op.ReduceSum(op.Mul(chosen, op.Unsqueeze(routing, two)), one, keepdims=0)  # (tokens, every)
    weighted = op.Mul(op.Unsqueeze(op.Transpose(share, perm=[1, 0]), two), op.Concat(y, identity, axis=0))
    return [op.ReduceSum(weighted, zero, keepdims=0)]


def test_longcat_flash_experts_loop_on_their_data_are_refused_by_name_and_convert_with_their_translation(tmp_path: Path) -> None:
    # LongCat-Flash's experts loop in Python over the experts chosen (no grouped_mm experts implementation): the
    # automatic search cuts them, their export alone fails the same way, and to_onnx names their operator; with
    # their translation the decode step (its cache in and out) converts, equal in onnxruntime at unseen shapes
    from piece_by_piece_serialize import load_piece_by_piece

    model = _tiny_moe.longcat_flash()
    other = torch.export.AdditionalInputs()
    other.add((tiny.ids(2, 3),), {"cache": tiny.prefill(model, 8, batch=3)[1]})
    result = export_piece_by_piece(model, (tiny.ids(3, 2),), {"cache": tiny.prefill(model, 6, batch=2)[1]}, dynamic_shapes=other)
    path = "model.layers.0.mlp.experts"
    piece = result.pieces[path]
    assert result.report.behind_operators == [path] and piece.failure is not None and piece.failure.kind == "data-dependent guard"
    assert piece.program is None and piece.own_export_failure is not None and piece.checked_calls == 2 and piece.passed is True
    namespace, _, name = piece.operator.partition("::")
    operator = getattr(getattr(torch.ops, namespace), name).default
    with pytest.raises(OnnxExportError, match=rf"cannot be ONNX functions: {path} \(data-dependent guard"):
        result.to_onnx(tmp_path / "longcat.onnx")
    written = result.to_onnx(tmp_path / "longcat.onnx", translations={operator: _longcat_experts})
    cases = [((tiny.ids(n, b, 9),), {"cache": tiny.prefill(model, past, batch=b)[1]}) for b, past, n in ((1, 5, 1), (4, 11, 3))]
    chosen: list[Any] = []  # the experts eager chooses in these cases: routed and zero ones, and some left without a token
    hook = model.get_submodule(path).register_forward_pre_hook(lambda module, args: chosen.append(args[1].flatten()))
    diffs = [_max_diff(run_onnx(tmp_path / "longcat.onnx", args, kwargs), eager_outputs(model, args, kwargs)) for args, kwargs in cases]
    hook.remove()
    assert {int(e) for e in torch.cat(chosen[:1])} < set(range(6)) and {int(e) for e in torch.cat(chosen)} & {4, 5}
    assert written.model_diff <= 1e-4 and max(diffs) <= 1e-4, (written.model_diff, diffs)
    result.save(tmp_path / "longcat.pt2")  # its router turns grad off: the archive loads (Note [exported without grad])
    loaded = load_piece_by_piece(tmp_path / "longcat.pt2", implementations={path: model.get_submodule(path)})
    x = tiny.ids(3, 4, 9)
    with torch.no_grad():
        got = loaded(x, cache=tiny.prefill(model, 11, batch=4)[1]).logits
        torch.testing.assert_close(got, model(x, cache=tiny.prefill(model, 11, batch=4)[1]).logits, rtol=0, atol=0)
