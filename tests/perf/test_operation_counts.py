"""Performance guards that cannot flake: operation counts, never wall-clock time.

The benchmark suite (``make bench``) measures speed as ratios; CI cannot, because shared machines are noisy.
What CI can check exactly is the work done: the number of Python function calls (counted with
``sys.setprofile``), lexer tokens, cache hits and misses, modules imported. Each count is deterministic for a
given input, so a regression -- a per-call string formatted on the hot path, a cache that stopped hitting, a
quadratic loop, a parser rebuilt in strict mode at run time, a heavy import at package import -- fails here
whatever the load of the machine.

Budgets are the measured counts with headroom (about 1.5x) for honest refactoring; linearity checks compare
the increments of the same operation at growing sizes, which must be equal (within 5%; caches warmed by the first sizes make the first step a little cheaper), not merely small.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

# --------------------------------------------------------------------------------------------------------------
# Counting


class Counts:
    """Python-level function calls made while running ``fn``, in total and by function name."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.total = 0
        self.by_name: dict[str, int] = {}

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                self.total += 1
                name = frame.f_code.co_name
                self.by_name[name] = self.by_name.get(name, 0) + 1

        sys.setprofile(profile)
        try:
            self.result = fn()
        finally:
            sys.setprofile(None)


def _increments(counts: list[int]) -> list[int]:
    return [b - a for a, b in zip(counts, counts[1:])]


def _assert_linear(counts: list[int], what: str) -> None:
    """Equal steps of input size must cost equal numbers of calls (within 5%): no hidden quadratic term."""
    steps = _increments(counts)
    assert min(steps) > 0, f"{what}: calls do not grow with the input: {counts}"
    assert max(steps) <= 1.05 * min(steps), f"{what}: calls grow faster than linearly: {counts} (steps {steps})"


# --------------------------------------------------------------------------------------------------------------
# Schema language


@pytest.fixture(scope="module")
def torch_schemas() -> list[str]:
    from _torch_registry import shipped_schemas

    return list(shipped_schemas())


def _schema_tokens(text: str) -> int:
    """Tokens the schema lexer produces for ``text`` (what the parser is fed)."""
    from piece_by_piece_serialize.schema import _transform as _schema_transform

    engine = _schema_transform._engine("\n" in text)
    return sum(1 for _ in engine._tokens(text, [engine.start_state]))


# Python calls per lexer token over the whole torch corpus (the LALR engine, its lexer and our callbacks).
SCHEMA_CALLS_PER_TOKEN = 8  # measured: 5.4 (lark run time: 21.6)


def test_schema_parse_calls_per_token_over_the_torch_corpus(torch_schemas: list[str]) -> None:
    from piece_by_piece_serialize import schema

    schema.parse_schema(torch_schemas[0])  # the parser is built once, outside the count
    tokens = sum(_schema_tokens(s) for s in torch_schemas)
    counts = Counts(lambda: [schema.parse_schema(s) for s in torch_schemas])
    assert len(counts.result) == len(torch_schemas) == 4374
    per_token = counts.total / tokens
    assert per_token <= SCHEMA_CALLS_PER_TOKEN, (
        f"{counts.total} calls for {tokens} tokens ({per_token:.1f} per token) parsing {len(torch_schemas)} schemas"
    )


def test_schema_parse_is_linear_in_the_number_of_arguments() -> None:
    from piece_by_piece_serialize import schema

    def text(k: int) -> str:
        return "ns::op(" + ", ".join(f"Tensor(a{i}!)? x{i}=None" for i in range(k)) + ") -> Tensor"

    schema.parse_schema(text(1))
    sizes = [100, 200, 300, 400]
    calls = [Counts(lambda k=k: schema.parse_schema(text(k))).total for k in sizes]
    tokens = [_schema_tokens(text(k)) for k in sizes]
    _assert_linear(tokens, "schema tokens")
    _assert_linear(calls, "schema parse calls")


def _union_of_futures(k: int) -> str:
    """A Union of ``k`` distinct Futures that torch tries to merge pairwise (none merge: the same family as the
    bench's Union scaling row)."""
    import itertools

    atoms = "int str bool Tensor Device Stream float complex Generator Storage".split()
    members = itertools.islice(itertools.product(atoms, repeat=3), k)
    return "f(Union(" + ", ".join(f"Future(({a}, {b}, {c}))" for a, b, c in members) + ") x) -> ()"


def test_union_member_merging_is_linear_in_the_members() -> None:
    """Union normalisation finds each member's merge partner through an index (Note [Indexed member merging]),
    not by trying the members before it: quadratic before (1.9 as a fitted exponent of time)."""
    from piece_by_piece_serialize import schema

    schema.parse_schema(_union_of_futures(2))
    sizes = [100, 200, 300, 400]
    calls = [Counts(lambda k=k: schema.parse_schema(_union_of_futures(k))).total for k in sizes]
    _assert_linear(calls, "Union parse calls")
    unify = [Counts(lambda k=k: schema.parse_schema(_union_of_futures(k))).by_name.get("_unify", 0) for k in sizes]
    assert unify == [0, 0, 0, 0], unify  # no pair is even tried: every key is different


def test_warm_extract_names_is_one_cache_hit() -> None:
    from piece_by_piece_serialize import schema

    text = "ns::op(Tensor x, Tensor? mask=None, *, int[] dims=[0, 1], float eps=1e-05) -> Tensor"
    schema.extract_names_from_schema(text)
    assert schema._names[text] == ("x", "mask", "dims", "eps")
    counts = Counts(lambda: schema.extract_names_from_schema(text))
    assert counts.result == ["x", "mask", "dims", "eps"]
    assert counts.total <= 2, counts.by_name  # the public function (and the lambda), nothing below it
    assert "parse_schema" not in counts.by_name


# --------------------------------------------------------------------------------------------------------------
# TreeSpec names


def _items_tree(m: int) -> Any:
    # 5 nodes of three kinds per item, so that nothing collapses into a run of leaves
    return [{"a": 0, "b": (1, 2)} for _ in range(m)]


# Python calls per spec node (encode, and decode without the cache)
ENCODE_CALLS_PER_NODE = 8  # measured: 4.8
DECODE_CALLS_PER_NODE = 14  # measured: 9.0 (21.8 before the separator was folded into the tokens, 11.6 before
# the piecewise canonical check)


def test_treespec_name_encode_and_decode_are_linear_in_nodes() -> None:
    pytree = pytest.importorskip("torch.utils._pytree")
    from piece_by_piece_serialize import treespec_name

    limits = treespec_name.DEFAULT_LIMITS
    # build the parsers outside the counts: the one ``_decode`` uses for canonical names too, which another test
    # module may have been the first to build (or not: the counts must not depend on which tests ran before)
    warm_flat, warm_spec = pytree.tree_flatten(_items_tree(1))
    treespec_name._decode(treespec_name.tree_spec_as_name(warm_spec, len(warm_flat)), limits)
    enc, dec, nodes = [], [], []
    for m in (500, 1000, 1500, 2000):  # up to 10,001 nodes
        flat, spec = pytree.tree_flatten(_items_tree(m))
        name = treespec_name.tree_spec_as_name(spec, len(flat))
        enc.append(Counts(lambda: treespec_name.tree_spec_as_name(spec, len(flat))).total)
        decoded = Counts(lambda: treespec_name._decode(name, limits))
        assert decoded.result[1] == spec
        # a canonical name is checked piece by piece while parsing, never re-printed
        assert "print_name" not in decoded.by_name and "tokens" not in decoded.by_name, decoded.by_name
        dec.append(decoded.total)
        nodes.append(spec.num_nodes)
    assert nodes[-1] == 10_001
    _assert_linear(enc, "tree_spec_as_name calls")
    _assert_linear(dec, "tree_spec_from_name (uncached) calls")
    assert enc[-1] / nodes[-1] <= ENCODE_CALLS_PER_NODE, (enc, nodes)
    assert dec[-1] / nodes[-1] <= DECODE_CALLS_PER_NODE, (dec, nodes)


def test_warm_treespec_decode_is_a_cache_hit() -> None:
    pytree = pytest.importorskip("torch.utils._pytree")
    from piece_by_piece_serialize import treespec_name

    flat, spec = pytree.tree_flatten({"input_ids": 1, "mask": (2, 3)})
    name = treespec_name.tree_spec_as_name(spec, len(flat))
    treespec_name.tree_spec_from_name(name)
    counts = Counts(lambda: treespec_name.tree_spec_from_name(name))
    assert counts.result == (3, spec)
    assert counts.total <= 2, counts.by_name  # no parse, no build: one dict lookup


# --------------------------------------------------------------------------------------------------------------
# Hot path: serialize_args + deserialize_args


def _decode_step(n_layers: int) -> tuple[Any, ...]:
    torch = pytest.importorskip("torch")
    cache_utils = pytest.importorskip("transformers.cache_utils")
    cache = cache_utils.DynamicCache()
    for i in range(n_layers):
        cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), i)
    return torch.tensor([[1]]), torch.ones(1, 4, dtype=torch.long), cache


def _hot_call(inputs: tuple[Any, ...], types: list[str]) -> Any:
    from piece_by_piece_serialize import deserialize_args, serialize_args

    return deserialize_args(serialize_args(inputs, None, None), types)


class CallsByKind:
    """Python-level and builtin (C) function calls made while running ``fn``; builtins by name."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.python = 0
        self.builtin: dict[str, int] = {}

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                self.python += 1
            elif event == "c_call":
                self.builtin[arg.__name__] = self.builtin.get(arg.__name__, 0) + 1

        sys.setprofile(profile)
        try:
            self.result = fn()
        finally:
            sys.setprofile(None)

    @property
    def builtin_total(self) -> int:
        return sum(self.builtin.values())


# One serialize_args + deserialize_args of a decode step. Python calls: a fixed number, the same for every
# cache size (steps compiled per type-info string, layers made without their Python constructors: Note
# [deserialization steps] in serialize/_rebuild.py, Note [fast layers] in _caches.py). Builtin calls per layer: len of
# the layer's attributes (a layer holding state nobody registered is refused, not flattened) and 2 list
# appends to flatten; Tensor.dim twice (the rank check), object.__new__ and one append to rebuild.
HOT_PATH_PYTHON_CALLS = 9  # measured: 9 (this test's two helpers included), for 8 to 32 layers
HOT_PATH_BUILTIN_CALLS_PER_LAYER = 7  # measured: 7


def test_hot_path_calls_per_cache_layer() -> None:
    from piece_by_piece_serialize import type_as_str_with_info
    from piece_by_piece_serialize.serialize import _rebuild as serialize  # the compiled steps live there
    from piece_by_piece_serialize.type_info import _parse_small

    python, builtin = [], []
    layers = [8, 16, 24, 32]
    for n in layers:
        inputs = _decode_step(n)
        types = [type_as_str_with_info(a) for a in inputs]
        _hot_call(inputs, types)  # parses the type-info strings and compiles their steps once
        assert set(types) <= set(serialize._STEPS)
        before = _parse_small.cache_info()
        counts = CallsByKind(lambda: _hot_call(inputs, types))
        after = _parse_small.cache_info()
        assert len(counts.result[2].layers) == n
        assert all(layer.keys is t for layer, t in zip(counts.result[2].layers, [lay.keys for lay in inputs[2].layers]))
        # nothing is parsed on the hot path, not even a parse-cache lookup
        assert (after.hits - before.hits, after.misses - before.misses) == (0, 0)
        assert counts.builtin.get("dim") == 2 * n  # every key and value tensor has its rank checked
        python.append(counts.python)
        builtin.append(counts.builtin_total)
    assert len(set(python)) == 1, f"Python calls grow with the number of layers: {python}"
    assert python[0] <= HOT_PATH_PYTHON_CALLS, python
    _assert_linear(builtin, "hot path builtin calls vs cache layers")
    per_layer = (builtin[-1] - builtin[0]) / (layers[-1] - layers[0])
    assert per_layer <= HOT_PATH_BUILTIN_CALLS_PER_LAYER, builtin


def test_hot_path_formats_no_strings() -> None:
    # Error-message strings must only be built on the error path.
    from piece_by_piece_serialize import type_as_str_with_info

    inputs = _decode_step(2)
    types = [type_as_str_with_info(a) for a in inputs]
    _hot_call(inputs, types)
    counts = Counts(lambda: _hot_call(inputs, types))
    assert not {"_argument", "__str__", "__repr__", "describe"} & set(counts.by_name), counts.by_name


# --------------------------------------------------------------------------------------------------------------
# Parsers and imports


def test_runtime_parsers_are_built_once_from_the_generated_tables() -> None:
    # The engines run the tables generated into _lalr/_generated/ (tests/lalr/test_tables.py keeps them current): building
    # them from the grammar with lark would cost a second per process; the type-info engine too, built once.
    from piece_by_piece_serialize.schema import _transform as _schema_transform
    from piece_by_piece_serialize.treespec_name import _transform as _treespec_transform
    from piece_by_piece_serialize.type_info import _transform as _type_info_transform
    from piece_by_piece_serialize import schema

    first = Counts(lambda: schema.parse_schema("a::b(Tensor x) -> Tensor"))
    schema.parse_schema("a::b(\n Tensor x) -> Tensor")
    assert "build_tables" not in first.by_name
    assert _schema_transform._engine(False) is _schema_transform._engine(False)
    assert _schema_transform._engine(True) is _schema_transform._engine(True)
    assert _treespec_transform._engine() is _treespec_transform._engine()
    assert _type_info_transform._engine() is _type_info_transform._engine()
    again = Counts(lambda: schema.parse_schema("a::b(Tensor x) -> Tensor"))
    assert not {"build_parser", "build_tables", "load", "_engine_build"} & set(again.by_name), again.by_name


# Modules a bare ``import piece_by_piece_serialize`` may add to a fresh interpreter (measured: 7).
IMPORT_MODULE_BUDGET = 10


def test_package_import_is_light() -> None:
    code = (
        "import sys; before = set(sys.modules); import piece_by_piece_serialize; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert "piece_by_piece_serialize" in out
    heavy = {m for m in out if m.split(".")[0] in ("torch", "transformers", "lark", "typing", "re", "numpy")}
    assert not heavy, heavy
    assert len(out) <= IMPORT_MODULE_BUDGET, out


# --------------------------------------------------------------------------------------------------------------
# A module behind its operator, on the steady state of a call site


def _site_module() -> Any:
    import torch

    class Layer(torch.nn.Module):
        def forward(self, x: Any, pair: Any, cache: Any = None, flag: bool = True) -> Any:
            cache.update(x[None, None].expand(1, 2, 1, 4), x[None, None].expand(1, 2, 1, 4).clone(), 0)
            return x * 2 + pair[0]

    return Layer()


# Python calls of one wrapped call whose structure was seen before (Note [call sites] in custom_op/_sites.py), with
# a DynamicCache: a fixed number whatever the number of layers (the cache matchers check a layer without a Python
# call: Note [cache matchers]), and no description. Measured: 50 (the kernel's route: gradients are on).
SITE_PYTHON_CALLS = 50


def test_a_call_site_describes_nothing_on_its_steady_state() -> None:
    import torch

    cache_utils = pytest.importorskip("transformers.cache_utils")
    from piece_by_piece_serialize import as_custom_op

    python = []
    layers = [8, 16, 24, 32]
    for n in layers:
        wrapped = as_custom_op(_site_module(), f"pbp_perf::site{n}")  # one site each
        cache = cache_utils.DynamicCache()
        for i in range(n):
            cache.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), i)
        x, pair = torch.ones(4), (torch.ones(4), torch.ones(4))
        for _ in range(2):  # the first call describes and makes the site; the second is the steady state too
            wrapped(x, pair, cache, flag=True)
            cache.layers[0].crop(-1)
        counts = Counts(lambda: wrapped(x, pair, cache, flag=True))
        cache.layers[0].crop(-1)
        described = {"describe_call", "describe", "flatten_values", "flat_outputs", "_kind_and_flat", "bind",
                     "type_as_str_with_info", "tree_spec_as_name", "of_layers", "_argument", "__str__", "__repr__"}  # fmt: skip
        assert not described & set(counts.by_name), {k: v for k, v in counts.by_name.items() if k in described}
        python.append(counts.total)
        wrapped._pbp_op.close()
    assert len(set(python)) == 1, f"Python calls grow with the number of layers: {python}"
    assert python[0] <= SITE_PYTHON_CALLS, python
