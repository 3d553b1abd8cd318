"""The steady state of a call: a structure seen before, matched and flattened without describing it again.

Note [call sites]
~~~~~~~~~~~~~~~~~
:func:`._calls.describe_call` describes every argument from scratch (its type-info string, a TreeSpec name, a
cache layer by layer, the key), and a module behind an operator is called with the same structure again and
again. So each owner of calls (an operator's wrapper, a runnable program) keeps the structures it has seen as
*sites*: per value, a matcher compiled once from its first description, which for a later value either appends
the very items :func:`._calls.flatten_values` would give and says yes -- only when describing that value would
give the same type-info string and the same constants without raising -- or appends nothing and says no. A call
whose every value matches is the site's: its :class:`~._calls.Call`, its key and its tensors, with no string
built and no description made. Any other call takes the full route (:func:`._calls.describe_call`), which checks
everything and raises the errors that name the argument, and becomes a site in turn. The kernel matches its
module's output and the caches after the call the same way against the output structure the call learned.

What each matcher reads, which is what the description reads for that form:

* ``Tensor``: ``isinstance(value, torch.Tensor)``; ``None``: identity;
* a ``bool``/``int``/``float``: its exact class and value (``repr`` for a float, so that ``-0.0`` is not ``0.0``);
* a ``list`` or a plain ``tuple`` of tensors, a ``dict`` of tensors: the exact class, the length, the keys in their
  order, that the items are tensors (and, in a tuple, of no class pytree opens);
* a cache: :func:`..serialize._cache_match.matcher` (Note [cache matchers]);
* anything else: its own full description (type-info string and flat items), compared with the recorded one --
  no faster than before, but only for that value.

Invariants: sites are bounded per owner (:data:`MAX_SITES` per argument count and keyword names); a site holds no
tensor, only the compiled checks, the call and its key.

Imports: :mod:`..serialize` (the cache matchers, the flattening helpers of :mod:`._calls`) and :mod:`..type_info`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..serialize import _caches
from ..serialize._cache_match import cut_matcher
from ..serialize._cache_match import matcher as cache_matcher
from ..type_info import NoneInfo, ScalarInfo, TensorDictInfo, TensorInfo, TensorListInfo, _parse_cached
from ._calls import Call, kind_and_flat

# ``match(value, out) -> bool``: appends the value's tensors to ``out`` and says yes, or appends nothing
Matcher = Callable[[Any, list[Any]], bool]

#: Sites kept per argument count and keyword names: a call site sees one or two structures; a model calling one
#: module with ever new constants (a step counter) takes the full route past this many.
MAX_SITES = 16

_Tensor: Any = None  # torch.Tensor, bound on the first compile (torch is imported by then)


class Site:
    """One call structure of an owner: its matchers, its :class:`Call`, its key."""

    __slots__ = ("matchers", "call", "key")

    def __init__(self, matchers: list[Matcher], call: Call, key: str) -> None:
        self.matchers, self.call, self.key = matchers, call, key


class Sites:
    """The call structures an owner has seen (Note [call sites])."""

    def __init__(self, name: str) -> None:
        self.name = name  # names the owner's arguments in the errors a matcher's description raises
        self.by_shape: dict[tuple[Any, ...], list[Site]] = {}

    def match(self, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Site, list[Any]] | None:
        """The site of this call and its tensors, or ``None`` (then :meth:`add` after the full route)."""
        sites = self.by_shape.get((len(args), *kwargs))
        if sites is None:
            return None
        values = (*args, *kwargs.values())
        for i, site in enumerate(sites):
            out: list[Any] = []
            for m, v in zip(site.matchers, values):  # noqa: B905 - one matcher per value (match_values, inlined)
                if m is _tensor:  # the commonest value, its matcher inlined: a Python call is most of its cost
                    if not isinstance(v, _Tensor):
                        break
                    out.append(v)
                elif not m(v, out):
                    break
            else:
                if i:  # the last structure matched is tried first (a prefill's site is not tried on every decode step)
                    sites.insert(0, sites.pop(i))
                return site, out
        return None

    def add(self, args: Sequence[Any], kwargs: dict[str, Any], call: Call, key: str, site: Site | None = None) -> None:
        """Remember the structure of a call the full route described as ``call`` and ``key`` (or ``site``, compiled
        by :meth:`compile` before the call)."""
        sites = self.by_shape.setdefault((len(args), *kwargs), [])
        if len(sites) < MAX_SITES:
            sites.append(site if site is not None else self.compile(args, kwargs, call, key))

    def compile(self, args: Sequence[Any], kwargs: dict[str, Any], call: Call, key: str, cut: Call | None = None,
                base: Site | None = None) -> Site:  # fmt: skip
        """The site of a call described as ``call``; with ``cut``, the site of its cut twin (Note [cut calls] in
        :mod:`._slices`), whose cut caches are matched from the twin's description (``base``, the site of
        ``call`` compiled before, gives the other arguments' matchers without reading the values again)."""
        if base is None:
            whats = [f"{self.name}: positional argument {i}" for i in range(len(args))] + [f"{self.name}: argument {k!r}" for k in kwargs]
            base = Site(compile_values((*args, *kwargs.values()), call.kinds, whats), call, key)
        if cut is None:
            return base
        matchers = list(base.matchers)
        for arg, n_layers, positions in cut.slices:
            info = _parse_cached(cut.kinds[arg])
            # a matcher of its own: it appends nothing when it says no, as a site's matchers must
            matchers[arg] = cut_matcher(info, n_layers, positions, f"{self.name}: argument {arg}")  # type: ignore[arg-type]  # a cut kind is a CacheInfo
        return Site(matchers, cut, key)


def match_values(matchers: Sequence[Matcher], values: Sequence[Any]) -> list[Any] | None:
    """The tensors of ``values`` if every value matches its matcher, else ``None``."""
    out: list[Any] = []
    for m, v in zip(matchers, values):  # noqa: B905 - one matcher per value; strict= doubles zip's cost per call
        if not m(v, out):
            return None
    return out


def compile_values(values: Sequence[Any], kinds: Sequence[str], whats: Sequence[str]) -> list[Matcher]:
    """One matcher per value, from the value and the type-info string its full description gave."""
    global _Tensor
    if _Tensor is None:
        import torch

        _Tensor = torch.Tensor
    return [_compile(v, k, w) for v, k, w in zip(values, kinds, whats, strict=True)]


def _compile(value: Any, kind: str, what: str) -> Matcher:
    info = _parse_cached(kind)
    cls = type(info)
    if cls is TensorInfo:
        return _tensor
    if cls is NoneInfo:
        return _none
    if cls is ScalarInfo:
        return _scalar(value)
    if _caches.is_cache(value):
        info = _caches.describe(value, what)
        check, tensors_only = cache_matcher(info, type(value), what)
        return _cache(check, None if tensors_only else _pattern(_caches.flatten(value, info)))
    plain = _Tensor
    if cls is TensorListInfo and type(value) is list:
        return _sequence(list, len(value), None)
    if type(value) is tuple and all(isinstance(x, plain) for x in value):
        return _sequence(tuple, len(value), _tree_nodes())
    if cls is TensorDictInfo and type(value) is dict:
        return _tensor_dict(tuple(value))
    return _described(value, kind, what)


def _tensor(value: Any, out: list[Any]) -> bool:
    if isinstance(value, _Tensor):
        out.append(value)
        return True
    return False


def _none(value: Any, out: list[Any]) -> bool:
    return value is None


def _scalar(recorded: Any) -> Matcher:
    kind = type(recorded)
    if kind is float:
        text = repr(recorded)  # the key spells it so: -0.0 and 0.0 are two structures, nan one

        def same_float(value: Any, out: list[Any]) -> bool:
            return type(value) is float and repr(value) == text

        return same_float

    def same(value: Any, out: list[Any]) -> bool:
        return type(value) is kind and value == recorded

    return same


def _tree_nodes() -> Any:
    from torch.utils._pytree import SUPPORTED_NODES

    return SUPPORTED_NODES


def _sequence(kind: Any, n: int, nodes: Any) -> Matcher:
    """A list of tensors (``list__N``), or a plain tuple of tensors (a TreeSpec name of ``n`` leaves), where a
    tensor whose class pytree opens (a registered subclass) would not be a leaf: ``nodes`` is pytree's registry."""

    def match(value: Any, out: list[Any]) -> bool:
        if type(value) is not kind or len(value) != n:
            return False
        for x in value:
            if not isinstance(x, _Tensor) or (nodes is not None and type(x) in nodes):
                return False
        out.extend(value)
        return True

    return match


def _tensor_dict(keys: tuple[Any, ...]) -> Matcher:
    n = len(keys)

    def match(value: Any, out: list[Any]) -> bool:
        if type(value) is not dict or len(value) != n or tuple(value) != keys:
            return False
        items = list(value.values())
        for x in items:
            if not isinstance(x, _Tensor):
                return False
        out.extend(items)
        return True

    return match


def _cache(check: Callable[[Any, list[Any]], bool], pattern: list[Any] | None) -> Matcher:
    """A cache: its matcher (Note [cache matchers]); where its items may hold ``None`` (an empty entry of a
    registered list, a constant of the call), they are compared with the recorded ones as :func:`_described` does."""
    if pattern is None:

        def tensors(value: Any, out: list[Any]) -> bool:
            start = len(out)
            if check(value, out):
                return True
            del out[start:]
            return False

        return tensors

    def match(value: Any, out: list[Any]) -> bool:
        items: list[Any] = []
        return check(value, items) and _same_items(items, pattern, out)

    return match


def _pattern(flat: Sequence[Any]) -> list[Any]:
    """What a value's flat items must be: a tensor (``None``) or a constant (its class and ``repr``)."""
    return [None if isinstance(x, _Tensor) else (type(x), repr(x)) for x in flat]


def _same_items(items: Sequence[Any], pattern: list[Any], out: list[Any]) -> bool:
    """Whether ``items`` fit ``pattern``; if so their tensors are appended to ``out``."""
    if len(items) != len(pattern):
        return False
    tensors = []
    for x, p in zip(items, pattern):  # noqa: B905 - lengths compared above
        if p is None:
            if not isinstance(x, _Tensor):
                return False
            tensors.append(x)
        elif isinstance(x, _Tensor) or type(x) is not p[0] or repr(x) != p[1]:
            return False
    out.extend(tensors)
    return True


def _described(recorded: Any, kind: str, what: str) -> Matcher:
    """Any other value: described again in full and compared, its constants included (by class and ``repr``)."""
    pattern = _pattern(kind_and_flat(recorded, what)[1])

    def match(value: Any, out: list[Any]) -> bool:
        again, items = kind_and_flat(value, what)
        return again == kind and _same_items(items, pattern, out)

    return match
