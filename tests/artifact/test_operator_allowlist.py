"""The operator allowlist (Note [operator allowlist]) against every operator the export path emits for the tested
model families (tests/corpus/artifact/emitted_operators.txt, written by bench/emitted_operators.py from real
exports), and against the operators it refuses by name."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from piece_by_piece_serialize.artifact import _rules  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "artifact" / "emitted_operators.txt"


def _emitted() -> list[str]:
    return [line.split()[0] for line in CORPUS.read_text().splitlines() if line and not line.startswith("#")]


def test_every_operator_the_tested_families_emit_is_allowed() -> None:
    import transformers.integrations.moe  # noqa: F401  # registers transformers::grouped_mm_fallback, as the MoE models' code does

    emitted = _emitted()
    assert len(emitted) >= 90  # the corpus is not empty: 9 families, whole and behind operators
    refused = [t for t in emitted if not _rules.allowed_target(t, None)]
    assert refused == []


def test_what_reaches_outside_its_tensors_is_refused() -> None:
    refused = ["from_file.default", "_reshape_alias.default", "_reshape_alias_copy.default", "as_strided.default", "as_strided_.default",
               "as_strided_scatter.default", "set_.source_Tensor", "set_.source_Storage", "resize_.default", "resize_as_.default",
               "add.out", "copy_.default"]  # fmt: skip
    allowed = {t: _rules.allowed_target(f"torch.ops.aten.{t}", None) for t in refused}
    assert allowed == {t: t == "copy_.default" for t in refused}  # copy_ writes only its declared (a!) argument
    assert not _rules.allowed_target("torch.ops.quantized_decomposed.quantize_per_tensor.default", None)  # another library's
    assert not _rules.allowed_target("torch.ops.aten.add.Tensor.extra", None)
    assert not _rules.allowed_target("builtins.exec", None)


def test_the_rule_over_all_of_aten() -> None:
    # the rule, not a list: of every ATen overload registered, those it admits are all functional or write only
    # into declared (a!) arguments, and none is refused by name or tag
    admitted = refused = 0
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::") :].partition(".")
        packet = getattr(torch.ops.aten, base, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is None:
            continue
        if _rules.allowed_operator(op):
            admitted += 1
            schema = op._schema
            assert not schema.is_mutable or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments), name
            assert torch.Tag.inplace_view not in op.tags and torch.Tag.out not in op.tags, name
        else:
            refused += 1
    assert admitted > 1000 and refused > 500, (admitted, refused)
