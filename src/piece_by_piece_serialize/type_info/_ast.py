"""The type-info AST: one frozen dataclass per form of ``grammars/type_info.lark``, and its canonical printer.

Each node is what :func:`~piece_by_piece_serialize.type_info.parse_type_info` returns for one spelling and what
deserialization dispatches on; ``str(node)`` is the canonical spelling, and ``parse_type_info(str(t)) == t``.
Every node checks its fields in ``__post_init__`` (the checks the grammar cannot express: scalar kinds, distinct
dict keys, layer kinds and their parameters, the layer limit), raising ``ValueError``; the parser turns those into
``TreeSpecNameError`` at the offending token. Every node knows how many items of the flat list it consumes
(:attr:`TypeInfo.n_items`).

Imports: the standard library and the cache vocabulary (:mod:`._cache_kinds`) only. Not lark, not torch, not the
parser (:mod:`._transform` imports this module, never the reverse), not the package ``__init__``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._cache_kinds import CACHE_OPTIONS, LayerKind, Param, cache_kind, cache_kinds, layer_kind, layer_kinds

__all__ = [
    "AnyCacheInfo",
    "CacheInfo",
    "CacheLeaf",
    "EncoderDecoderCacheInfo",
    "LayerInfo",
    "LayerRun",
    "LinearState",
    "MAX_CACHE_LAYERS",
    "NoneInfo",
    "ScalarInfo",
    "TensorDictInfo",
    "TensorInfo",
    "TensorListInfo",
    "TreeSpecInfo",
    "TreeWithCachesInfo",
    "KVSharingInfo",
    "TypeInfo",
]

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
    r"""``dict__N_k1__k2``: a ``dict`` of tensors whose values come in the order of ``keys``.

    A key is a non-empty ``str`` without whitespace, without ``"__"``, and neither starting nor
    ending with ``"_"`` (the spellings the original module decoded unambiguously). That is exactly the
    ``KEY`` terminal of ``grammars/type_info.lark``, ``/[^_\s](?:_?[^_\s])*/``: the check below accepts a key
    if and only if the terminal matches it whole. The writer is stricter (writer ⊂ grammar = this check):
    ``serialize._compact_key`` also keeps keys to ASCII letters, digits and ``_``, and writes dicts with any
    other keys as TreeSpec names. ``tests/property/test_compact_keys.py`` checks both relations.
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


_ParamValues = tuple[tuple[str, int | None], ...]


def _normalise_params(params: Iterable[tuple[str, int | None]], allowed: tuple[Param, ...], what: str) -> _ParamValues:
    """``params`` in the order of ``allowed``, each checked against its spec (flag, or letter + number)."""
    given: dict[str, int | None] = {}
    for letter, value in params:
        spec = next((p for p in allowed if p.letter == letter), None)
        if spec is None:
            known = ", ".join(f"'{p.letter}' ({p.meaning})" for p in allowed) or "none"
            raise ValueError(f"{what} takes no parameter {letter!r}; it takes {known}")
        if letter in given:
            raise ValueError(f"{what}: parameter {letter!r} is given twice")
        if spec.number and (type(value) is not int or value < 1):
            raise ValueError(f"{what}: parameter {letter!r} needs a positive number ({spec.meaning}), e.g. {letter}4")
        if not spec.number and value is not None:
            raise ValueError(f"{what}: parameter {letter!r} is a flag and takes no number, got {letter}{value}")
        given[letter] = value
    return tuple((p.letter, given[p.letter]) for p in allowed if p.letter in given)


def _params_str(params: _ParamValues) -> str:
    return "".join(letter if value is None else f"{letter}{value}" for letter, value in params)


@dataclass(frozen=True, slots=True)
class LinearState:
    """One recurrent state of a linear-attention layer (``s`` group): which tensors it holds, and whether
    it has seen a previous step (``has_previous_state``)."""

    conv_kernel: int | None = None  # holds conv_states[i], with this conv_kernel_size
    recurrent: bool = False  # holds recurrent_states[i]
    previous: bool = False

    def __post_init__(self) -> None:
        if self.conv_kernel is not None and (type(self.conv_kernel) is not int or self.conv_kernel < 1):
            raise ValueError(f"LinearState.conv_kernel must be a positive int or None, got {self.conv_kernel!r}")

    @classmethod
    def _of_params(cls, params: _ParamValues) -> LinearState:
        values = dict(params)
        return cls(values.get("c"), "h" in values, "p" in values)

    def params(self) -> _ParamValues:
        out: list[tuple[str, int | None]] = []
        if self.conv_kernel is not None:
            out.append(("c", self.conv_kernel))
        if self.recurrent:
            out.append(("h", None))
        if self.previous:
            out.append(("p", None))
        return tuple(out)

    def __str__(self) -> str:
        return "s" + _params_str(self.params())


@dataclass(frozen=True, slots=True)
class LayerInfo:
    """One cache layer: its kind letter (see :func:`~._cache_kinds.layer_kinds`), whether it holds its
    tensors, its number (a window or a maximum length), its parameters and its recurrent states.

    Built from a spelling or from a layer by the cache adapters; the constructor checks every field
    against the kind's table entry and normalises the order of the parameters, so ``==`` is the equality of
    layers. ``n_items`` and :meth:`item_names` say what the layer consumes from the flat list.
    """

    kind: str = "D"
    populated: bool = True
    number: int | None = None
    params: _ParamValues = ()
    states: tuple[LinearState, ...] = ()
    n_items: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spec = layer_kind(self.kind)
        if spec is None:
            raise ValueError(
                f"unknown layer kind {self.kind!r}; the kinds are {_kind_list()}, and those of classes registered "
                "with register_cache_layer_class"
            )
        what = f"layer kind {self.kind!r} ({spec.class_name})"
        if not self.populated and spec.empty_items is None:
            raise ValueError(f"{what} has no empty spelling {self.kind.lower()!r}: it always holds its state")
        if spec.number is None:
            if self.number is not None:
                raise ValueError(f"{what} takes no number, got {self.kind}{self.number}")
        elif type(self.number) is not int or self.number < 1:
            got = "none" if self.number is None else str(self.number)
            raise ValueError(f"{what} needs its {spec.number}, a positive integer (e.g. {self.kind}4096), got {got}")
        object.__setattr__(self, "params", _normalise_params(self.params, spec.params, what))
        if self.states and not spec.states:
            raise ValueError(f"{what} has no recurrent states ('s' groups)")
        if spec.states and not self.states:
            raise ValueError(f"{what} needs at least one recurrent state group 's', e.g. {self.kind}sc4hp")
        if self.flag("y") and not any(st.conv_kernel is not None for st in self.states):
            raise ValueError(f"{what}: parameter 'y' (dtype set to its first conv state's) needs a state with 'c'")
        object.__setattr__(self, "n_items", len(self.item_names()))

    @property
    def spec(self) -> LayerKind:
        return layer_kind(self.kind)  # type: ignore[return-value]

    @property
    def class_name(self) -> str:
        """The class this layer is rebuilt as."""
        return self.spec.class_name

    def flag(self, letter: str) -> bool:
        return any(p == letter for p, _ in self.params)

    def item_names(self) -> tuple[str, ...]:
        """The names of the items this layer consumes, in flat-list order."""
        spec = self.spec
        names = list(spec.items if self.populated else spec.empty_items or ())
        for letter, full, empty in spec.flag_items:
            if self.flag(letter):
                names.extend(full if self.populated else empty)
        for i, state in enumerate(self.states):
            if state.conv_kernel is not None:
                names.append(f"conv_states[{i}]")
            if state.recurrent:
                names.append(f"recurrent_states[{i}]")
        names.extend(spec.extra)
        return tuple(names)

    def code(self) -> str:
        """The spelling of this layer inside a cache type-info string (``D``, ``s512r``, ``Asc4hp``)."""
        head = self.kind if self.populated else self.kind.lower()
        number = "" if self.number is None else str(self.number)
        return head + number + _params_str(self.params) + "".join(map(str, self.states))


def _kind_list() -> str:
    kinds = [k for k in layer_kinds() if not k.legacy and k.like is None]
    return ", ".join(f"{k.code} ({k.class_name})" for k in kinds)


@dataclass(frozen=True, slots=True)
class LayerRun:
    """``count`` consecutive layers of the same kind: the unit of a cache spelling (``5S512``)."""

    count: int
    layer: LayerInfo


def _runs_str(runs: tuple[LayerRun, ...]) -> str:
    if not runs:
        return "0"
    return "_".join(f"{run.count if run.count > 1 else ''}{run.layer.code()}" for run in runs)


@dataclass(frozen=True, slots=True)
class CacheInfo(TypeInfo):
    """``<Name>_<options>_<layers>``: a transformers cache (or a registered one) and its layers in order.

    ``name`` is the class as spelled (``DynamicCache``, ``StaticCache``, ...); ``options`` the parameters
    of its options group (:data:`~._cache_kinds.CACHE_OPTIONS`); ``runs`` the layers, run-length encoded
    in canonical form (every count at least 1, neighbouring runs of different layers), which keeps parsing,
    printing and counting proportional to the length of the spelling (``DynamicCache_4096D`` is one run)
    and makes ``==`` the equality of layer sequences. Build one from a layer sequence with :meth:`of_layers`.
    """

    name: str = "DynamicCache"
    runs: tuple[LayerRun, ...] = ()
    options: _ParamValues = ()
    #: How many items of the flat list the cache consumes; computed once here because deserialization reads
    #: it on every forward call.
    n_items: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spec = cache_kind(self.name)
        if spec is None or spec.pair:
            known = ", ".join(k.name for k in cache_kinds() if not k.pair and k.like is None)
            raise ValueError(
                f"unknown cache class {self.name!r}; the caches are {known}, EncoderDecoderCache (spelled with its "
                "two caches) and the classes registered with register_cache_class"
            )
        what = f"the options group 'O' of {self.name}"
        object.__setattr__(self, "options", _normalise_params(self.options, CACHE_OPTIONS, what))
        if self.option("p") and not self.option("o"):
            raise ValueError(f"{what}: 'p' (only_non_sliding=True) needs 'o' (offloading=True)")
        if self.option("l") and not spec.lists:
            raise ValueError(f"{what}: 'l' (the length of registered lists) is for a class registered with lists=")
        total = len(spec.leading_items) + self.list_length * len(spec.lists)
        layers = 0
        for i, run in enumerate(self.runs):
            if run.count < 1 or (i and self.runs[i - 1].layer == run.layer):
                raise ValueError(f"CacheInfo.runs is not canonical: {self.runs!r}")
            layers += run.count
            total += run.count * run.layer.n_items
        if layers > MAX_CACHE_LAYERS:
            raise ValueError(f"a cache may describe at most MAX_CACHE_LAYERS={MAX_CACHE_LAYERS} layers, got {layers}")
        object.__setattr__(self, "n_items", total)

    @classmethod
    def of_layers(cls, layers: Iterable[LayerInfo], name: str = "DynamicCache", options: _ParamValues = ()) -> CacheInfo:
        """The canonical node for a sequence of layers (equal neighbours merged into one run)."""
        runs: list[LayerRun] = []
        for layer in layers:
            if runs and runs[-1].layer == layer:
                runs[-1] = LayerRun(runs[-1].count + 1, layer)
            else:
                runs.append(LayerRun(1, layer))
        return cls(name, tuple(runs), options)

    def option(self, letter: str) -> bool:
        return any(p == letter for p, _ in self.options)

    @property
    def list_length(self) -> int:
        """The length of each registered list attribute (the ``l`` parameter; 0 when absent)."""
        return next((value or 0 for letter, value in self.options if letter == "l"), 0)

    @property
    def leading_items(self) -> tuple[str, ...]:
        """Items of the cache itself, before the layers' items (``DFlashCache``'s accepted-token count)."""
        return cache_kind(self.name).leading_items  # type: ignore[union-attr]

    @property
    def layers(self) -> tuple[LayerInfo, ...]:
        """The layers in order, one entry per layer."""
        return tuple(layer for run in self.runs for layer in (run.layer,) * run.count)

    @property
    def n_layers(self) -> int:
        return sum(run.count for run in self.runs)

    def body(self) -> str:
        """The spelling after ``<Name>_``: options group, then layers."""
        options = f"O{_params_str(self.options)}_" if self.options else ""
        return options + _runs_str(self.runs)

    def __str__(self) -> str:
        return f"{self.name}_{self.body()}"


@dataclass(frozen=True, slots=True)
class EncoderDecoderCacheInfo(TypeInfo):
    """An ``EncoderDecoderCache``: self-attention cache items, then cross-attention ones.

    Spelled ``EncoderDecoderCache_<layers>__<layers>`` when both caches are ``DynamicCache`` objects (the
    spelling written before), else ``EncoderDecoderCache__<cache>__<cache>``.
    """

    self_attention: CacheInfo
    cross_attention: CacheInfo
    n_items: int = field(init=False, repr=False, compare=False)  # see CacheInfo.n_items

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_items", self.self_attention.n_items + self.cross_attention.n_items)

    def __str__(self) -> str:
        a, b = self.self_attention, self.cross_attention
        if a.name == "DynamicCache" and b.name == "DynamicCache":
            return f"EncoderDecoderCache_{a.body()}__{b.body()}"
        return f"EncoderDecoderCache__{a}__{b}"


AnyCacheInfo = CacheInfo | EncoderDecoderCacheInfo


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
    cache: AnyCacheInfo

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


@dataclass(frozen=True, slots=True)
class KVSharingInfo(TypeInfo):
    """``KVSharingDict_N__k1__c1__k2__c2``: a ``transformers.cache_utils.KVSharingDict``, the dict through which
    Gemma3n (and the models built like it) share keys and values between layers: ``entries`` are its keys in
    order, each with the number of tensors of its tuple; the flat items are those tensors, key by key.

    Keys follow the compact dict form's rule (:class:`TensorDictInfo`), which the layer types it is keyed by
    (``full_attention``, ``sliding_attention``) do.
    """

    entries: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        keys = [key for key, _ in self.entries]
        if keys:
            TensorDictInfo(tuple(keys))  # the same key rule, checked once
        for key, count in self.entries:
            if type(count) is not int or count < 0:
                raise ValueError(f"KVSharingInfo: the tuple of {key!r} has {count!r} tensors")

    @property
    def n_items(self) -> int:
        return sum(count for _, count in self.entries)

    def __str__(self) -> str:
        return f"KVSharingDict_{len(self.entries)}" + "".join(f"__{key}__{count}" for key, count in self.entries)
