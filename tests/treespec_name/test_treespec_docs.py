"""The documentation page ``docs/treespec_names.md`` shows real output: every name in it is canonical and decodes,
the example table rows are what the encoder produces, and the pretty example is ``pretty_name``'s output."""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from pathlib import Path

import corpus_inputs
import torch
import torch.utils._pytree as pytree
from test_treespec_roundtrip import decode_cold
from transformers.modeling_outputs import CausalLMOutputWithPast

from piece_by_piece_serialize.treespec_name import pretty_name, tree_spec_as_name

DOC = (Path(__file__).resolve().parents[2] / "docs" / "treespec_names.md").read_text(encoding="utf-8")
T = 0  # any leaf


def _name(tree: object) -> str:
    leaves, spec = pytree.tree_flatten(tree)
    return tree_spec_as_name(spec, len(leaves))


def _names_in_doc() -> list[str]:
    pieces = DOC.split("`")[1::2]  # text between backticks
    return [p for p in pieces if p.startswith("___v1_") and p != "___v1_"]


def test_every_name_in_the_doc_is_canonical() -> None:
    names = _names_in_doc()
    assert len(names) >= 18
    for name in names:
        n, spec = decode_cold(name)
        assert tree_spec_as_name(spec, n) == name


def test_example_rows_are_real_output() -> None:
    examples = [
        T,
        (T, T),
        [T] * 200,
        {"a": T},
        {"input_ids": T, "attention_mask": T},
        ((T,), {"attention_mask": T, "use_cache": True}),
        [T, T, [T], T, T, T, (), T],
        {1: T, -3: T, None: T, False: T, 2.5: T, 2**70: T},
        {("a", 1): T},
        {"__x__": T, "": T, "a.b": T, "attn_Q": T, "é": T},
        OrderedDict(z=T, a=T),
        defaultdict(list, {"a": T}),
        deque([T, T], maxlen=4),
        corpus_inputs.Point(T, T),
        torch.max(torch.ones(2, 2), 0),
        torch.Size([2, 3, 4]),
        CausalLMOutputWithPast(logits=torch.ones(1)),
        ((), [], {}),
    ]
    for tree in examples:
        assert f"| `{_name(tree)}` |" in DOC, _name(tree)


def test_pretty_example_is_real_output() -> None:
    block = DOC.split(">>> print(pretty_name(\"")[1].split("```")[0]
    name, expected = block.split("\"))\n", 1)
    assert pretty_name(name) == expected.rstrip("\n")
