"""Section 4: one full call on the hot path, ``serialize_args`` + ``deserialize_args``.

A replaced submodule runs this pair on every forward call: flatten the inputs for the custom operator,
then rebuild them from the flat list and the type-info strings fixed when the operator was made. The
strings are computed once, outside the timing, exactly as the operator would hold them.

Inputs: an LLM decode step (``input_ids``, ``attention_mask`` and a transformers ``DynamicCache`` of 2,
32 and 80 layers (80: a 70B-class model), a 32-layer ``StaticCache``, and a 32-layer hybrid cache laid out
as Qwen3-Next's: three linear-attention layers for one full-attention layer) and a detection input (a list of images and a list of
target dicts).

Baselines, each doing the same job on the same tensors:

* torch pytree: ``tree_flatten`` + ``tree_unflatten`` of the same structure built from plain containers
  (a cache becomes a list of ``(key, value)`` tuples, because transformers 5.x registers no pytree node
  for its caches). This is the floor: it does no checks and writes no strings.
* transformers' own pytree functions for export (``transformers.exporters.exporter_dynamo``: what
  ``register_cache_pytrees_for_model`` registers), flattening the cache object and rebuilding it, for the
  static and hybrid caches, which the original algorithm cannot carry (it knew ``DynamicCache`` only);
* the original algorithm, re-implemented below from its description (treespec-anchors.md section 0):
  per-argument dispatch by ``isinstance``/class name, ``DynamicCache__N_N`` as keys then values, string
  prefixes and ``split`` to read the type strings back, and every ``___`` name decoded with
  ``pickle.loads`` on each call (it had no cache). Baseline only: this code is what users ran before.
"""

from __future__ import annotations

import argparse
import base64
import pickle
import warnings
import zlib
from typing import Any

from _timing import Row, interleaved, section


# --------------------------------------------------------------------------------------------------
# The original algorithm (baseline; re-implemented from its description, never used by the library)


def _orig_name(spec: Any, n: int) -> str:
    return "___" + base64.b32encode(zlib.compress(pickle.dumps((n, spec)))).decode("ascii").replace("=", "_")


def _orig_from_name(name: str) -> tuple[int, Any]:
    return pickle.loads(zlib.decompress(base64.b32decode(name[3:].replace("_", "="))))


class _Original:
    """serialize_args / type_as_str_with_info / deserialize_args as the original module did them."""

    def __init__(self) -> None:
        import torch
        import transformers.cache_utils as cu
        from torch.utils import _pytree

        self.Tensor = torch.Tensor
        self.cu = cu
        self.pytree = _pytree

    def _keys_values(self, cache: Any) -> tuple[list[Any], list[Any]]:
        return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]

    def serialize_one(self, obj: Any) -> Any:
        T = self.Tensor
        if isinstance(obj, T):
            return obj
        if isinstance(obj, (tuple, list)) and all(isinstance(x, T) for x in obj):
            return obj
        if isinstance(obj, dict) and all(isinstance(x, T) for x in obj.values()):
            return [v for _, v in sorted(obj.items())]
        if obj.__class__.__name__ == "DynamicCache":
            keys, values = self._keys_values(obj)
            return [*keys, *values]
        if obj is None or isinstance(obj, (bool, int, float)):
            return obj
        return self.pytree.tree_flatten(obj)[0]

    def serialize_args(self, args: tuple) -> tuple:
        out: list[Any] = []
        for a in args:
            r = self.serialize_one(a)
            if r is None or isinstance(r, self.Tensor):
                out.append(r)
            else:
                out.extend(r)
        return tuple(out)

    def type_str(self, obj: Any) -> str:
        T = self.Tensor
        if isinstance(obj, T):
            return "Tensor"
        if isinstance(obj, list) and all(isinstance(x, T) for x in obj):
            return f"list__{len(obj)}"
        if isinstance(obj, dict) and all(isinstance(x, T) for x in obj.values()):
            return f"dict__{len(obj)}_" + "__".join(sorted(obj))
        if obj.__class__.__name__ == "DynamicCache":
            return f"DynamicCache__{len(obj.layers)}_{len(obj.layers)}"
        leaves, spec = self.pytree.tree_flatten(obj)
        return _orig_name(spec, len(leaves))

    def _cache(self, keys: Any, values: Any) -> Any:
        cu = self.cu
        layers = []
        for k, v in zip(keys, values):
            layer = cu.DynamicLayer()
            layer.keys, layer.values, layer.is_initialized = k, v, True
            layers.append(layer)
        cache = cu.DynamicCache()
        cache.layers = layers
        return cache

    def deserialize_args(self, res: Any, types: list[str]) -> list[Any]:
        out: list[Any] = []
        pos = 0
        for tt in types:
            if tt in (None, "None", "Tensor", "bool", "int", "float"):
                out.append(res[pos])
                pos += 1
            elif tt.startswith("dict__"):
                n_text, keys_text = tt[6:].split("_", 1)
                n = int(n_text)
                out.append(dict(zip(keys_text.split("__"), res[pos : pos + n])))
                pos += n
            elif tt.startswith("list__"):
                n = int(tt[6:])
                out.append(list(res[pos : pos + n]))
                pos += n
            elif tt.startswith("DynamicCache__"):
                n1, n2 = map(int, tt.split("__")[-1].split("_"))
                out.append(self._cache(res[pos : pos + n1], res[pos + n1 : pos + n1 + n2]))
                pos += n1 + n2
            elif tt.startswith("___"):
                n, spec = _orig_from_name(tt)
                out.append(self.pytree.tree_unflatten(list(res[pos : pos + n]), spec))
                pos += n
            else:
                raise NotImplementedError(tt)
        if pos != len(res):
            raise ValueError("not every item was consumed")
        return out


# --------------------------------------------------------------------------------------------------
# Inputs


def _decode_step(n_layers: int) -> tuple[tuple, tuple]:
    """(args with a DynamicCache, the same structure with the cache as a list of (key, value) tuples)."""
    import torch
    from transformers.cache_utils import DynamicCache

    past = 7
    cache = DynamicCache()
    for i in range(n_layers):
        cache.update(torch.randn(1, 2, past, 4), torch.randn(1, 2, past, 4), i)
    ids = torch.tensor([[17]])
    mask = torch.ones(1, past + 1, dtype=torch.long)
    plain = [(layer.keys, layer.values) for layer in cache.layers]
    return (ids, mask, cache), (ids, mask, plain)


def _static_step(n_layers: int) -> tuple[tuple, tuple]:
    """A decode step with a StaticCache after a 7-token prefill (as torch.compile and transformers' export use)."""
    import torch
    from transformers.cache_utils import StaticCache

    cache = StaticCache(config=_config(n_layers), max_cache_len=64)
    for i in range(n_layers):
        cache.update(torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 4), i)
    ids = torch.tensor([[17]])
    mask = torch.ones(1, 8, dtype=torch.long)
    plain = [(layer.keys, layer.values, layer.cumulative_length) for layer in cache.layers]
    return (ids, mask, cache), (ids, mask, plain)


def _hybrid_step(n_layers: int) -> tuple[tuple, tuple]:
    """A decode step with Qwen3-Next's cache layout: linear-attention layers (conv and recurrent states) and
    every fourth layer a full-attention one."""
    import torch
    from transformers.cache_utils import DynamicCache, DynamicLayer, LinearAttentionLayer

    cache = DynamicCache()
    cache.layers = [DynamicLayer() if i % 4 == 3 else LinearAttentionLayer() for i in range(n_layers)]
    for layer in cache.layers:
        if isinstance(layer, DynamicLayer):
            layer.update(torch.randn(1, 2, 7, 4), torch.randn(1, 2, 7, 4))
        else:
            layer.update_conv_state(torch.randn(1, 16, 7), conv_kernel_size=4)
            layer.update_recurrent_state(torch.randn(1, 2, 8, 8))
    cache.layer_class_to_replicate = None
    ids = torch.tensor([[17]])
    mask = torch.ones(1, 8, dtype=torch.long)
    plain = [
        (layer.keys, layer.values) if isinstance(layer, DynamicLayer) else (layer.conv_states[0], layer.recurrent_states[0])
        for layer in cache.layers
    ]
    return (ids, mask, cache), (ids, mask, plain)


def _config(n_layers: int) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model(
        "llama", num_hidden_layers=n_layers, num_attention_heads=2, num_key_value_heads=2, head_dim=4, hidden_size=8
    )


def _detection() -> tuple[tuple, tuple]:
    import torch

    images = [torch.randn(3, 8, 8), torch.randn(3, 8, 6)]
    targets = [
        {"boxes": torch.rand(3, 4), "labels": torch.tensor([1, 2, 3]), "image_id": torch.tensor(0)},
        {"boxes": torch.rand(1, 4), "labels": torch.tensor([4]), "image_id": torch.tensor(1)},
    ]
    return (images, targets), (images, targets)


def hot_path_inputs() -> dict[str, tuple[tuple, tuple]]:
    """case -> (args as the submodule receives them, the same structure in plain pytree containers)."""
    return {
        "decode step, 2-layer DynamicCache": _decode_step(2),
        "decode step, 32-layer DynamicCache": _decode_step(32),
        "decode step, 80-layer DynamicCache": _decode_step(80),
        "decode step, 32-layer StaticCache": _static_step(32),
        "decode step, 32-layer hybrid cache (24 linear-attention, 8 full)": _hybrid_step(32),
        "detection (images, targets)": _detection(),
    }


# the cases the original algorithm cannot carry: compared with transformers' export pytree functions instead
_NOT_ORIGINAL = ("StaticCache", "hybrid")


# --------------------------------------------------------------------------------------------------


def _number(args: argparse.Namespace) -> int:
    return 50 if args.quick else 200


@section("hotpath")
def hot_path(args: argparse.Namespace) -> list[Row]:
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from piece_by_piece_serialize import deserialize_args, serialize_args, type_as_str_with_info

    warnings.simplefilter("ignore", FutureWarning)  # the original's pickles reference the deprecated LeafSpec
    orig = _Original()
    rows: list[Row] = []
    for case, (inputs, plain) in hot_path_inputs().items():
        types = [type_as_str_with_info(a) for a in inputs]
        # each side must really round-trip before it is timed
        back = deserialize_args(list(serialize_args(inputs, None, None)), types)
        assert len(back) == len(inputs) and type(back[-1]) is type(inputs[-1])

        def ours() -> None:
            deserialize_args(serialize_args(inputs, None, None), types)

        def pytree() -> None:
            leaves, spec = tree_flatten(plain)
            tree_unflatten(leaves, spec)

        funcs = {"ours": ours, "pytree": pytree}
        if any(word in case for word in _NOT_ORIGINAL):
            from transformers.exporters import exporter_dynamo as ed

            cache = inputs[-1]
            assert type(ed._pytree_unflatten(*ed._pytree_flatten(cache))) is type(cache)

            def transformers_export() -> None:
                leaves, context = ed._pytree_flatten(cache)
                ed._pytree_unflatten(leaves, context)
                serialize_args(inputs[:-1], None, None)  # the other arguments, as ours handles them too

            funcs["other"] = transformers_export
            other = "transformers export pytree (exporter_dynamo)"
        else:
            orig_types = [orig.type_str(a) for a in inputs]
            orig_back = orig.deserialize_args(orig.serialize_args(inputs), orig_types)
            assert len(orig_back) == len(inputs) and type(orig_back[-1]) is type(inputs[-1])

            def original() -> None:
                orig.deserialize_args(orig.serialize_args(inputs), orig_types)

            funcs["other"] = original
            other = "original algorithm"
        t = interleaved(funcs, repeats=3 if args.quick else 21, number=_number(args))
        n_items = len(serialize_args(inputs, None, None))
        note = f"{n_items} tensors"
        rows.append(Row("hotpath", f"serialize_args + deserialize_args, {case}", t["ours"],
                        "torch pytree flatten+unflatten", t["pytree"], 1.5, note=note))
        rows.append(Row("hotpath", f"serialize_args + deserialize_args, {case}", t["ours"], other, t["other"], 1.0, note=note))
    return rows
