"""A call's structure: what a call is made of besides its tensors, and the way back from flat outputs.

Everything that goes through a flat list of tensors and comes back as the caller's objects uses this
module: the wrapper of :mod:`piece_by_piece_serialize.custom_op` around its operator, and the export layer
around an exported program that takes and returns flat tensors. Both describe a call the same way (Note
[call keys] in the package docstring), and both finish it the same way: rebuild the output, write the
caches back into the caller's objects (Note [write back]), put the caller's own cache where the output
held it.

Invariants: nothing here holds state between calls; a description is plain data (strings, scalars, tuples),
so it can be compared, printed and stored; every refusal is a :class:`CustomOpError` naming the argument.

Imports: :mod:`..serialize` and :mod:`..type_info`; torch on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..serialize import OpaqueLeafError, _cache_slice, _caches, deserialize_args, serialize_args, type_as_str_with_info
from ..type_info import TreeWithCachesInfo, _parse_cached
from ._error import CustomOpError
from ._shapes import Rule


@dataclass
class Call:
    """The structure of one kind of call (Note [call keys]) and what the eager calls taught about it."""

    kinds: tuple[str, ...]  # type-info string of each argument: positional ones, then keyword ones
    n_positional: int
    keywords: tuple[str, ...]
    constants: dict[int, Any]  # flat index -> non-tensor item
    n_flat: int
    caches: tuple[int, ...]  # which arguments are caches (written back)
    cache_tensors: frozenset[int]  # which of the call's tensors belong to them
    out_kinds: tuple[str, ...] | None = None  # the output's type-info string, then each cache's after the call
    out_constants: dict[int, Any] = field(default_factory=dict)
    out_n_flat: int = 0
    out_aliases: tuple[tuple[Any, int], ...] = ()  # where the output holds cache argument i itself (Note [write back])
    out_dtypes: tuple[Any, ...] = ()
    out_devices: tuple[Any, ...] = ()
    shapes: list[tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]] = field(default_factory=list)
    rules: list[list[Rule]] | None = None
    # Note [cache slices]: the caches this call carries cut, as (argument, its number of layers, the positions
    # carried); the argument's kind then describes the carried layers only
    slices: tuple[tuple[int, int, tuple[int, ...]], ...] = ()
    owner: str = ""  # the operator, named by the spare layers' errors
    # of a call carrying its caches whole: the call carrying only the layers its first call touched, its key, and
    # which of this call's tensors it takes; ``probed`` once the touches were watched
    sliced: tuple[Call, str, tuple[int, ...]] | None = field(default=None, repr=False)
    probed: bool = False
    spare: dict[int, list[Any]] = field(default_factory=dict, repr=False, compare=False)

    def learn_outputs(self, kinds: tuple[str, ...], constants: dict[int, Any], n_flat: int, output: Any, caches: Sequence[Any]) -> None:
        """Keep the structure of the first output seen for this call structure."""
        self.out_kinds, self.out_constants, self.out_n_flat = kinds, constants, n_flat
        self.out_aliases = aliases(output, caches)


def _scalar_ok(x: Any) -> bool:
    return x is None or type(x) in (bool, int, float, str)


def _split(flat: Sequence[Any], tensors: list[Any], constants: dict[int, Any], offset: int, what: str) -> None:
    """Sort the flat items of one value into tensors and constants (Note [call keys])."""
    import torch

    for i, item in enumerate(flat, offset):
        if isinstance(item, torch.Tensor):
            tensors.append(item)
        elif _scalar_ok(item):
            constants[i] = item
        elif isinstance(item, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise CustomOpError(
                f"{what} holds a symbolic {type(item).__name__[3:].lower()}; a custom operator would freeze it to one "
                "value: pass it as a tensor"
            )
        else:
            raise CustomOpError(f"{what} holds a {type(item).__qualname__}, which a custom operator cannot carry")


def kind_and_flat(value: Any, what: str) -> tuple[str, Sequence[Any]]:
    """The type-info string of ``value`` and its flat items; a cache is described once for both."""
    import torch

    if _caches.is_cache(value):
        info = _caches.describe(value, what)
        return str(info), _caches.flatten(value, info)
    try:
        flat = serialize_args((value,), None, None)  # type: ignore[arg-type]  # schema=None is documented; the annotation is the original's
    except OpaqueLeafError as exc:  # an object pytree does not open: said in terms of this call's argument
        raise CustomOpError(f"{what}{' at ' + exc.path if exc.path else ''} holds a {exc.leaf_type.__qualname__}, which a "
                            f"custom operator cannot carry; {exc.how}") from None
    return type_as_str_with_info(value), (flat,) if isinstance(flat, torch.Tensor) else flat


def flatten_values(values: Sequence[Any], whats: Sequence[str]) -> tuple[tuple[str, ...], list[Any], dict[int, Any], int, list[int]]:
    """Each value's type-info string, then the tensors and constants of all of them (Note [call keys]), the
    number of flat items, and how many tensors there are after each value."""
    kinds = []
    tensors: list[Any] = []
    constants: dict[int, Any] = {}
    ends: list[int] = []
    n_flat = 0
    for value, what in zip(values, whats):  # noqa: B905 - one description per value; strict= doubles zip's cost per call
        kind, flat = kind_and_flat(value, what)
        kinds.append(kind)
        _split(flat, tensors, constants, n_flat, what)
        n_flat += len(flat)
        ends.append(len(tensors))
    return tuple(kinds), tensors, constants, n_flat, ends


def describe_call(op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Call, list[Any], str]:
    """The call's structure, its tensors, and its key (Note [call keys]); ``op`` names it in errors."""
    values = [*args, *kwargs.values()]
    whats = [f"{op}: positional argument {i}" for i in range(len(args))] + [f"{op}: argument {k!r}" for k in kwargs]
    kinds, tensors, constants, n_flat, ends = flatten_values(values, whats)
    caches: list[int] = []
    cache_tensors: list[int] = []
    for i, (value, kind) in enumerate(zip(values, kinds)):  # noqa: B905 - a kind per value
        if _caches.is_written_back(value):  # a cache, or a KVSharingDict (Note [shared arguments] in serialize._kv_sharing)
            caches.append(i)
            cache_tensors.extend(range(ends[i - 1] if i else 0, ends[i]))
        elif isinstance(_parse_cached(kind), TreeWithCachesInfo):
            raise CustomOpError(
                f"{whats[i]} holds a cache inside a container; pass the cache as an argument of its own so that "
                "its updates can be written back (Note [write back] in piece_by_piece_serialize.custom_op)"
            )
    call = Call(kinds, len(args), tuple(kwargs), constants, n_flat, tuple(caches), frozenset(cache_tensors))
    return call, tensors, key_of(call.kinds, call.keywords, constants)


def difference(expected: Call, got: Call) -> str:
    """What differs between the structure of the example's call and another's, said of the first argument it
    concerns (```scale` was None in the example, here a Tensor``)."""
    if (expected.n_positional, expected.keywords) != (got.n_positional, got.keywords):
        return (
            f"the example passed {expected.n_positional} positional arguments and the keywords {list(expected.keywords)}, "
            f"this call {got.n_positional} and {list(got.keywords)}"
        )
    names = [f"positional argument {i}" for i in range(expected.n_positional)] + [f"`{k}`" for k in expected.keywords]
    for name, a, b in zip(names, expected.kinds, got.kinds, strict=True):
        if a != b:
            return f"{name} was {_said(a)} in the example, here {_said(b)}"
    changed = sorted(i for i in {*expected.constants, *got.constants} if expected.constants.get(i) != got.constants.get(i))
    if changed:
        i = changed[0]
        return f"a scalar of the call was {expected.constants.get(i)!r} in the example, here {got.constants.get(i)!r} (scalars are constants of the program)"
    return "the same arguments"


def _said(kind: str) -> str:
    from ..type_info import pretty_type_info

    return "None" if kind == "None" else f"a {pretty_type_info(kind)}"


def merge(tensors: Sequence[Any], constants: dict[int, Any], n_flat: int) -> list[Any]:
    """The flat list of a value: its tensors in order, its constants at their places."""
    if len(tensors) + len(constants) != n_flat:
        raise CustomOpError(f"{len(tensors)} tensors and {len(constants)} constants for a call of {n_flat} flat items")
    flat = list(tensors)
    for i in sorted(constants):  # in increasing order, each constant lands at its final place (list.insert is C)
        flat.insert(i, constants[i])
    return flat


def key_of(kinds: Sequence[str], keywords: Sequence[str], constants: dict[int, Any], slices: tuple[Any, ...] = ()) -> str:
    """The key of a call structure (Note [call keys]); a call carrying cut caches names them too."""
    base = (tuple(kinds), tuple(keywords), tuple(sorted(constants.items())))
    return repr((*base, slices) if slices else base)


def spare_of(call: Call, arg: int) -> list[Any]:
    """The spare layers a cut cache argument of ``call`` grows among (Note [cache slices]), made once per call."""
    spare = call.spare.get(arg)
    if spare is None:
        n, positions = next((n, p) for a, n, p in call.slices if a == arg)
        spare = call.spare[arg] = _cache_slice.spares(n, positions, call.owner or "a custom operator")
    return spare


def rebuild_arguments(call: Call, tensors: Sequence[Any]) -> tuple[Sequence[Any], dict[str, Any]]:
    """The arguments of a call of structure ``call`` made of ``tensors`` (fresh objects; caches rebuilt, a cut
    one grown back to its length among spare layers: Note [cache slices])."""
    values = deserialize_args(merge(tensors, call.constants, call.n_flat) if call.constants else tensors, call.kinds)  # type: ignore[arg-type]  # a tuple of strings is accepted
    for arg, _, positions in call.slices:
        _cache_slice.grow(values[arg], positions, spare_of(call, arg))
    kwargs = dict(zip(call.keywords, values[call.n_positional :]))  # noqa: B905 - one value per keyword; strict= doubles zip's cost per call
    return values[: call.n_positional], kwargs


def caches_after(call: Call, given: Sequence[Any]) -> list[Any]:
    """The cache arguments of a call after it, each cut cache cut again to the layers it carries (Note [cache
    slices]); ``given`` are the arguments as :func:`rebuild_arguments` made them."""
    for arg, _, positions in call.slices:
        _cache_slice.cut(given[arg], positions, spare_of(call, arg), call.owner or "a custom operator")
    return [given[i] for i in call.caches]


def carried_caches(call: Call, given: Sequence[Any]) -> list[Any]:
    """The cache arguments of a call as the operator carries them, the caller's ``given`` objects left as they are:
    :func:`caches_after` without cutting them, a cut cache as a new object of its carried layers."""
    caches = [given[i] for i in call.caches]
    for arg, _, positions in call.slices:
        k = call.caches.index(arg)
        caches[k] = _cache_slice.cut_copy(caches[k], positions)
    return caches


def flat_outputs(name: str, output: Any, caches: Sequence[Any]) -> tuple[tuple[str, ...], list[Any], dict[int, Any], int]:
    """What a call returns through a flat list: the output, then each cache argument as it is after the call."""
    whats = [f"{name}: the output"] + [f"{name}: cache argument {i} after the call" for i in range(len(caches))]
    kinds, tensors, constants, n_flat, _ = flatten_values((output, *caches), whats)
    return kinds, tensors, constants, n_flat


def finish_call(call: Call, out: Sequence[Any], given: Sequence[Any], values: Sequence[Any] | None = None) -> Any:
    """The caller's output of a call of structure ``call`` whose flat outputs are ``out``.

    ``given`` are the call's arguments (positional, then keyword values) as the caller passed them; ``values``,
    if known, are the output and the caches already rebuilt (Note [eager results]). The caches the caller passed
    are written back (Note [write back]) and the output holds the caller's own cache where the module's held the
    one it was given.
    """
    if call.out_kinds is None:  # pragma: no cover - the kernels fill it or raise
        raise CustomOpError("the operator returned without an output structure")
    if values is None:
        values = deserialize_args(merge(out, call.out_constants, call.out_n_flat), list(call.out_kinds))
    for i, new in zip(call.caches, values[1:]):  # noqa: B905 - a new state per cache; strict= doubles zip's cost per call
        for arg, _, positions in call.slices:
            if arg == i:
                _cache_slice.write_back_layers(given[i], new, positions)
                break
        else:
            _caches.write_back(given[i], new)
    output = values[0]
    for where, i in call.out_aliases:
        output = _put(output, where, given[call.caches[i]])
    return output


def aliases(output: Any, caches: Sequence[Any]) -> tuple[tuple[Any, int], ...]:
    """Where ``output`` is, or directly holds, one of the cache arguments (a layer returning the cache it was
    given, a ModelOutput's ``cache``): ``(None, i)`` or ``((key or index), i)``, one level deep."""
    found: list[tuple[Any, int]] = []
    for i, cache in enumerate(caches):
        if output is cache:
            found.append((None, i))
        elif isinstance(output, dict):  # ModelOutput is an OrderedDict
            found.extend(((k,), i) for k, v in output.items() if v is cache)
        elif isinstance(output, (list, tuple)):
            found.extend(((j,), i) for j, v in enumerate(output) if v is cache)
    return tuple(found)


def _put(output: Any, where: Any, cache: Any) -> Any:
    """``output`` with the caller's own cache object at ``where`` (the rebuilt one holds the same state)."""
    if where is None:
        return cache
    (k,) = where
    if isinstance(output, dict):
        output[k] = cache  # a ModelOutput sets the attribute too
        return output
    if isinstance(output, list):
        output[k] = cache
        return output
    items = list(output)
    items[k] = cache
    return output._make(items) if hasattr(output, "_make") else type(output)(items)
