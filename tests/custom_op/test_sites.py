"""Call sites (Note [call sites] in custom_op/_sites.py, Note [cache matchers] in serialize/_cache_match.py).

A matcher compiled from one value must accept another value exactly when describing that value in full gives the
same type-info string and the same constants, and then give the very tensors the full route gives; it must never
accept what the full route would refuse. Checked here over every pair of a set of values that differ in one
thing each (a class, a length, a key order, a constant, a layer kind, an offloaded layer, unknown state), then
through the wrapper: each call goes to the operator with the key the full description gives.
"""

from __future__ import annotations

import itertools
import math
from collections import namedtuple
from typing import Any

import pytest
import torch

from piece_by_piece_serialize import as_custom_op
from piece_by_piece_serialize.custom_op import CustomOpError
from piece_by_piece_serialize.custom_op._calls import describe_call, flatten_values
from piece_by_piece_serialize.custom_op._sites import compile_values

cache_utils = pytest.importorskip("transformers.cache_utils")

WHAT = "op: positional argument 0"
Pair = namedtuple("Pair", "a b")
_names = (f"pbp_sites::m{i}" for i in itertools.count())


def t(*shape: int) -> torch.Tensor:
    return torch.randn(shape or (2, 3))


def _dynamic(n: int, replicate: bool = True) -> Any:
    cache = cache_utils.DynamicCache()
    for i in range(n):
        cache.update(t(1, 2, 3, 4), t(1, 2, 3, 4), i)
    if not replicate:
        cache.layer_class_to_replicate = None
    return cache


def _sliding(window: int) -> Any:
    cache = cache_utils.DynamicCache()
    cache.layers = [cache_utils.DynamicLayer(), cache_utils.DynamicSlidingWindowLayer(sliding_window=window)]
    for i in range(2):
        cache.update(t(1, 2, 2, 4), t(1, 2, 2, 4), i)
    return cache


def _with_empty_layer() -> Any:
    cache = _dynamic(2)
    cache.layers.append(cache_utils.DynamicLayer())
    return cache


def _offloaded() -> Any:
    cache = _dynamic(2)
    cache.layers[1].device = torch.device("meta")  # its tensors are on the CPU: describe refuses it
    return cache


def _unknown_state() -> Any:
    cache = _dynamic(2)
    cache.layers[0].other_state = 1
    return cache


def _linear(states: int) -> Any:
    cache = cache_utils.DynamicCache()
    cache.layers = [cache_utils.LinearAttentionLayer(number_of_states=states), cache_utils.DynamicLayer()]
    cache.layers[0].update_recurrent_state(t(1, 2, 4, 4), state_idx=states - 1)
    cache.layers[1].update(t(1, 2, 3, 4), t(1, 2, 3, 4))
    cache.layer_class_to_replicate = None
    return cache


def _encoder_decoder(n: int) -> Any:
    return cache_utils.EncoderDecoderCache(_dynamic(n), _dynamic(1))


def _values() -> dict[str, Any]:
    x = t()
    return {
        "tensor": x,
        "parameter": torch.nn.Parameter(t()),
        "none": None,
        "true": True,
        "one": 1,
        "one float": 1.0,
        "zero float": 0.0,
        "minus zero": -0.0,
        "nan": math.nan,
        "false": False,
        "zero": 0,
        "two": 2,
        "str a": "a",
        "str b": "b",
        "tuple 2": (t(), t()),
        "tuple 3": (t(), t(), t()),
        "tuple of a parameter": (torch.nn.Parameter(t()), t()),
        "tuple with an int": (t(), 1),
        "tuple with another int": (t(), 2),
        "tuple with None": (t(), None),
        "list 2": [t(), t()],
        "list 1": [t()],
        "dict ab": {"a": t(), "b": t()},
        "dict ba": {"b": t(), "a": t()},
        "dict a": {"a": t()},
        "dict with an int": {"a": t(), "b": 1},
        "namedtuple": Pair(t(), t()),
        "nested": {"x": (t(), [t(), 3]), "y": None},
        "size": torch.Size([2, 3]),
        "dynamic 2": _dynamic(2),
        "dynamic 3": _dynamic(3),
        "dynamic 2, no replication": _dynamic(2, replicate=False),
        "dynamic with an empty layer": _with_empty_layer(),
        "empty dynamic": cache_utils.DynamicCache(),
        "sliding 4": _sliding(4),
        "sliding 5": _sliding(5),
        "offloaded layer": _offloaded(),
        "layer with unknown state": _unknown_state(),
        "linear 1 state": _linear(1),
        "linear 2 states": _linear(2),
        "encoder-decoder 2": _encoder_decoder(2),
        "encoder-decoder 3": _encoder_decoder(3),
    }


def _full(value: Any) -> tuple[Any, ...] | BaseException:
    """The full route's description of one value: type-info string, constants by class and repr, tensors."""
    try:
        kinds, tensors, constants, n_flat, _ = flatten_values([value], [WHAT])
    except (TypeError, ValueError) as exc:
        return exc
    return kinds, sorted((i, type(c), repr(c)) for i, c in constants.items()), n_flat, tensors


VALUES = _values()


@pytest.mark.parametrize("recorded", list(VALUES))
def test_a_matcher_accepts_exactly_what_describes_the_same(recorded: str) -> None:
    full = _full(VALUES[recorded])
    if isinstance(full, BaseException):
        return  # a value the full route refuses never makes a site
    (matcher,) = compile_values([VALUES[recorded]], full[0], [WHAT])
    for name, value in VALUES.items():
        want = _full(value)
        out: list[Any] = []
        try:
            accepted = matcher(value, out)
        except (TypeError, ValueError) as exc:  # only the full route's own error for that value
            assert isinstance(want, BaseException) and str(exc) == str(want), (recorded, name)
            continue
        if isinstance(want, BaseException):
            assert not accepted and not out, (recorded, name)
            continue
        same = want[:3] == full[:3]
        assert accepted == same, (recorded, name)
        if accepted:
            assert len(out) == len(want[3]) and all(a is b for a, b in zip(out, want[3], strict=True)), (recorded, name)
        else:
            assert out == [], (recorded, name)


def test_a_cache_matched_again_after_it_changed() -> None:
    cache = _dynamic(2)
    full = _full(cache)
    assert not isinstance(full, BaseException)
    (matcher,) = compile_values([cache], full[0], [WHAT])
    cache.update(t(1, 2, 1, 4), t(1, 2, 1, 4), 0)  # new tensors, same structure
    out: list[Any] = []
    assert matcher(cache, out) and out == [cache.layers[0].keys, cache.layers[0].values, cache.layers[1].keys, cache.layers[1].values]
    cache.layers[1].device = torch.device("meta")
    assert not matcher(cache, out := [])
    with pytest.raises(TypeError, match="layer 1 .DynamicLayer.: device is meta"):
        flatten_values([cache], [WHAT])


class Many(torch.nn.Module):
    def forward(self, x, pair, cache=None, flag=True, scale=1.0):
        if cache is not None:
            new = torch.zeros(1, 2, 1, 4) + x.sum()
            cache.update(new, new, 0)
        y = x * scale if flag else x - scale
        return y + pair[0] - pair[1]


def test_every_call_goes_to_the_operator_with_the_key_of_its_full_description() -> None:
    module = Many()
    wrapped = as_custom_op(module, next(_names))
    op = wrapped._pbp_op
    seen: list[str] = []
    run = op.eager  # the real kernel's work, on either route (Note [plain eager calls])
    op.eager = lambda tensors, rest: seen.append(rest[-1]) or run(tensors, rest)
    x = t(4, 3)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((x, (t(4, 3), t(4, 3))), {}),
        ((x, (t(4, 3), t(4, 3))), {"flag": False}),
        ((x, (t(4, 3), t(4, 3))), {"flag": True}),
        ((x, (t(4, 3), t(4, 3))), {"scale": -0.0}),
        ((x, (t(4, 3), t(4, 3))), {"scale": 0.0}),
        ((x, (t(4, 3), t(4, 3))), {"scale": 0}),
        ((x, [t(4, 3), t(4, 3)]), {}),
        ((x, (t(4, 3), t(4, 3))), {"cache": _dynamic(1)}),
        ((x, (t(4, 3), t(4, 3))), {"cache": _dynamic(2)}),
        ((x, (t(4, 3), t(4, 3))), {"cache": _dynamic(2)}),
        ((x, (t(4, 3), t(4, 3)), None, False), {}),
        ((x, (t(4, 3), t(4, 3)), None, 0), {}),
        ((x, (t(4, 3), t(4, 3))), {"flag": False, "scale": 2.0}),
        ((x, (t(4, 3), t(4, 3))), {"scale": 2.0, "flag": False}),
    ]
    first: set[str] = set()
    for args, kwargs in calls * 2:  # the second round is all sites
        theirs = make_copy((args, kwargs))
        want = module(*theirs[0], **theirs[1])
        got = wrapped(*args, **kwargs)
        assert torch.equal(got, want)
        key = describe_call(op.qualname, args, kwargs)[2]
        # a cache the module touches one layer of is carried cut after its first call (Note [cut calls])
        cut = op.calls[key].sliced
        assert seen[-1] == (key if cut is None or key not in first else cut[1])
        first.add(key)
        if "cache" in kwargs:
            assert torch.equal(kwargs["cache"].layers[0].keys, theirs[1]["cache"].layers[0].keys)  # written back
    assert len(op.calls) == len({seen_key for seen_key in seen})


def make_copy(value: Any) -> Any:
    from piece_by_piece_serialize import make_copy as copy

    return copy(value)


class Sometimes(torch.nn.Module):
    def forward(self, x, y):
        if bool(y.sum() > 10):
            y.add_(1)
        return x + y


def test_a_site_call_is_checked_as_the_first_call_is() -> None:
    wrapped = as_custom_op(Sometimes(), next(_names))
    wrapped(torch.ones(2), torch.ones(2))
    wrapped(torch.ones(2), torch.ones(2))
    with pytest.raises(CustomOpError, match=r"changed input tensor\(s\) \[1\] of the call in place"):
        wrapped(torch.ones(2), torch.full((2,), 6.0))
    with pytest.raises(TypeError, match="missing a required argument: .y."):  # a bad call is refused as before
        wrapped(torch.ones(2))


class OneLayer(torch.nn.Module):
    """Writes layer 1 of its cache only: its calls carry that layer alone (Note [cut calls])."""

    def forward(self, x, cache):
        keys, _ = cache.update(x, x, 1)
        return keys.sum(-2)


def test_a_cut_cache_is_matched_on_its_carried_layers_only() -> None:
    wrapped = as_custom_op(OneLayer(), next(_names))
    op = wrapped._pbp_op
    wrapped(t(1, 2, 1, 4), _dynamic(3))  # the first call learns the cut
    x, cache = t(1, 2, 1, 4), _dynamic(3)
    found = op.sites.match((x, cache), {})
    assert found is not None and op.calls[describe_call(op.qualname, (x, cache), {})[2]].sliced is not None
    assert [id(v) for v in found[1]] == [id(x), id(cache.layers[1].keys), id(cache.layers[1].values)]
    cache.layers[0].device = torch.device("meta")  # a layer the call does not carry is not read
    assert op.sites.match((x, cache), {}) is not None
    cache.layers[1].device = torch.device("meta")  # the carried one is, as describing it reads it
    assert op.sites.match((x, cache), {}) is None
    assert op.sites.match((x, _dynamic(2)), {}) is None  # another number of layers
    cache = _dynamic(3)
    cache.layers[1] = cache_utils.DynamicSlidingWindowLayer(sliding_window=4)  # another layer kind, not populated
    assert op.sites.match((x, cache), {}) is None
