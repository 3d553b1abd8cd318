"""The vocabulary of cache spellings: which layer kinds and cache classes exist, and what they consume.

``grammars/type_info.lark`` fixes the *shape* of a cache spelling (a cache name, an options group, layer
groups made of a kind letter, a number, parameters and recurrent-state groups); this module fixes its
*vocabulary*: for every layer kind letter, the transformers class it stands for, what its number means,
which parameters it takes and, for a given spelling, which items of the flat list it consumes and in what
order. The AST (:mod:`._ast`) validates against these tables and the rebuild (:mod:`..serialize._caches`)
follows them, so that the writer, the reader and the documentation table cannot disagree.

Invariants: this module imports only the standard library (no torch, no transformers: the type-info parser
runs without them, and nothing of this package: every other module of it may import this one);
the tables only grow (a registered kind is never removed or redefined), so a string that parsed once keeps
its meaning in the process; item names are the attribute names of the transformers classes, except the
recurrent-state items, named ``conv_states[i]`` and ``recurrent_states[i]``.

Note [varying scalars]
~~~~~~~~~~~~~~~~~~~~~~
Everything a layer holds is either in the type-info string or in the flat list. The string holds what is
fixed while a model decodes (kinds, windows, maximum lengths, flags), so that one string serves every
step and a custom operator's structure stays the same from call to call. The flat list holds the tensors
and the Python ints that grow with every token (``cumulative_length`` of a sliding-window or quantized
layer, ``cumulative_length_int`` of a static sliding-window layer, the accepted-token count of a
``DFlashCache``): they are items like the scalars of a pytree, and a custom operator passes them as
``SymInt``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CacheKind",
    "LayerKind",
    "Param",
    "cache_kind",
    "cache_kinds",
    "layer_kind",
    "layer_kinds",
]


@dataclass(frozen=True)
class Param:
    """A parameter letter of a layer kind, a recurrent state or a cache's options group."""

    letter: str
    meaning: str  # the attribute it sets, or a short description, for messages and documentation
    number: bool = False  # the letter is followed by a number (``c4``)


@dataclass(frozen=True)
class LayerKind:
    """One layer kind letter of the type-info language.

    ``items``, ``empty_items``: the items a layer consumes when it holds its tensors (spelled in upper case)
    and when it holds none yet (lower case; ``None`` when the kind has no such spelling). ``flag_items``:
    items added by a parameter (an indexer's keys). ``states``: the kind takes recurrent-state groups
    (``s`` + ``c<k>``/``h``/``p``), each adding its conv and recurrent state when present.
    """

    code: str
    class_name: str
    number: str | None = None  # what the number after the letter means (None: no number)
    params: tuple[Param, ...] = ()
    items: tuple[str, ...] = ("keys", "values")
    empty_items: tuple[str, ...] | None = ()
    flag_items: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()  # (letter, full, empty)
    states: bool = False
    legacy: bool = False  # read for strings written before; the writer never produces it
    description: str = ""
    #: registered by a user (register_cache_layer_class): the built-in kind it behaves like, and the extra
    #: attributes its class adds, carried as items after all the others
    like: str | None = None
    extra: tuple[str, ...] = ()

    def param(self, letter: str) -> Param | None:
        for p in self.params:
            if p.letter == letter:
                return p
        return None


#: The parameters of one recurrent state of a linear-attention layer (``s`` groups).
STATE_PARAMS: tuple[Param, ...] = (
    Param("c", "conv_states[i] with conv_kernel_size[i]=<number>", number=True),
    Param("h", "recurrent_states[i]"),
    Param("p", "has_previous_state[i]=True"),
)

_RECORD = Param("r", "record_past=True")
_DTYPE = Param("y", "dtype set (to its first conv state's dtype)")
_CROP = Param("c", "croppable (made with max_cache_len <= sliding_window)")
_INDEXER = Param("x", "is_indexer_initialized=True")
_POSITIONS = Param("p", "indexer_position_ids set")

_STATIC = ("keys", "values", "cumulative_length")
# transformers 5.25 counts the tokens a linear-attention layer has seen in a 0-d tensor it updates in place
_LINEAR_LENGTH = Param("l", "cumulative_length_linear set (a 0-d int64 tensor; transformers >= 5.25)")
_LINEAR = (_RECORD, _DTYPE, _LINEAR_LENGTH)
_LINEAR_ITEMS = (("l", ("cumulative_length_linear",), ("cumulative_length_linear",)),)
# the group-wise quantized layers (Q, H): their settings, the deferred beam reordering, and their items: the
# residual keys/values, the parts of each quantized state (Note [quantized states] in _cache_quantized.py),
# the count
_GROUP_WISE = (
    Param("g", "q_group_size=<number>", number=True),
    Param("r", "residual_length=<number> (0 without it)", number=True),
)
_PENDING = Param("p", "_pending_beam_idx set (a beam reordering deferred to the next update)")


def _quantized_items(parts: tuple[str, ...]) -> tuple[str, ...]:
    return (
        "keys",
        "values",
        *(f"_quantized_keys{p}" for p in parts),
        *(f"_quantized_values{p}" for p in parts),
        "cumulative_length",
    )


_BUILTIN_LAYERS: tuple[LayerKind, ...] = (
    LayerKind("D", "DynamicLayer", description="grows by concatenation"),
    LayerKind(
        "S",
        "DynamicSlidingWindowLayer",
        number="sliding_window",
        params=(_RECORD,),
        items=("keys", "values", "cumulative_length"),
        description="keeps the last sliding_window - 1 tokens; cumulative_length counts them all",
    ),
    LayerKind(
        "W",
        "DynamicSlidingWindowLayer",
        number="sliding_window",
        legacy=True,
        description="spelling written before 0.2: cumulative_length is taken as the stored length",
    ),
    LayerKind(
        "I",
        "DynamicIndexedLayer",
        params=(_INDEXER, _POSITIONS),
        flag_items=(("x", ("indexer_keys",), ("indexer_keys",)), ("p", ("indexer_position_ids",), ("indexer_position_ids",))),
        description="a DynamicLayer with the indexer keys of sparse-attention models",
    ),
    LayerKind(
        "T",
        "StaticLayer",
        number="max_cache_len",
        items=_STATIC,
        empty_items=("cumulative_length",),
        description="preallocated to max_cache_len tokens, updated in place",
    ),
    LayerKind(
        "V",
        "StaticSlidingWindowLayer",
        number="max_cache_len",
        params=(_CROP,),
        items=(*_STATIC, "cumulative_length_int"),
        empty_items=("cumulative_length", "cumulative_length_int"),
        description="a StaticLayer of min(max_cache_len, sliding_window) tokens that rolls when full",
    ),
    LayerKind(
        "J",
        "StaticIndexedLayer",
        number="max_cache_len",
        params=(_INDEXER, _POSITIONS),
        items=_STATIC,
        empty_items=("cumulative_length",),
        flag_items=(
            ("x", ("indexer_keys", "indexer_cumulative_length"), ("indexer_keys", "indexer_cumulative_length")),
            ("p", ("indexer_position_ids",), ("indexer_position_ids",)),
        ),
        description="a StaticLayer with preallocated indexer keys",
    ),
    LayerKind(
        "F",
        "Fp8QuantizedLayer",
        items=(
            "keys",
            "values",
            "_quantized_keys[0]",
            "_quantized_keys[1]",
            "_quantized_values[0]",
            "_quantized_values[1]",
            "cumulative_length",
        ),
        description="keys and values in float8_e4m3fn with one frozen scale each",
    ),
    LayerKind(
        "Q",
        "QuantoQuantizedLayer",
        number="nbits",
        params=(*_GROUP_WISE, Param("k", "axis_key=-1 (0 without it)"), Param("v", "axis_value=-1 (0 without it)"), _PENDING),
        items=_quantized_items(("._data._data", "._scale", "._shift", ".shape")),
        flag_items=(("p", ("_pending_beam_idx",), ()),),
        description="optimum-quanto int2/int4 group-wise keys and values, and a residual of recent ones in full precision",
    ),
    LayerKind(
        "H",
        "HQQQuantizedLayer",
        number="nbits",
        params=(*_GROUP_WISE, Param("k", "axis_key=1 (0 without it)"), Param("v", "axis_value=1 (0 without it)"), _PENDING),
        items=_quantized_items(("[0]", "[1]['scale']", "[1]['zero']", "[1]['shape']")),
        flag_items=(("p", ("_pending_beam_idx",), ()),),
        description="HQQ 1- to 8-bit group-wise keys and values, and a residual of recent ones in full precision",
    ),
    LayerKind(
        "A",
        "LinearAttentionLayer",
        params=_LINEAR,
        items=(),
        empty_items=None,
        states=True,
        flag_items=_LINEAR_ITEMS,
        description="conv and recurrent states of linear attention or short convolutions",
    ),
    LayerKind(
        "B",
        "LinearAttentionAndFullAttentionLayer",
        params=_LINEAR,
        states=True,
        flag_items=_LINEAR_ITEMS,
        description="a LinearAttentionLayer and a DynamicLayer in one",
    ),
    LayerKind(
        "C",
        "LinearAttentionAndSlidingWindowAttentionLayer",
        number="sliding_window",
        params=_LINEAR,
        items=("keys", "values", "cumulative_length"),
        states=True,
        flag_items=_LINEAR_ITEMS,
        description="a LinearAttentionLayer and a DynamicSlidingWindowLayer in one",
    ),
    LayerKind(
        "G",
        "LinearAttentionAndStaticFullAttentionLayer",
        number="max_cache_len",
        params=_LINEAR,
        items=_STATIC,
        empty_items=("cumulative_length",),
        states=True,
        flag_items=_LINEAR_ITEMS,
        description="a LinearAttentionLayer and a StaticLayer in one",
    ),
    LayerKind(
        "K",
        "LinearAttentionAndStaticSlidingWindowAttentionLayer",
        number="max_cache_len",
        params=(_CROP, *_LINEAR),
        items=(*_STATIC, "cumulative_length_int"),
        empty_items=("cumulative_length", "cumulative_length_int"),
        states=True,
        flag_items=_LINEAR_ITEMS,
        description="a LinearAttentionLayer and a StaticSlidingWindowLayer in one",
    ),
    LayerKind("X", "DummyLayer", items=(), empty_items=None, description="holds nothing (shared or attention-free layers)"),
)


@dataclass(frozen=True)
class CacheKind:
    """A cache class name of the type-info language."""

    name: str
    leading_items: tuple[str, ...] = ()  # items of the cache itself, before its layers' items
    description: str = ""
    # registered list attributes (MiniMaxCache.linear_cache): each entry one item (None for an empty entry), after
    # the leading items; their common length is the options group's "l" parameter
    lists: tuple[str, ...] = ()
    like: str | None = None  # registered by a user: the built-in cache it behaves like
    pair: bool = False  # holds two caches (EncoderDecoderCache), spelled with its own forms


#: Parameters of a cache's options group (``O<params>_`` before its layers).
CACHE_OPTIONS: tuple[Param, ...] = (
    Param("n", "layer_class_to_replicate=None"),
    Param("o", "offloading=True"),
    Param("p", "only_non_sliding=True"),
    Param("l", "the length of the lists registered with the class", number=True),
)

_BUILTIN_CACHES: tuple[CacheKind, ...] = (
    CacheKind("DynamicCache", description="layers created as the model runs"),
    CacheKind("StaticCache", description="preallocated layers (torch.compile, torch.export); SlidingWindowCache is an alias"),
    CacheKind("QuantizedCache", description="quantized full-attention layers"),
    CacheKind("MtpCache", description="a DynamicCache for multi-token prediction"),
    CacheKind(
        "DFlashCache",
        leading_items=("_previous_number_of_accepted_tokens",),
        description="a DynamicCache that shifts its queries by the tokens accepted at the previous step",
    ),
    CacheKind("EncoderDecoderCache", pair=True, description="a self-attention cache and a cross-attention cache"),
    CacheKind("Cache", description="the base class itself, made with Cache(layers=[...])"),
)

_LAYERS: dict[str, LayerKind] = {kind.code: kind for kind in _BUILTIN_LAYERS}
_CACHES: dict[str, CacheKind] = {kind.name: kind for kind in _BUILTIN_CACHES}
#: Letters a user-registered layer kind may take (the built-in ones, "O" and "s" are taken).
FREE_LAYER_CODES = tuple(c for c in "ELMNPRUYZ" if c not in _LAYERS)


def layer_kind(code: str) -> LayerKind | None:
    """The layer kind of an upper-case letter, or ``None``."""
    return _LAYERS.get(code)


def cache_kind(name: str) -> CacheKind | None:
    """The cache kind of a class name as spelled, or ``None``."""
    return _CACHES.get(name)


def layer_kinds() -> tuple[LayerKind, ...]:
    """Every layer kind, built-in ones first, in the order of the documentation table."""
    return tuple(_LAYERS.values())


def cache_kinds() -> tuple[CacheKind, ...]:
    """Every cache kind, built-in ones first."""
    return tuple(_CACHES.values())


def add_layer_kind(kind: LayerKind) -> None:
    """Register a new layer kind letter (see ``caches.register_cache_layer_class``); never redefines one."""
    if kind.code in _LAYERS:
        raise ValueError(f"layer kind {kind.code!r} is already {_LAYERS[kind.code].class_name}")
    _LAYERS[kind.code] = kind


def add_cache_kind(kind: CacheKind) -> None:
    """Register a new cache name (see ``caches.register_cache_class``); never redefines one."""
    if kind.name in _CACHES:
        raise ValueError(f"cache name {kind.name!r} is already registered")
    _CACHES[kind.name] = kind

