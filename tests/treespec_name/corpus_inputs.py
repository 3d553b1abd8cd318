"""A corpus of realistic pytrees for TreeSpec names: the round-trip tests and ``bench/treespec_compare.py`` use it.

``build_corpus()`` returns ``{case id: pytree}``. The cases cover what reaches a custom operator in practice:
LLM inputs, encoder-decoder inputs, caches as torch sees them (a transformers 5.x ``DynamicCache`` is a leaf;
legacy tuple caches are nested tuples; a user-registered cache node goes through the generic registered-node
path), detection targets as lists of dicts, namedtuples (module-level, ``typing.NamedTuple``, registered with a
serialized name), ``torch.return_types``, ``torch.Size``, fx immutable collections, ``ModelOutput`` subclasses,
odd dict keys, empty containers, 200 leaves in one list and deep nesting. Types the cases need are defined here
at module level (so a name can refer to them) and registered with torch's pytree on import; the transformers
output classes are imported here too, since a name never imports the module of a type it mentions.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree
from torch.fx.immutable_collections import immutable_dict, immutable_list
from transformers import DynamicCache
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutputWithPast, Seq2SeqLMOutput

__all__ = ["Color", "Point", "Pair", "RegisteredPoint", "LayerCache", "Box", "Config", "build_corpus", "nest"]

Point = namedtuple("Point", ["x", "y"])
RegisteredPoint = namedtuple("RegisteredPoint", ["a", "b", "c"])
pytree._register_namedtuple(RegisteredPoint, serialized_type_name="corpus.RegisteredPoint")


class Pair(NamedTuple):
    first: Any
    second: Any


class Color(enum.Enum):
    RED = 1
    GREEN = "green"


class Shape(enum.IntEnum):
    SQUARE = 4


class LayerCache:
    """A user cache registered as a pytree node with JSON dumpable-context hooks (the generic custom path)."""

    def __init__(self, keys: list[Any], values: list[Any], windows: list[int | None]) -> None:
        self.keys, self.values, self.windows = keys, values, windows

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LayerCache) and self.windows == other.windows
                and _same_tensors(self.keys, other.keys) and _same_tensors(self.values, other.values))


def _same_tensors(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y or (torch.is_tensor(x) and torch.equal(x, y)) or x == y
                                    for x, y in zip(a, b))


def _layer_cache_flatten(c: LayerCache) -> tuple[list[Any], Any]:
    leaves = [t for kv in zip(c.keys, c.values) for t in kv]
    return leaves, {"windows": list(c.windows), "layout": "interleaved"}


def _layer_cache_unflatten(values: Any, context: Any) -> LayerCache:
    values = list(values)
    return LayerCache(values[0::2], values[1::2], list(context["windows"]))


pytree.register_pytree_node(
    LayerCache,
    _layer_cache_flatten,
    _layer_cache_unflatten,
    serialized_type_name="corpus.LayerCache",
    to_dumpable_context=json.dumps,
    from_dumpable_context=json.loads,
)


class Box:
    """A user node registered with a plain-value context and no hooks."""

    def __init__(self, items: list[Any], tag: tuple[str, int]) -> None:
        self.items, self.tag = items, tag

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and self.tag == other.tag and _same_tensors(self.items, other.items)


pytree.register_pytree_node(
    Box,
    lambda b: (list(b.items), b.tag),
    lambda values, tag: Box(list(values), tag),
    serialized_type_name="corpus.Box",
)


@dataclasses.dataclass
class Config:
    weight: Any
    bias: Any
    name: str = "lin"


pytree.register_dataclass(Config, field_names=["weight", "bias"], drop_field_names=["name"],
                          serialized_type_name="corpus.Config")


def nest(depth: int, leaf: Any = 0) -> Any:
    """``depth`` lists around one leaf, alternating list, tuple and dict levels."""
    x = leaf
    for i in range(depth):
        x = [x] if i % 3 == 0 else (x,) if i % 3 == 1 else {"k": x}
    return x


def build_corpus() -> dict[str, Any]:
    """``{case id: pytree}`` over the node and key kinds of torch's pytree; deterministic."""
    g = torch.Generator().manual_seed(0)

    def t(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=g)

    ids = torch.arange(12).reshape(2, 6)
    mask = torch.ones(2, 6, dtype=torch.int64)
    legacy_cache = tuple((t(2, 4, 3, 8), t(2, 4, 3, 8)) for _ in range(4))
    cases: dict[str, Any] = {
        "tensor": t(2, 3),
        "none": None,
        "tuple_2": (t(2), t(2)),
        "list_3": [t(1), t(1), t(1)],
        "llm_inputs": {"input_ids": ids, "attention_mask": mask},
        "llm_inputs_positions": {"input_ids": ids, "attention_mask": mask, "position_ids": ids.clone()},
        "llm_inputs_dynamic_cache_leaf": {"input_ids": ids, "attention_mask": mask,
                                          "past_key_values": DynamicCache()},
        "llm_inputs_legacy_cache": {"input_ids": ids, "attention_mask": mask, "past_key_values": legacy_cache},
        "llm_registered_cache": {"input_ids": ids, "attention_mask": mask, "cache_position": torch.arange(6),
                                 "past_key_values": LayerCache([t(1, 2, 3, 4)] * 3, [t(1, 2, 3, 4)] * 3,
                                                               [None, 4096, None])},
        "llm_args_kwargs": ((ids,), {"attention_mask": mask, "use_cache": True}),
        "encoder_decoder_inputs": {
            "input_ids": ids,
            "attention_mask": mask,
            "decoder_input_ids": ids[:, :2],
            "decoder_attention_mask": mask[:, :2],
            "encoder_outputs": BaseModelOutput(last_hidden_state=t(2, 6, 8)),
        },
        "causal_lm_output": CausalLMOutputWithPast(logits=t(2, 6, 10)),
        "causal_lm_output_loss": CausalLMOutputWithPast(loss=t(), logits=t(2, 6, 10)),
        "seq2seq_output": Seq2SeqLMOutput(logits=t(2, 2, 10), encoder_last_hidden_state=t(2, 6, 8)),
        "detection_targets": [
            {"boxes": t(3, 4), "labels": torch.tensor([1, 2, 3]), "masks": t(3, 8, 8)} for _ in range(3)
        ],
        "detection_images_and_targets": ([t(3, 8, 8), t(3, 8, 8)],
                                         [{"boxes": t(1, 4), "labels": torch.tensor([1])},
                                          {"boxes": t(2, 4), "labels": torch.tensor([1, 2])}]),
        "namedtuple": Point(t(1), t(1)),
        "typing_namedtuple": Pair(t(1), [t(1), t(1)]),
        "registered_namedtuple": RegisteredPoint(t(1), None, t(1)),
        "namedtuple_in_dict": {"p": Point(1, 2), "q": Pair((3, 4), {"r": 5})},
        "return_types_max": torch.max(t(3, 4), 0),
        "return_types_sort": torch.sort(t(5)),
        "return_types_svd": torch.linalg.svd(t(3, 3)),
        "torch_size": torch.Size([2, 3, 4]),
        "fx_immutable": (immutable_list([t(1), t(1)]), immutable_dict({"a": t(1), "b": [t(1)]})),
        "registered_plain_context": Box([t(1), t(2)], ("box", 7)),
        "registered_dataclass": Config(t(2), t(1)),
        "int_keys": {0: t(1), 1: t(1), -3: t(1), 2**100: t(1), -(2**70): t(1)},
        "mixed_scalar_keys": {None: t(1), True: t(1), 2.5: t(1), -0.125: t(1), 1e300: t(1), "s": t(1)},
        "tuple_keys": {("a", 1): t(1), (("nested", None), 2.0): t(1), (): t(1)},
        "enum_keys": {Color.RED: t(1), Color.GREEN: t(1), Shape.SQUARE: t(1)},
        "odd_str_keys": {"": t(1), "__x__": t(1), "a__b": t(1), "_lead": t(1), "trail_": t(1), "with space": t(1),
                         "attn_Q": t(1), "Q": t(1), "a.b": t(1), "ünï©ødé": t(1), "\U0001f600": t(1),
                         "ZZ": t(1), "x-y": t(1), "layer_0": t(1), "camelCase": t(1)},
        "ordered_dict": OrderedDict([("z", t(1)), ("a", t(1))]),
        "defaultdict_list": defaultdict(list, {"a": t(1), "b": [t(1)]}),
        "defaultdict_int_keys": defaultdict(int, {1: t(1), 2: t(1)}),
        "deque_maxlen": deque([t(1), t(1)], maxlen=4),
        "deque_unbounded": deque([t(1), (t(1), t(1))]),
        "empty_containers": ((), [], {}, OrderedDict(), deque(), Point([], {})),
        "nested_empty": [[[]], ((),), {"a": {}}],
        "leaves_200": [t(1) for _ in range(200)],
        "leaves_runs_mixed": [t(1), t(1), [t(1)], t(1), t(1), t(1), (), t(1)],
        "scalars_as_leaves": (1, 2.5, "text", True, None, t(1)),
        "deep_60": nest(60, t(1)),
        "wide_dict_50": {f"feature_{i}": t(1) for i in range(50)},
        "vision_text_inputs": {"pixel_values": t(1, 3, 8, 8), "input_ids": ids, "attention_mask": mask,
                               "image_sizes": [torch.Size([8, 8])]},
        "labels_list": {"pixel_values": t(2, 3, 8, 8), "labels": [t(4), t(4)]},
        "nested_outputs": ((t(1), t(1)), (t(1), (t(1), t(1)))),
        "kwargs_with_flags": {"input_ids": ids, "output_attentions": False, "return_dict": True,
                              "past_key_values": None},
    }
    return cases
