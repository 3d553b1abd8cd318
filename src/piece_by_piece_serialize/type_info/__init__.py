"""The type-info language: how to rebuild one argument from a custom operator's flat list of tensors.

``type_as_str_with_info`` writes one short string per argument (``Tensor``, ``list__3``,
``dict__2_a__b``, ``DynamicCache_2D_W512``, a ``___`` TreeSpec name, ...) and ``deserialize_args``
reads it back. ``grammars/type_info.lark`` is the only definition of the language; :mod:`._ast` holds
the typed AST that deserialization dispatches on and its canonical printer (``str``), re-exported here;
this module holds the public entry points: parsing (cached) and the pretty view. Invariants:

* canonical = fixed point: ``parse_type_info(str(t)) == t`` for every AST ``t`` and
  ``str(parse_type_info(s))`` is stable; legacy spellings (``DynamicCache__4``) parse to the same AST as
  their canonical spelling (``DynamicCache_2D``);
* malformed input raises :class:`~piece_by_piece_serialize.errors.TreeSpecNameError` (the type-info
  strings belong to the TreeSpec-name language family), never a lark exception.

Imports: :mod:`._ast`, :mod:`._cache_kinds` and the error class at import time; the parser
(:mod:`._transform`) on first parse, and :mod:`..treespec_name` when a ``___`` TreeSpec name is read (torch only
when it is decoded into a TreeSpec: :func:`pretty_type_info` never imports torch). Never lark.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import TreeSpecNameError
from ._ast import _SCALARS as _SCALARS
from ._ast import (
    MAX_CACHE_LAYERS,
    AnyCacheInfo,
    CacheInfo,
    CacheLeaf,
    EncoderDecoderCacheInfo,
    KVSharingInfo,
    LayerInfo,
    LayerRun,
    LinearState,
    NoneInfo,
    ScalarInfo,
    TensorDictInfo,
    TensorInfo,
    TensorListInfo,
    TreeSpecInfo,
    TreeWithCachesInfo,
    TypeInfo,
)
from ._ast import _kind_list as _kind_list
from ._ast import _normalise_params as _normalise_params
from ._ast import _params_str as _params_str
from ._ast import _ParamValues as _ParamValues
from ._ast import _runs_str as _runs_str
from ._cache_kinds import CACHE_OPTIONS
from ._cache_kinds import LayerKind as LayerKind
from ._cache_kinds import Param as Param
from ._cache_kinds import cache_kind as cache_kind
from ._cache_kinds import cache_kinds as cache_kinds
from ._cache_kinds import layer_kind as layer_kind
from ._cache_kinds import layer_kinds as layer_kinds

# The AST lives in ._ast; its public names are re-exported (see __all__). The redundant aliases re-export, on
# purpose, the other names this module held before the split (AST helpers, the cache vocabulary the AST checks
# against), so that every import from here that worked before still does.
__all__ = [
    "AnyCacheInfo",
    "CacheInfo",
    "CacheLeaf",
    "EncoderDecoderCacheInfo",
    "KVSharingInfo",
    "LayerInfo",
    "LayerRun",
    "LinearState",
    "MAX_CACHE_LAYERS",
    "MAX_TYPE_INFO_LENGTH",
    "NoneInfo",
    "ScalarInfo",
    "TensorDictInfo",
    "TensorInfo",
    "TensorListInfo",
    "TreeSpecInfo",
    "TreeWithCachesInfo",
    "TypeInfo",
    "parse_type_info",
    "pretty_type_info",
]

#: Longest type-info string accepted (characters); longer input fails fast with TreeSpecNameError.
MAX_TYPE_INFO_LENGTH = 1_000_000


def parse_type_info(text: str) -> TypeInfo:
    """Parse one type-info string.

    Accepts every spelling of ``grammars/type_info.lark``: the canonical ones printed by
    ``str(TypeInfo)`` and the legacy ones the original module wrote (``DynamicCache__N``).
    Returns the typed AST (a :class:`TypeInfo` subclass); a ``___`` TreeSpec name is decoded with
    ``tree_spec_from_name`` (which imports torch) so that its leaf count and spec are known.
    Results are cached (bounded), so repeated calls with the same string are cheap.
    Raises :class:`TreeSpecNameError` on malformed input (with position and caret line) and
    ``TypeError`` when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"a type-info string must be a str, got {type(text).__name__}")
    return _parse_cached(text)


# Strings up to this length are remembered (at most _CACHE_SIZE of them): the cache then holds at most
# a few megabytes however many distinct strings a caller sends; longer strings are parsed every time.
_CACHE_SIZE = 4096
_CACHED_LENGTH = 1024


def _parse_cached(text: str) -> TypeInfo:
    return _parse_small(text) if len(text) <= _CACHED_LENGTH else _parse(text)


@lru_cache(maxsize=_CACHE_SIZE)
def _parse_small(text: str) -> TypeInfo:
    return _parse(text)


def _parse(text: str) -> TypeInfo:
    if len(text) > MAX_TYPE_INFO_LENGTH:
        raise TreeSpecNameError(
            f"type-info string is too long ({len(text)} characters, the limit is "
            f"MAX_TYPE_INFO_LENGTH={MAX_TYPE_INFO_LENGTH})",
            text[:200],
            0,
        )
    from ._transform import parse

    return parse(text)


def _pretty_layer(layer: LayerInfo) -> str:
    spec = layer.spec
    details = [] if layer.number is None else [f"{spec.number}={layer.number}"]
    details.extend(spec.param(letter).meaning for letter, _ in layer.params)  # type: ignore[union-attr]
    text = layer.class_name + (f"({'; '.join(details)})" if details else "")
    if spec.legacy:
        text += " [legacy spelling]"
    if not layer.populated:
        text += ", no tensors yet"
    for i, state in enumerate(layer.states):
        parts = []
        if state.conv_kernel is not None:
            parts.append(f"conv (kernel {state.conv_kernel})")
        if state.recurrent:
            parts.append("recurrent")
        if state.previous:
            parts.append("has a previous state")
        text += f"; state {i}: {', '.join(parts) or 'empty'}"
    names = layer.item_names()
    return text + (f"; items {', '.join(names)}" if names else "; no items")


def _pretty_layers(cache: CacheInfo, indent: str) -> list[str]:
    # One line per run, so that the view stays proportional to the spelling.
    lines = []
    first = 0
    for run in cache.runs:
        where = f"layer {first}" if run.count == 1 else f"layers {first}-{first + run.count - 1}"
        lines.append(f"{indent}{where}: {_pretty_layer(run.layer)}")
        first += run.count
    return lines


def _pretty_cache_head(name: str, cache: CacheInfo) -> str:
    n = cache.n_layers
    items = f"{cache.n_items} item{'s' if cache.n_items != 1 else ''}" if cache.n_items else "no items"
    head = f"{name} ({n} layer{'s' if n != 1 else ''}, {items})"
    notes = [p.meaning for p in CACHE_OPTIONS if cache.option(p.letter) and not p.number]
    if cache.leading_items:
        notes.append("first item " + ", ".join(cache.leading_items))
    lists = cache_kind(cache.name).lists  # type: ignore[union-attr]  # the node checked its name
    if lists:
        notes.append(f"{' and '.join(lists)} of {cache.list_length} entr{'y' if cache.list_length == 1 else 'ies'}")
    return head + "".join(f"; {note}" for note in notes)


def _pretty_cache(info: AnyCacheInfo, label: str = "") -> list[str]:
    if isinstance(info, CacheInfo):
        return [label + _pretty_cache_head(info.name, info), *_pretty_layers(info, "  ")]
    lines = [f"{label}EncoderDecoderCache ({info.n_items} items: self-attention, then cross-attention)"]
    for part, cache in (("self_attention_cache", info.self_attention), ("cross_attention_cache", info.cross_attention)):
        lines.append("  " + _pretty_cache_head(f"{part}: {cache.name}", cache))
        lines.extend(_pretty_layers(cache, "    "))
    return lines


def pretty_type_info(text: str) -> str:
    """Show a type-info string as an indented tree, one line per part.

    Accepts anything :func:`parse_type_info` accepts; a ``___`` TreeSpec name is shown by
    ``treespec_name.pretty_name``. Needs no torch: the types a TreeSpec name refers to are shown, not looked
    up. Returns the text (lines joined by ``"\\n"``, no trailing newline).
    Raises :class:`TreeSpecNameError` on malformed input, and ``TypeError`` when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"a type-info string must be a str, got {type(text).__name__}")
    from ._transform import parse

    info = parse(text, resolve=False) if len(text) <= MAX_TYPE_INFO_LENGTH else _parse(text)
    if isinstance(info, TreeSpecInfo):
        from ..treespec_name import pretty_name

        return pretty_name(info.name)
    if isinstance(info, TreeWithCachesInfo):
        from ..treespec_name import pretty_name

        n = len(info.caches)
        lines = [f"pytree with {n} transformers cache{'s' if n != 1 else ''} among its leaves ({info.n_items} items)"]
        for leaf in info.caches:
            lines.extend("  " + line for line in _pretty_cache(leaf.cache, f"leaf {leaf.index}: "))
        lines.append("  structure (each cache is one leaf *):")
        lines.extend("    " + line for line in pretty_name(info.tree.name).split("\n"))
        return "\n".join(lines)
    if isinstance(info, TensorInfo):
        return "Tensor"
    if isinstance(info, NoneInfo):
        return "None"
    if isinstance(info, ScalarInfo):
        return f"{info.kind} (a Python scalar, passed as is)"
    if isinstance(info, TensorListInfo):
        return f"list ({info.size} tensor{'s' if info.size != 1 else ''})"
    if isinstance(info, TensorDictInfo):
        lines = [f"dict ({len(info.keys)} tensor{'s' if len(info.keys) != 1 else ''}, in this key order)"]
        lines.extend(f"  {key!r}: Tensor" for key in info.keys)
        return "\n".join(lines)
    if isinstance(info, (CacheInfo, EncoderDecoderCacheInfo)):
        return "\n".join(_pretty_cache(info))
    if isinstance(info, KVSharingInfo):
        n = len(info.entries)
        lines = [f"KVSharingDict ({n} key{'s' if n != 1 else ''}, {info.n_items} tensors: keys and values shared between layers)"]
        lines.extend(f"  {key!r}: {count} tensor{'s' if count != 1 else ''}" for key, count in info.entries)
        return "\n".join(lines)
    raise AssertionError(f"unhandled type-info node {type(info).__name__}")  # pragma: no cover
