"""A submodule behind a custom operator: the job the rest of the library exists for.

:func:`as_custom_op` gives a module that behaves like the one it wraps, except that its ``forward``
calls ``torch.ops.<namespace>.<name>``: the call's arguments are flattened (:func:`serialize_args`), the
operator runs the wrapped module on the rebuilt arguments, and its flat outputs are rebuilt
(:func:`deserialize_args`). :func:`replace_with_custom_ops` does it for every submodule of given
classes and :func:`restore_modules` undoes it.

Invariants:

* **Same module, same signature.** The wrapper is a copy of the module (same parameters, buffers and
  submodules, so ``state_dict`` keys and ``.to()`` are unchanged) whose class derives from the
  module's, with ``forward`` carrying the original's signature.
* **Mutations reach the caller** (Note [write back]). Every cache argument comes back from the operator
  as extra outputs and is written into the caller's cache; an in-place change the module makes to any
  other input tensor cannot be carried and raises, naming the argument.
* **The fake implementation does not run the module** (Note [learned shapes]), unless ``fake=`` says
  otherwise: output shapes come from the eager calls recorded so far.
* One operator per wrapped module, with the schema ``(Tensor[] tensors, str call) -> Tensor[]``: the
  tensors of the call, and ``call``, the key of the call's structure (Note [call keys]).

Note [call keys]
~~~~~~~~~~~~~~~~
A call's structure is everything about it that is not a tensor: the type-info string of each
argument, the keyword names, and the value of every non-tensor item of the flat list (``None``,
``bool``, ``int``, ``float``, ``str``). Its key is a readable string of those (``repr`` of a tuple), so
an exported graph shows what each call node was called with. Keys are looked up, never parsed: the
structure itself is kept, per wrapper, in a table filled by the eager calls. Non-tensor values are thus
constants of the call, which is what ``torch.export`` makes of Python scalars anyway; a symbolic int
would silently freeze and is refused.

Note [write back]
~~~~~~~~~~~~~~~~~
transformers' layers update the cache they receive in place (``cache.update(...)``), but behind an
operator they receive a cache rebuilt from tensors. The operator therefore returns, after the module's
own outputs, the flat state of every cache argument, and the wrapper writes it into the caller's
cache object with ``_caches.write_back`` (same objects, new tensors); where the module's output is, or
directly holds, the cache it was given (a ModelOutput's ``cache``), the caller gets its own cache object
there, as from the module itself. Unchanged cache tensors come
back as themselves in eager mode (an operator defined with ``torch.library`` may return its inputs;
cloning them would cost a copy of the whole cache per layer call), and as new tensors under export,
where the program's cache outputs are the operator's. A cache nested inside another argument
(a dict holding a cache) is refused: it could not be found again to be written back.

Note [eager results]
~~~~~~~~~~~~~~~~~~~~
In eager mode the kernel has the module's output and the updated caches as objects before it flattens
them; rebuilding them from the returned tensors would give equal objects at the cost of a rebuild per
call. So the kernel leaves them on a stack and the wrapper takes them, but only if the tensors the
operator returned are the very objects the kernel returned (identity, checked element by element);
under fake tensors, or if anything came between, the wrapper rebuilds from the tensors as before.
The stack is popped right after each operator call, so a nested call of the same operator (a module
calling itself) pairs with its own entry.

Note [learned shapes]
~~~~~~~~~~~~~~~~~~~~~
Each eager call records the shapes of the operator's input and output tensors. Under fake tensors
(``torch.export``), each output dimension is computed from the inputs by the first of these rules
that holds in every recorded call: it equals an input dimension; it is a constant; it is the sum of
two input dimensions; an input dimension plus a constant. If several candidates of the chosen rule
hold (a hidden size of 16 and a sequence of 16 in the only call), they are all evaluated on the fake
inputs and must agree; if they do not, the shape cannot be derived and the error says to calibrate
with another call whose sizes differ, or to pass ``fake=``. Two symbolic sizes that are equal in the
traced inputs (the batch of two inputs) are declared equal to the tracer (``torch._check``) instead.
Dtypes and devices are those recorded.
(The code is in :mod:`._shapes`.)

Imports: :mod:`..serialize` and :mod:`..type_info` at import time, :mod:`..schema`, :mod:`..treespec_name` and
:mod:`..errors` on use; torch when a module is wrapped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..serialize import OpaqueLeafError, _caches, deserialize_args, serialize_args, type_as_str_with_info
from ..type_info import TreeWithCachesInfo, _parse_cached
from ._error import CustomOpError
from ._shapes import Rule, evaluate, learn

if TYPE_CHECKING:
    import torch

__all__ = ["CustomOpError", "as_custom_op", "replace_with_custom_ops", "restore_modules", "is_custom_op_module"]

# Calls recorded per key for shape learning: enough to tell a dimension from a constant, bounded.
_MAX_RECORDED_CALLS = 8


@dataclass
class _Call:
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


def _kind_and_flat(value: Any, what: str) -> tuple[str, Sequence[Any]]:
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


def _flatten_values(values: Sequence[Any], whats: Sequence[str]) -> tuple[tuple[str, ...], list[Any], dict[int, Any], int, list[int]]:
    """Each value's type-info string, then the tensors and constants of all of them (Note [call keys]), the
    number of flat items, and how many tensors there are after each value."""
    kinds = []
    tensors: list[Any] = []
    constants: dict[int, Any] = {}
    ends: list[int] = []
    n_flat = 0
    for value, what in zip(values, whats):  # noqa: B905 - one description per value; strict= doubles zip's cost per call
        kind, flat = _kind_and_flat(value, what)
        kinds.append(kind)
        _split(flat, tensors, constants, n_flat, what)
        n_flat += len(flat)
        ends.append(len(tensors))
    return tuple(kinds), tensors, constants, n_flat, ends


def _describe_call(op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[_Call, list[Any], str]:
    """The call's structure, its tensors, and its key (Note [call keys])."""
    values = [*args, *kwargs.values()]
    whats = [f"{op}: positional argument {i}" for i in range(len(args))] + [f"{op}: argument {k!r}" for k in kwargs]
    kinds, tensors, constants, n_flat, ends = _flatten_values(values, whats)
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
    call = _Call(kinds, len(args), tuple(kwargs), constants, n_flat, tuple(caches), frozenset(cache_tensors))
    key = repr((call.kinds, call.keywords, tuple(sorted(constants.items()))))
    return call, tensors, key


def _merge(tensors: Sequence[Any], constants: dict[int, Any], n_flat: int) -> list[Any]:
    it = iter(tensors)
    return [constants[i] if i in constants else next(it) for i in range(n_flat)]


class _Op:
    """The operator of one wrapped module: its library, its table of calls, its real and fake kernels."""

    # the wrapper's bound forward as the module's class defines it, and its signature: set by as_custom_op once
    # the wrapper exists
    run: Callable[..., Any]
    signature: inspect.Signature

    def __init__(self, qualname: str, fake: Callable[..., Any] | None) -> None:
        import torch

        from ..errors import SchemaError
        from ..schema import parse_operator_name

        try:
            name = parse_operator_name(qualname)
        except SchemaError as exc:
            raise ValueError(f"as_custom_op: {qualname!r} is not an operator name 'namespace::name': {exc}") from None
        if not name.namespace or name.overload:
            raise ValueError(f"as_custom_op: {qualname!r} must be 'namespace::name' (a namespace, no overload)")
        if torch._C._jit_get_schemas_for_operator(qualname):  # any overload
            raise ValueError(f"as_custom_op: an operator {qualname!r} already exists; choose another name")
        self.qualname = qualname
        self.fake_fn = fake
        self.calls: dict[str, _Call] = {}
        # what the eager kernel built, for the wrapper to take instead of rebuilding it (Note [eager results])
        self.results: list[tuple[list[Any], tuple[Any, ...]]] = []
        # the ignores: torch.library.Library's methods carry no annotations
        self.lib = torch.library.Library(name.namespace, "FRAGMENT")  # type: ignore[no-untyped-call]
        self.lib.define(f"{name.name}(Tensor[] tensors, str call) -> Tensor[]")  # type: ignore[no-untyped-call]
        self.lib.impl(name.name, self._real, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        torch.library.register_fake(qualname, self._fake, lib=self.lib)
        self.op = getattr(getattr(torch.ops, name.namespace), name.name).default

    def close(self) -> None:
        self.lib._destroy()  # type: ignore[no-untyped-call]  # unannotated in torch

    # ---- the kernels -----------------------------------------------------------------------------

    def _call_module(self, fn: Callable[..., Any], call: _Call, tensors: Sequence[Any]) -> tuple[Any, list[Any]]:
        """Rebuild the arguments, run ``fn``; the output and the caches as they are after the call."""
        values = deserialize_args(_merge(tensors, call.constants, call.n_flat), list(call.kinds))
        args = values[: call.n_positional]
        kwargs = dict(zip(call.keywords, values[call.n_positional :]))  # noqa: B905 - one value per keyword; strict= doubles zip's cost per call
        output = fn(*args, **kwargs)
        return output, [values[i] for i in call.caches]

    def _flat_outputs(self, output: Any, caches: list[Any]) -> tuple[tuple[str, ...], list[Any], dict[int, Any], int]:
        whats = [f"{self.qualname}: the output"] + [f"{self.qualname}: cache argument {i} after the call" for i in range(len(caches))]
        kinds, tensors, constants, n_flat, _ = _flatten_values((output, *caches), whats)
        return kinds, tensors, constants, n_flat

    def _real(self, tensors: list[Any], key: str) -> list[Any]:
        call = self._lookup(key)
        versions = [t._version for t in tensors]
        output, caches = self._call_module(self.run, call, tensors)
        kinds, out, constants, n_flat = self._flat_outputs(output, caches)
        changed = [i for i, (t, v) in enumerate(zip(tensors, versions)) if t._version != v and i not in call.cache_tensors]  # noqa: B905 - a version per tensor
        if changed:
            raise CustomOpError(
                f"{self.qualname}: the module changed input tensor(s) {changed} of the call in place; behind a custom "
                "operator the change would not reach the caller (only caches are written back): return the new value instead"
            )
        dtypes = tuple(t.dtype for t in out)
        if call.out_kinds is None:
            call.out_kinds, call.out_constants, call.out_n_flat = kinds, constants, n_flat
            call.out_aliases = _aliases(output, caches)
        if not call.shapes:  # the first eager call (a fake= kernel may have seen the structure before)
            call.out_dtypes, call.out_devices = dtypes, tuple(t.device for t in out)
        if (kinds, constants, dtypes) != (call.out_kinds, call.out_constants, call.out_dtypes):
            raise CustomOpError(
                f"{self.qualname}: the module returned {kinds} (constants {constants}, dtypes {dtypes}) where an "
                f"earlier call of the same structure returned {call.out_kinds} (constants {call.out_constants}, "
                f"dtypes {call.out_dtypes}); an operator has one output structure per call structure"
            )
        shapes = (tuple(tuple(t.shape) for t in tensors), tuple(tuple(t.shape) for t in out))
        if shapes not in call.shapes and len(call.shapes) < _MAX_RECORDED_CALLS:
            call.shapes.append(shapes)
            call.rules = None
        self.results.append((out, (output, *caches)))
        return out

    def _fake(self, tensors: list[Any], key: str) -> list[Any]:
        import torch

        call = self._lookup(key)
        if self.fake_fn is not None:
            output, caches = self._call_module(self.fake_fn, call, tensors)
            kinds, out, constants, n_flat = self._flat_outputs(output, caches)
            if call.out_kinds is None:
                call.out_kinds, call.out_constants, call.out_n_flat = kinds, constants, n_flat
                call.out_aliases = _aliases(output, caches)
            elif (kinds, constants) != (call.out_kinds, call.out_constants):
                raise CustomOpError(f"{self.qualname}: fake= returned {kinds} where the module returns {call.out_kinds}")
            # a fake kernel may not return its inputs (unchanged cache tensors, for one)
            return [t.clone() if any(t is x for x in tensors) else t for t in out]
        if call.out_kinds is None or not call.shapes:
            seen = [k for k, c in self.calls.items() if c.shapes]
            raise CustomOpError(
                f"{self.qualname}: the module was never called eagerly with this call structure, {key}; call it once "
                "in eager mode (calibration) with inputs that take the same path as the traced ones, or pass fake= to "
                f"as_custom_op. Recorded: {'; '.join(seen[:3]) if seen else 'none'}"
                + (f" (and {len(seen) - 3} more)" if len(seen) > 3 else "")
            )
        if call.rules is None:
            call.rules = learn(self.qualname, call.shapes)
        sizes = [t.shape for t in tensors]
        return [
            torch.empty(evaluate(self.qualname, k, rules, sizes), dtype=dtype, device=device)
            for k, (rules, dtype, device) in enumerate(zip(call.rules, call.out_dtypes, call.out_devices, strict=False))
        ]

    def _lookup(self, key: str) -> _Call:
        call = self.calls.get(key)
        if call is None:
            raise CustomOpError(f"{self.qualname}: called with an unknown call key {key!r}; call it through its module")
        return call


# --------------------------------------------------------------------------------------------------
# the wrapper module

_WRAPPER_CLASSES: dict[type, type[torch.nn.Module]] = {}
# Module attributes that are dicts owned by one module: the wrapper gets its own copies (same values).
_OWN_DICTS = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_forward_hooks", "_forward_pre_hooks")


def _wrapper_class(cls: type[torch.nn.Module]) -> type[torch.nn.Module]:
    sub = _WRAPPER_CLASSES.get(cls)
    if sub is not None:
        return sub

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._pbp_op.forward(self, args, kwargs)

    forward.__signature__ = inspect.signature(cls.forward)  # type: ignore[attr-defined]
    forward.__doc__ = cls.forward.__doc__
    sub = cast("type[torch.nn.Module]", type(f"{cls.__name__}AsCustomOp", (cls,), {"forward": forward, "__module__": cls.__module__}))
    sub.__qualname__ = f"{cls.__qualname__}AsCustomOp"
    _WRAPPER_CLASSES[cls] = sub
    return sub


def _forward(op: _Op, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # A TypeError for a bad call, as the module's own forward gives. The call itself keeps the caller's split
    # between positional and keyword arguments: decorated forwards (transformers' output capturing) read
    # some arguments from **kwargs, and a keyword turned positional would reach them twice.
    op.signature.bind(*args, **kwargs)
    call, tensors, key = _describe_call(op.qualname, args, kwargs)
    known = op.calls.setdefault(key, call)
    out = op.op(tensors, key)
    if known.out_kinds is None:  # pragma: no cover - both kernels fill it or raise
        raise CustomOpError(f"{op.qualname}: the operator returned without an output structure")
    kept = op.results.pop() if op.results else None
    if kept is not None and len(kept[0]) == len(out) and all(a is b for a, b in zip(kept[0], out)):  # noqa: B905 - lengths compared first
        # Note [eager results]: the very objects the kernel made from these tensors
        values = kept[1]
    else:
        values = deserialize_args(_merge(out, known.out_constants, known.out_n_flat), list(known.out_kinds))
    given = [*args, *kwargs.values()]
    for i, new in zip(known.caches, values[1:]):  # noqa: B905 - a new state per cache; strict= doubles zip's cost per call
        _caches.write_back(given[i], new)
    output = values[0]
    for where, i in known.out_aliases:
        output = _put(output, where, given[known.caches[i]])
    return output


def _aliases(output: Any, caches: Sequence[Any]) -> tuple[tuple[Any, int], ...]:
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


_Op.forward = _forward  # type: ignore[attr-defined]


def is_custom_op_module(module: Any) -> bool:
    """True if ``module`` is a wrapper made by :func:`as_custom_op`."""
    return "_pbp_op" in getattr(module, "__dict__", {})


def as_custom_op(module: torch.nn.Module, qualname: str, *, fake: Callable[..., Any] | None = None) -> torch.nn.Module:
    """A module that runs ``module`` behind the custom operator ``torch.ops.<namespace>.<name>``.

    ``qualname`` is ``"namespace::name"``, an operator that does not exist yet. The result shares
    ``module``'s parameters, buffers and submodules, derives from its class, and its ``forward`` has
    the same signature; each call flattens the arguments (tensors, lists, dicts, namedtuples, ``None``,
    scalars, every cache kind the library supports), calls the operator and returns the rebuilt output.
    Caches passed as arguments are updated in place as the module updates them (Note [write back]).

    Under fake tensors (``torch.export``) the operator does not run ``module``: output shapes are
    learned from the eager calls made so far (Note [learned shapes]), so call the result once or twice
    eagerly, with different batch and sequence sizes, before exporting. ``fake``, if given, is called
    instead, with the rebuilt arguments (fake tensors), and must return what ``module`` would; pass
    ``module.forward`` to trace the module's own code.

    Raises ``ValueError`` for a bad or taken operator name and :class:`CustomOpError` (a ``TypeError``)
    for a call or an output that cannot be carried or whose shapes cannot be derived.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"as_custom_op: expected a torch.nn.Module, got {type(module).__qualname__}")
    if is_custom_op_module(module):
        # nn.Module.__getattr__ is typed Tensor | Module; _pbp_op is the wrapper's _Op
        raise ValueError(f"as_custom_op: the module is already behind operator {module._pbp_op.qualname!r}")  # type: ignore[union-attr]
    op = _Op(qualname, fake)
    cls = _wrapper_class(type(module))
    wrapper = cls.__new__(cls)
    wrapper.__dict__.update(module.__dict__)
    for name in _OWN_DICTS:
        if name in wrapper.__dict__:
            wrapper.__dict__[name] = type(wrapper.__dict__[name])(wrapper.__dict__[name])
    wrapper.__dict__["_pbp_op"] = op
    wrapper.__dict__["_pbp_original"] = module
    op.run = type(module).forward.__get__(wrapper)
    op.signature = inspect.signature(op.run)
    return wrapper


def _op_name(path: str) -> str:
    from ..treespec_name._ast import encode_body

    body = encode_body(path)
    return body if body[:1].isalpha() else f"m{body}"


def replace_with_custom_ops(
    model: torch.nn.Module, classes: type | tuple[type, ...], namespace: str
) -> list[str]:
    """Replace, in place, every submodule of ``model`` that is an instance of ``classes`` by its
    :func:`as_custom_op` wrapper; return their dotted paths.

    The operator of the submodule at ``path`` is ``namespace::<path>`` with ``.`` spelled ``__``
    (``model.layers.0`` -> ``mypbp::model__layers__0``). A submodule inside one that is replaced is left
    alone. :func:`restore_modules` undoes it.
    """
    import torch

    if not isinstance(classes, tuple):
        classes = (classes,)
    if isinstance(model, classes):
        raise ValueError("replace_with_custom_ops: the model itself is an instance of classes; use as_custom_op")
    chosen: list[tuple[str, Any]] = []
    for path, sub in model.named_modules(remove_duplicate=False):
        if (
            path
            and isinstance(sub, classes)
            and not is_custom_op_module(sub)
            and not any(path.startswith(p + ".") for p, _ in chosen)  # a dotted path, not the schema language
        ):
            chosen.append((path, sub))
    names = [_op_name(p) for p, _ in chosen]
    wrappers: dict[int, Any] = {}
    done: list[str] = []
    try:
        for (path, sub), name in zip(chosen, names, strict=False):
            if id(sub) not in wrappers:
                wrappers[id(sub)] = as_custom_op(sub, f"{namespace}::{name}")
            model.set_submodule(path, wrappers[id(sub)])
            done.append(path)
    except BaseException:
        for path in done:  # all or nothing
            model.set_submodule(path, model.get_submodule(path)._pbp_original)  # type: ignore[arg-type]  # the original Module
        for w in wrappers.values():
            w._pbp_op.close()
        raise
    del torch
    return done


def restore_modules(model: torch.nn.Module) -> list[str]:
    """Undo :func:`replace_with_custom_ops`: put every original submodule back, free the operator names;
    return the paths restored."""
    restored: list[str] = []
    closed = set()
    for path, sub in list(model.named_modules(remove_duplicate=False)):
        if path and is_custom_op_module(sub):
            model.set_submodule(path, sub._pbp_original)
            restored.append(path)
            if id(sub) not in closed:
                closed.add(id(sub))
                sub._pbp_op.close()
    return restored
