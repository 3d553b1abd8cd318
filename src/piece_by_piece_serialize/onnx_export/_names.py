"""Readable names for the tensors of a flat call: ``input_ids``, ``past.layers.0.keys``.

The exported program's inputs are the flat tensors of the model's arguments (Note [flat order] in
:mod:`..serialize`), named ``tensors_0``, ``tensors_1``, ... by torch. Here each argument is flattened the way the
call was, and each of its tensors named by where it sits: the argument's name, then the path inside it (a list
index, a dict key, an attribute). Outputs are named the same way under ``output``.

Note [cache names]
~~~~~~~~~~~~~~~~~~
Caches are named as onnxruntime-genai and the Hugging Face ONNX exports name them, the same way in and out: the
cache the model is given is ``past``, the cache it gives back ``present``, each by layer, ``past.layers.<i>.keys``
in and ``present.layers.<i>.keys`` out, whatever the argument or the output field is called (``cache``,
``past_key_values``). A count tensor that carries a layer's count is named after the attribute holding that count
(``cumulative_length``). A model given several caches names them ``past.<argument>``, and ``present.<field>`` for
several in its output. The cache argument after the call (the library returns every argument the model writes
in place) is ``present`` too when the output holds no cache (a ``StaticCache`` written in place), else
``past.updated``: its tensors are then the output cache's. A tensor found nowhere is named by its place
(``<argument>.item<k>``); names are made unique, and of ``[A-Za-z0-9_.]`` only.

Imports: :mod:`..custom_op` (how a call is flattened), :mod:`..serialize` (caches); torch on use.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..custom_op._calls import kind_and_flat
from ..serialize import _caches


def _clean(part: Any) -> str:
    text = str(part)
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in text) or "_"


def _paths(value: Any, prefix: str, out: dict[int, str], caches: list[str] | None = None) -> None:
    """Every tensor inside ``value``, by identity, with its dotted path (the first path wins); a cache met on
    the way is named by the next name of ``caches`` (Note [cache names]) when given."""
    import torch

    if isinstance(value, torch.Tensor):
        out.setdefault(id(value), prefix)
    elif caches and _caches.is_cache(value):
        for name, item in zip(_cache_names(value, caches.pop(0)), _caches.flatten(value), strict=True):
            out.setdefault(id(item), name)
    elif isinstance(value, dict):
        for k, v in value.items():
            _paths(v, f"{prefix}.{_clean(k)}", out, caches)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _paths(v, f"{prefix}.{i}", out, caches)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for k, v in vars(value).items():
            _paths(v, f"{prefix}.{_clean(k)}", out, caches)


def _layer_names(layer: Any, items: Sequence[Any], prefix: str) -> list[str]:
    import torch

    found: dict[int, str] = {}
    _paths(vars(layer), prefix, found)
    counts = {v: k for k, v in vars(layer).items() if type(v) is int}  # a count tensor carries one of these
    names = []
    for k, item in enumerate(items):
        name = found.get(id(item))
        if name is None and isinstance(item, torch.Tensor) and item.dim() == 2 and item.shape[1] == 0:
            name = f"{prefix}.{counts[item.shape[0]]}" if item.shape[0] in counts else None
        names.append(name or f"{prefix}.item{k}")
    return names


def _cache_names(cache: Any, prefix: str) -> list[str]:
    """The names of a cache's flat items, layer by layer (Note [flat order] in :mod:`..serialize`)."""
    info = _caches.describe(cache)
    if hasattr(cache, "self_attention_cache"):
        return _cache_names(cache.self_attention_cache, f"{prefix}.self_attention") + _cache_names(
            cache.cross_attention_cache, f"{prefix}.cross_attention"
        )
    items = list(_caches.flatten(cache, info))
    names: list[str] = []
    layers = [run.layer for run in info.runs for _ in range(run.count)]  # type: ignore[union-attr]  # a CacheInfo here
    for i, (layer, layer_info) in enumerate(zip(cache.layers, layers, strict=False)):
        names += _layer_names(layer, items[len(names) : len(names) + layer_info.n_items], f"{prefix}.layers.{i}")
    return names + [f"{prefix}.item{k}" for k in range(len(names), len(items))]


def _value_names(value: Any, name: str, caches: list[str] | None = None) -> list[str]:
    """The names of the tensors among ``value``'s flat items, in order; the caches inside it named by
    ``caches`` (Note [cache names]) when given."""
    import torch

    if _caches.is_cache(value):
        items = list(_caches.flatten(value))
        names = _cache_names(value, name)
        return [n for n, item in zip(names, items, strict=True) if isinstance(item, torch.Tensor)]
    _, flat = kind_and_flat(value, name)
    found: dict[int, str] = {}
    _paths(value, name, found, caches)
    return [found.get(id(t), f"{name}.item{k}") for k, t in enumerate(flat) if isinstance(t, torch.Tensor)]


def _fields_holding_caches(value: Any) -> list[str]:
    """The names of the fields of a model output (a dict or a dataclass) that hold a cache, in order."""
    items = value.items() if isinstance(value, dict) else vars(value).items() if hasattr(value, "__dict__") else ()
    return [_clean(k) for k, v in items if _caches.is_cache(v)]


def _unique(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for i, name in enumerate(names):
        while name in seen:
            name = f"{name}_{i}"
        seen.add(name)
        out.append(name)
    return out


def input_names(forward: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[str]:
    """The names of the flat tensors of the call ``forward(*args, **kwargs)``, in the call's order."""
    parameters = list(inspect.signature(forward).parameters.values())
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    labelled = [(_clean(positional[i]) if i < len(positional) else f"arg{i}", v) for i, v in enumerate(args)]
    labelled += [(_clean(k), v) for k, v in kwargs.items()]
    several = sum(_caches.is_cache(v) for _, v in labelled) > 1
    names: list[str] = []
    for label, value in labelled:
        is_cache = _caches.is_cache(value)
        names += _value_names(value, (f"past.{label}" if several else "past") if is_cache else label)
    return _unique(names)


def output_names(output: Any, caches: Sequence[tuple[str, Any]]) -> list[str]:
    """The names of a call's flat outputs: the output's tensors under ``output``, a cache in it ``present``, then
    each cache argument's tensors after the call (Note [cache names])."""
    held = _fields_holding_caches(output)
    names = _value_names(output, "output", ["present"] if len(held) == 1 else [f"present.{f}" for f in held])
    updated = "past.updated" if held else "present"
    for name, cache in caches:
        names += _value_names(cache, f"{updated}.{_clean(name)}" if len(caches) > 1 else updated)
    return _unique(names)
