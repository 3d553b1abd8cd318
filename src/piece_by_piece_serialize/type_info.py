"""The type-info language: how to rebuild one argument from a custom operator's flat list of tensors.

``type_as_str_with_info`` writes one short string per argument (``Tensor``, ``list__3``,
``dict__2_a__b``, ``DynamicCache_2D_W512``, a ``___`` TreeSpec name, ...) and ``deserialize_args``
reads it back. ``grammars/type_info.lark`` is the only definition of the language; this module holds
the typed AST that deserialization dispatches on, its canonical printer (``str``) and the public entry
points. Invariants:

* canonical = fixed point: ``parse_type_info(str(t)) == t`` for every AST ``t`` and
  ``str(parse_type_info(s))`` is stable; legacy spellings (``DynamicCache__4``) parse to the same AST as
  their canonical spelling (``DynamicCache_2D``);
* every node knows how many items of the flat list it consumes (:attr:`TypeInfo.n_items`);
* malformed input raises :class:`~piece_by_piece_serialize.errors.TreeSpecNameError` (the type-info
  strings belong to the TreeSpec-name language family), never a lark exception;
* this module imports neither lark nor torch; the parser (``_type_info_transform``) is loaded on first
  use, and torch only when a ``___`` TreeSpec name must be decoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from .errors import TreeSpecNameError

__all__ = [
    "CacheLayer",
    "CacheLeaf",
    "DynamicCacheInfo",
    "EncoderDecoderCacheInfo",
    "LayerRun",
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
#: Most layers a cache spelling may describe (the largest models have a few hundred): a 20-character
#: string such as ``DynamicCache_99999999d`` must not make deserialization build millions of layers.
MAX_CACHE_LAYERS = 4096

_SCALARS = ("bool", "int", "float")


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """Base class of the type-info AST; ``str(node)`` is the canonical spelling."""

    @property
    def n_items(self) -> int:
        """How many items of the operator's flat list this argument consumes."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TensorInfo(TypeInfo):
    """``Tensor``: the argument is one tensor."""

    @property
    def n_items(self) -> int:
        return 1

    def __str__(self) -> str:
        return "Tensor"


@dataclass(frozen=True, slots=True)
class NoneInfo(TypeInfo):
    """``None``: the argument is ``None`` (one ``None`` item in the flat list)."""

    @property
    def n_items(self) -> int:
        return 1

    def __str__(self) -> str:
        return "None"


@dataclass(frozen=True, slots=True)
class ScalarInfo(TypeInfo):
    """``bool``, ``int`` or ``float``: a Python scalar passed through the operator as is."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in _SCALARS:
            raise ValueError(f"ScalarInfo.kind must be one of {_SCALARS}, got {self.kind!r}")

    @property
    def n_items(self) -> int:
        return 1

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True, slots=True)
class TensorListInfo(TypeInfo):
    """``list__N``: a ``list`` of ``size`` tensors."""

    size: int

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size < 0:
            raise ValueError(f"TensorListInfo.size must be a non-negative int, got {self.size!r}")

    @property
    def n_items(self) -> int:
        return self.size

    def __str__(self) -> str:
        return f"list__{self.size}"


@dataclass(frozen=True, slots=True)
class TensorDictInfo(TypeInfo):
    """``dict__N_k1__k2``: a ``dict`` of tensors whose values come in the order of ``keys``.

    A key is a non-empty ``str`` without whitespace, without ``"__"``, and neither starting nor
    ending with ``"_"`` (the spellings the original module decoded unambiguously). Dicts with other
    keys are written as TreeSpec names instead.
    """

    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        # The printer must write something the grammar reads back (KEY in grammars/type_info.lark).
        if not self.keys or len(set(self.keys)) != len(self.keys):
            raise ValueError(f"TensorDictInfo needs distinct keys, got {self.keys!r}")
        for key in self.keys:
            if (
                type(key) is not str
                or not key
                or key[0] == "_"
                or key[-1] == "_"
                or "__" in key
                or any(ch.isspace() for ch in key)
            ):
                raise ValueError(f"TensorDictInfo: key {key!r} has no spelling in the compact dict form")

    @property
    def n_items(self) -> int:
        return len(self.keys)

    def __str__(self) -> str:
        return f"dict__{len(self.keys)}_{'__'.join(self.keys)}"


@dataclass(frozen=True, slots=True)
class CacheLayer:
    """One layer of a transformers ``DynamicCache``.

    ``sliding_window`` is ``None`` for a ``DynamicLayer`` and the window for a
    ``DynamicSlidingWindowLayer``; ``populated`` says whether the layer holds its key and value
    tensors (a layer created from a config holds none until its first update).
    """

    sliding_window: int | None = None
    populated: bool = True

    def __post_init__(self) -> None:
        if self.sliding_window is not None and (type(self.sliding_window) is not int or self.sliding_window < 1):
            raise ValueError(f"CacheLayer.sliding_window must be a positive int or None, got {self.sliding_window!r}")

    @property
    def n_items(self) -> int:
        return 2 if self.populated else 0

    @property
    def class_name(self) -> str:
        """The transformers class this layer is rebuilt as."""
        return "DynamicLayer" if self.sliding_window is None else "DynamicSlidingWindowLayer"

    def code(self) -> str:
        """The kind spelling of this layer inside a cache type-info string (``D``, ``w512``, ...)."""
        letter = "D" if self.sliding_window is None else "W"
        if not self.populated:
            letter = letter.lower()
        return letter if self.sliding_window is None else f"{letter}{self.sliding_window}"


@dataclass(frozen=True, slots=True)
class LayerRun:
    """``count`` consecutive layers of the same kind: the unit of a cache spelling (``5W512``)."""

    count: int
    layer: CacheLayer


def _runs_str(runs: tuple[LayerRun, ...]) -> str:
    if not runs:
        return "0"
    return "_".join(f"{run.count if run.count > 1 else ''}{run.layer.code()}" for run in runs)


@dataclass(frozen=True, slots=True)
class DynamicCacheInfo(TypeInfo):
    """``DynamicCache_<layers>``: a transformers ``DynamicCache``, tensors as ``k0, v0, k1, v1, ...``.

    The layers are stored run-length encoded (``runs``), in canonical form: every count is at least 1
    and two neighbouring runs differ in kind. This keeps parsing, printing and counting proportional
    to the length of the spelling (``DynamicCache_4096D`` is one run), and makes ``==`` the equality
    of layer sequences. Build one from a layer sequence with :meth:`of_layers`.
    """

    runs: tuple[LayerRun, ...]
    #: How many items of the flat list the cache consumes; computed once here because deserialization reads
    #: it on every forward call.
    n_items: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        total = items = 0
        for i, run in enumerate(self.runs):
            if run.count < 1 or (i and self.runs[i - 1].layer == run.layer):
                raise ValueError(f"DynamicCacheInfo.runs is not canonical: {self.runs!r}")
            total += run.count
            items += run.count * run.layer.n_items
        if total > MAX_CACHE_LAYERS:
            raise ValueError(f"a cache may describe at most MAX_CACHE_LAYERS={MAX_CACHE_LAYERS} layers, got {total}")
        object.__setattr__(self, "n_items", items)

    @classmethod
    def of_layers(cls, layers: Iterable[CacheLayer]) -> DynamicCacheInfo:
        """The canonical node for a sequence of layers (equal neighbours merged into one run)."""
        runs: list[LayerRun] = []
        for layer in layers:
            if runs and runs[-1].layer == layer:
                runs[-1] = LayerRun(runs[-1].count + 1, layer)
            else:
                runs.append(LayerRun(1, layer))
        return cls(tuple(runs))

    @property
    def layers(self) -> tuple[CacheLayer, ...]:
        """The layers in order, one entry per layer."""
        return tuple(layer for run in self.runs for layer in (run.layer,) * run.count)

    @property
    def n_layers(self) -> int:
        return sum(run.count for run in self.runs)

    def __str__(self) -> str:
        return f"DynamicCache_{_runs_str(self.runs)}"


@dataclass(frozen=True, slots=True)
class EncoderDecoderCacheInfo(TypeInfo):
    """``EncoderDecoderCache_<layers>__<layers>``: self-attention cache tensors, then cross-attention ones."""

    self_attention: DynamicCacheInfo
    cross_attention: DynamicCacheInfo
    n_items: int = field(init=False, repr=False, compare=False)  # see DynamicCacheInfo.n_items

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_items", self.self_attention.n_items + self.cross_attention.n_items)

    def __str__(self) -> str:
        return (
            f"EncoderDecoderCache_{_runs_str(self.self_attention.runs)}"
            f"__{_runs_str(self.cross_attention.runs)}"
        )


@dataclass(frozen=True, slots=True)
class TreeSpecInfo(TypeInfo):
    """``___...``: a TreeSpec name; the value is rebuilt with torch's ``tree_unflatten``.

    ``n_leaves`` and ``spec`` are decoded from ``name`` by ``tree_spec_from_name`` when the string is
    parsed; they do not take part in comparisons (``name`` determines them).
    """

    name: str
    n_leaves: int = field(default=0, compare=False)
    spec: Any = field(default=None, compare=False, repr=False)

    @property
    def n_items(self) -> int:
        return self.n_leaves

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class CacheLeaf:
    """Leaf ``index`` of a pytree is a transformers cache described by ``cache``."""

    index: int
    cache: DynamicCacheInfo | EncoderDecoderCacheInfo

    def __str__(self) -> str:
        return f"{self.index}_{self.cache}"


@dataclass(frozen=True, slots=True)
class TreeWithCachesInfo(TypeInfo):
    """``WithCaches__<i>_<cache>...___...``: a pytree some of whose leaves are transformers caches.

    torch's pytree does not flatten the caches of transformers 5.x (they are not registered, and this
    library registers nothing), so ``tree`` has them as leaves; each such leaf, listed in ``caches`` by
    increasing index, stands in the flat list for its cache's tensors (``k0, v0, k1, v1, ...``).
    """

    caches: tuple[CacheLeaf, ...]
    tree: TreeSpecInfo

    def __post_init__(self) -> None:
        previous = -1
        for leaf in self.caches:
            if leaf.index <= previous or (self.tree.spec is not None and leaf.index >= self.tree.n_leaves):
                raise ValueError(f"TreeWithCachesInfo: cache leaf indices must increase within the tree, got {self.caches!r}")
            previous = leaf.index
        if not self.caches:
            raise ValueError("TreeWithCachesInfo needs at least one cache leaf")

    @property
    def n_items(self) -> int:
        return self.tree.n_leaves - len(self.caches) + sum(leaf.cache.n_items for leaf in self.caches)

    def __str__(self) -> str:
        return "WithCaches" + "".join(f"__{leaf}" for leaf in self.caches) + self.tree.name


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
    from ._type_info_transform import parse

    return parse(text)


def _pretty_layers(cache: DynamicCacheInfo, indent: str) -> list[str]:
    # One line per run, so that the view stays proportional to the spelling.
    lines = []
    first = 0
    for run in cache.runs:
        layer = run.layer
        detail = f"(sliding_window={layer.sliding_window})" if layer.sliding_window is not None else ""
        state = "" if layer.populated else ", no tensors yet"
        where = f"layer {first}" if run.count == 1 else f"layers {first}-{first + run.count - 1}"
        lines.append(f"{indent}{where}: {layer.class_name}{detail}{state}")
        first += run.count
    return lines


def _pretty_cache_head(name: str, cache: DynamicCacheInfo) -> str:
    n = cache.n_layers
    tensors = f"{cache.n_items} tensors as k0, v0, k1, v1, ..." if cache.n_items else "no tensors"
    return f"{name} ({n} layer{'s' if n != 1 else ''}, {tensors})"


def _pretty_cache(info: DynamicCacheInfo | EncoderDecoderCacheInfo, label: str = "") -> list[str]:
    if isinstance(info, DynamicCacheInfo):
        return [label + _pretty_cache_head("DynamicCache", info), *_pretty_layers(info, "  ")]
    lines = [f"{label}EncoderDecoderCache ({info.n_items} tensors: self-attention, then cross-attention)"]
    lines.append("  " + _pretty_cache_head("self_attention_cache: DynamicCache", info.self_attention))
    lines.extend(_pretty_layers(info.self_attention, "    "))
    lines.append("  " + _pretty_cache_head("cross_attention_cache: DynamicCache", info.cross_attention))
    lines.extend(_pretty_layers(info.cross_attention, "    "))
    return lines


def pretty_type_info(text: str) -> str:
    """Show a type-info string as an indented tree, one line per part.

    Accepts anything :func:`parse_type_info` accepts; a ``___`` TreeSpec name is shown by
    ``treespec_name.pretty_name``. Returns the text (lines joined by ``"\\n"``, no trailing newline).
    Raises :class:`TreeSpecNameError` on malformed input.
    """
    info = parse_type_info(text)
    if isinstance(info, TreeSpecInfo):
        from .treespec_name import pretty_name

        return pretty_name(info.name)
    if isinstance(info, TreeWithCachesInfo):
        from .treespec_name import pretty_name

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
    if isinstance(info, (DynamicCacheInfo, EncoderDecoderCacheInfo)):
        return "\n".join(_pretty_cache(info))
    raise AssertionError(f"unhandled type-info node {type(info).__name__}")  # pragma: no cover
