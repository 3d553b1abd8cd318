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
  other input tensor cannot be carried and raises, naming the argument. After the first call of a structure a
  cache goes in and comes back cut to the layers that call touched (Note [cut calls] in :mod:`._slices`).
* **The fake implementation does not run the module** (Note [learned shapes]), unless ``fake=`` says
  otherwise: output shapes come from the eager calls recorded so far.
* **An eager call is the module's call.** Its objects come back without a rebuild (Note [eager results]), where
  nothing would see the dispatcher's route it is skipped (Note [plain eager calls]), and once its structure is
  known the module runs on the caller's own objects (Note [direct eager calls]), all in :mod:`._eager`.
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

Note [weights as inputs]
~~~~~~~~~~~~~~~~~~~~~~~~
By default the operator's kernel reads the module's parameters and buffers from the module itself, so an
exported program lifts them as placeholders that no node uses. The export layer asks instead for
``(Tensor[] tensors, Tensor[] weights, str call) -> Tensor[]``: the wrapper passes every parameter and buffer
of the module (each once, in ``named_modules`` order), so the program's graph reads the weights it computes
with and a saved program holds them. Eagerly the kernel runs the module as it is when the weights it gets
are the module's own tensors, and through ``torch.func.functional_call`` on the wrapped module otherwise.

Note [learned shapes]
~~~~~~~~~~~~~~~~~~~~~
Each eager call records the shapes of the operator's input and output tensors. Under fake tensors
(``torch.export``), each output dimension is computed from the inputs by the first of these rules
that holds in every recorded call: it equals an input dimension; it is a constant; it is the sum of
two input dimensions; an input dimension plus a constant; an input dimension or the sum of two capped at a
constant, the largest size recorded, which some recorded call must reach past and another stay below (a sliding
window's cache). If several candidates of the chosen rule
hold (a hidden size of 16 and a sequence of 16 in the only call), they are all evaluated on the fake
inputs and must agree; if they do not, the shape cannot be derived and the error says to calibrate
with another call whose sizes differ, or to pass ``fake=``. Two symbolic sizes that are equal in the
traced inputs (the batch of two inputs) are declared equal to the tracer (``torch._check``) instead; two
capped candidates so equal are not (a sliding cache's keys and count, capped alike, part ways past the
window, and the tracer would tie them): the first is taken.
Dtypes and devices are those recorded.
(The code is in :mod:`._shapes`.)

Note [eager calls without values]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A module whose weights are on the ``meta`` device, or are fake tensors (built under ``FakeTensorMode``), runs
"eagerly" without values: torch sends an operator called on meta tensors to its fake implementation (the Meta
kernel), and one called on fake tensors too. Those calls are the calibration of such a module, so the fake
implementation runs the real kernel (the module itself, on the meta or fake tensors, which gives every shape,
dtype and device) when the call is eager: when no input is a fake tensor (plain meta tensors exist only outside
tracing), or inside :func:`eager_without_values` (a fake tensor cannot tell an eager call from a traced one, so
the caller says). Under ``torch.export`` the learned shapes are used as for any module.
Without values the module's run gives nothing but shapes, so a call of a known structure on input shapes it has
recorded returns new tensors of the output shapes recorded, without running it: the 80 identical layers of a
model on ``meta`` run the module once per distinct shape, not once each (issue 28: an export under ``meta``
calls every layer in the recording and in the checks). The recorded shapes are those of a real run of the module
on these very input shapes, the learned rules are not involved.

Imports: :mod:`..serialize` and :mod:`..type_info` at import time, :mod:`..schema`, :mod:`..treespec_name` and
:mod:`..errors` on use; torch when a module is wrapped.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import _eager, _slices
from ._calls import Call, caches_after, describe_call, finish_call, flat_outputs, rebuild_arguments
from ._error import CustomOpError
from ._shapes import evaluate, learn
from ._sites import Sites
from ._state import KernelState

if TYPE_CHECKING:
    import torch

__all__ = ["CustomOpError", "as_custom_op", "replace_with_custom_ops", "restore_modules", "is_custom_op_module"]


class _Eager:
    """Whether calls on fake tensors are eager (Note [eager calls without values]): a depth, for nesting."""

    depth = 0


@contextlib.contextmanager
def eager_without_values() -> Iterator[None]:
    """Calls of operators on fake tensors inside are eager: they run the module (Note [eager calls without values])."""
    _Eager.depth += 1
    try:
        yield
    finally:
        _Eager.depth -= 1



class _Op:
    """The operator of one wrapped module: its library, its table of calls, its real and fake kernels."""

    # the wrapper's bound forward as the module's class defines it, and its signature: set by as_custom_op once
    # the wrapper exists
    run: Callable[..., Any]
    signature: inspect.Signature
    original: Any  # the wrapped module itself

    def __init__(self, qualname: str, fake: Callable[..., Any] | None, caller: str = "as_custom_op", weights: bool = False) -> None:
        import torch

        from ..errors import SchemaError
        from ..schema import parse_operator_name

        try:
            name = parse_operator_name(qualname)
        except SchemaError as exc:
            raise ValueError(f"{caller}: {qualname!r} is not an operator name 'namespace::name': {exc}") from None
        if not name.namespace or name.overload:
            raise ValueError(f"{caller}: {qualname!r} must be 'namespace::name' (a namespace, no overload)")
        if torch._C._jit_get_schemas_for_operator(qualname):  # any overload
            raise ValueError(f"{caller}: an operator {qualname!r} already exists; choose another name")
        self.qualname = qualname
        self.fake_fn = fake
        self.calls: dict[str, Call] = {}
        # the steady state (Note [call sites]): the structures seen, and per call key what the kernel reuses
        self.sites = Sites(qualname)
        self.kernel_state: dict[str, KernelState] = {}
        # what the eager kernel built, for the wrapper to take instead of rebuilding it (Note [eager results])
        self.results: list[tuple[list[Any], tuple[Any, ...]]] = []
        self.waiting = 0  # wrapper calls under way: only they take the results (a program calls the operator too)
        # told of each eager call: copies of its tensors as they came in, its weights (None: the module's own), its
        # key and its flat outputs; the export's checks set it for a while (Note [checks in bounded memory])
        self.observer: Callable[[list[Any], list[Any] | None, str, list[Any]], None] | None = None
        # the ignores: torch.library.Library's methods carry no annotations
        self.lib = torch.library.Library(name.namespace, "FRAGMENT")  # type: ignore[no-untyped-call]
        # Note [weights as inputs]: with weights, the schema takes the module's parameters and buffers too
        inputs = "Tensor[] tensors, Tensor[] weights, str call" if weights else "Tensor[] tensors, str call"
        self.lib.define(f"{name.name}({inputs}) -> Tensor[]")  # type: ignore[no-untyped-call]
        self.weight_names: tuple[str, ...] | None = None  # set by wrap() when weights is true
        self.weight_slots: list[tuple[Any, str, bool]] = []  # (module, attribute, is a parameter) per weight
        self.lib.impl(name.name, self._real, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        torch.library.register_fake(qualname, self._fake, lib=self.lib)
        self.op = getattr(getattr(torch.ops, name.namespace), name.name).default
        _eager.bind()

    def close(self) -> None:
        self.lib._destroy()  # type: ignore[no-untyped-call]  # unannotated in torch

    # ---- the kernels -----------------------------------------------------------------------------

    def _call_module(self, fn: Callable[..., Any], call: Call, tensors: Sequence[Any], watch: bool = False) -> tuple[Any, list[Any], Any]:
        """Rebuild the arguments, run ``fn``; the output, the caches as they are after the call, and with
        ``watch``, on the first call of a structure, the cache layers it touched (Note [cut calls])."""
        args, kwargs = rebuild_arguments(call, tensors)
        given = [*args, *kwargs.values()]
        watchers = _slices.watch(call, given) if watch and not call.probed else None
        output = fn(*args, **kwargs)
        found = _slices.touched(watchers, given) if watchers else None
        call.probed = True
        return output, caches_after(call, given), found

    def weights_of(self) -> list[Any]:
        """The module's parameters and buffers as the operator takes them (Note [weights as inputs])."""
        return [m._parameters[n] if is_param else m._buffers[n] for m, n, is_param in self.weight_slots]

    def _runner(self, weights: list[Any] | None) -> Callable[..., Any]:
        """The module's forward, with ``weights`` in place of its own when they are other tensors."""
        mine = self.weights_of()
        if weights is None or (len(weights) == len(mine) and all(map(operator.is_, weights, mine))):
            return self.run
        import torch

        names = self.weight_names or ()
        original = self.original
        return lambda *a, **k: torch.func.functional_call(original, dict(zip(names, weights, strict=True)), a, k)

    def _real(self, tensors: list[Any], *rest: Any) -> list[Any]:
        out, values = self.eager(tensors, rest)
        if self.waiting:  # Note [eager results]: a program's call would leave its results on the stack for good
            self.results.append((out, values))
        return out

    def eager(self, tensors: list[Any], rest: tuple[Any, ...]) -> tuple[list[Any], tuple[Any, ...]]:
        """The real kernel's work, its observer told: the flat outputs and the objects they come from."""
        observer = self.observer
        before = [t.clone() for t in tensors] if observer is not None else None  # the module may write into a cache
        out, values = self._kernel(tensors, *rest)
        if observer is not None and before is not None:
            observer(before, None if len(rest) == 1 else rest[0], rest[-1], out)
        return out, values

    def _kernel(self, tensors: list[Any], *rest: Any) -> tuple[list[Any], tuple[Any, ...]]:
        """The module run on an operator call: the flat outputs, and the objects they come from."""
        weights, key = (None, rest[0]) if len(rest) == 1 else rest
        state = self.kernel_state.get(key)
        if state is None:
            state = self.kernel_state[key] = KernelState(self._lookup(key), len(tensors))
        call = state.call
        versions = state.versions(tensors)
        output, caches, found = self._call_module(self.run if weights is None else self._runner(weights), call, tensors, True)
        out = state.settle(self.qualname, tensors, versions, output, caches)
        if found:
            self._cut(call, found, tensors, output, caches)
        return out, (output, *caches)

    def _cut(self, call: Call, found: dict[int, Any], tensors: Sequence[Any], output: Any, caches: Sequence[Any]) -> None:
        """Give ``call`` its cut twin when its first call touched only some cache layers (Note [cut calls])."""
        _slices.make_cut(call, found, self.qualname, tensors, output, caches)
        if call.sliced is not None:
            cut, key, kept = call.sliced
            known = self.calls.setdefault(key, cut)
            if known is not cut:  # another whole structure cut to the same one: one call, its shapes pooled
                known.shapes.extend(s for s in cut.shapes if s not in known.shapes)
                known.rules = None
                call.sliced = (known, key, kept)

    def _fake(self, tensors: list[Any], *rest: Any) -> list[Any]:
        import torch
        from torch._subclasses.fake_tensor import FakeTensor

        if _Eager.depth or not any(isinstance(t, FakeTensor) for t in tensors):  # Note [eager calls without values]
            seen = self._seen_without_values(tensors, rest[-1])
            if seen is not None:
                return seen
            # the wrapper rebuilds from the tensors: a fake kernel's results may not be kept
            return _not_inputs(self._kernel(tensors, *rest)[0], tensors)
        key = rest[-1]  # the weights, when the schema has them, do not change the shapes
        call = self._lookup(key)
        if self.fake_fn is not None:
            output, caches, _ = self._call_module(self.fake_fn, call, tensors)
            kinds, out, constants, n_flat = flat_outputs(self.qualname, output, caches)
            if call.out_kinds is None:
                call.learn_outputs(kinds, constants, n_flat, output, caches)
            elif (kinds, constants) != (call.out_kinds, call.out_constants):
                raise CustomOpError(f"{self.qualname}: fake= returned {kinds} where the module returns {call.out_kinds}")
            return _not_inputs(out, tensors)
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

    def _seen_without_values(self, tensors: list[Any], key: str) -> list[Any] | None:
        """New outputs of the shapes a call on these input shapes recorded, when the module ran on them before
        (Note [eager calls without values]); ``None`` when it has not."""
        state = self.kernel_state.get(key)
        if state is None or state.outputs is None:
            return None
        call = state.call
        ins = tuple(map(state.size, tensors))
        for recorded, outs in call.shapes:
            if recorded == ins:
                import torch

                return [torch.empty(o, dtype=d, device=v) for o, d, v in zip(outs, call.out_dtypes, call.out_devices, strict=True)]
        return None

    def _lookup(self, key: str) -> Call:
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
    found = op.sites.match(args, kwargs)  # Note [call sites]: a structure seen before is a lookup
    pending = None
    if found is None:
        # A TypeError for a bad call, as the module's own forward gives (it depends only on the number of
        # positional arguments and the keyword names, which a site's are). The call itself keeps the caller's split
        # between positional and keyword arguments: decorated forwards (transformers' output capturing) read
        # some arguments from **kwargs, and a keyword turned positional would reach them twice.
        op.signature.bind(*args, **kwargs)
        call, tensors, key = describe_call(op.qualname, args, kwargs)
        known = op.calls.setdefault(key, call)
        if known.sliced is not None:  # Note [cut calls]: the structure carries only the layers it touches
            cut, key, carried = known.sliced
            tensors = [tensors[i] for i in carried]
            op.sites.add(args, kwargs, cut, key, op.sites.compile(args, kwargs, known, key, cut))
            known = cut
        else:  # kept until the call says whether it is cut
            pending = op.sites.compile(args, kwargs, known, key)
    else:
        site, tensors = found
        known, key = site.call, site.key
    rest = (key,) if op.weight_names is None else (op.weights_of(), key)
    values: Any = None
    if _eager.plain(tensors, None if len(rest) == 1 else rest[0]):  # Note [plain eager calls]
        state = op.kernel_state.get(key) if found is not None and op.observer is None else None
        if state is not None and state.outputs is not None:
            return _eager.direct(op, state, args, kwargs, tensors)  # Note [direct eager calls]
        out, values = op.eager(tensors, rest)
    else:
        op.waiting += 1
        try:
            out = op.op(tensors, *rest)
        finally:
            op.waiting -= 1
        kept = op.results.pop() if op.results else None
        if kept is not None and len(kept[0]) == len(out) and all(map(operator.is_, kept[0], out)):  # lengths compared first
            # Note [eager results] (in ._eager): the very objects the kernel made from these tensors
            values = kept[1]
    result = finish_call(known, out, [*args, *kwargs.values()], values)
    if pending is not None:
        if known.sliced is not None:  # the call was watched and cut: later calls of the structure carry the cut
            cut, cut_key, _ = known.sliced
            pending = op.sites.compile(args, kwargs, known, cut_key, cut, pending)
        op.sites.add(args, kwargs, pending.call, pending.key, pending)
    return result


def _not_inputs(out: list[Any], tensors: Sequence[Any]) -> list[Any]:
    """``out``, each of ``tensors`` in it copied (a fake kernel may not return its inputs: an unchanged cache layer)."""
    given = set(map(id, tensors))  # one pass: a call carrying a whole cache has hundreds of tensors
    return [t.clone() if id(t) in given else t for t in out]


_Op.forward = _forward  # type: ignore[attr-defined]


def shallow_copy(module: torch.nn.Module, cls: type | None = None) -> Any:
    """A new module of class ``cls`` (``module``'s by default) sharing ``module``'s parameters, buffers, submodules
    and attributes, with dicts of its own for them and for its hooks: replacing a submodule of the copy, or
    adding a hook to it, leaves ``module`` as it was."""
    kind: Any = cls or type(module)
    new = kind.__new__(kind)
    new.__dict__.update(module.__dict__)
    for name in _OWN_DICTS:
        if name in new.__dict__:
            new.__dict__[name] = type(new.__dict__[name])(new.__dict__[name])
    return new


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
    return wrap(module, qualname, fake, "as_custom_op")


def wrap(module: torch.nn.Module, qualname: str, fake: Callable[..., Any] | None, caller: str, weights: bool = False) -> torch.nn.Module:
    """:func:`as_custom_op`, with its errors named after ``caller``, the public function the user called, and
    with ``weights``, the module's parameters and buffers passed to the operator (Note [weights as inputs])."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{caller}: expected a torch.nn.Module, got {type(module).__qualname__}")
    if is_custom_op_module(module):
        # nn.Module.__getattr__ is typed Tensor | Module; _pbp_op is the wrapper's _Op
        raise ValueError(f"{caller}: the module is already behind operator {module._pbp_op.qualname!r}")  # type: ignore[union-attr]
    op = _Op(qualname, fake, caller, weights)
    wrapper: torch.nn.Module = shallow_copy(module, _wrapper_class(type(module)))
    wrapper.__dict__["_pbp_op"] = op
    wrapper.__dict__["_pbp_original"] = module
    op.run = type(module).forward.__get__(wrapper)
    op.signature = inspect.signature(op.run)
    op.original = module
    if weights:
        op.weight_names, op.weight_slots = _weight_slots(wrapper)
    return wrapper


def _weight_slots(wrapper: torch.nn.Module) -> tuple[tuple[str, ...], list[tuple[Any, str, bool]]]:
    """Every parameter and buffer of ``wrapper`` once (a tied one under its first name), and where each lives."""
    names: list[str] = []
    slots: list[tuple[Any, str, bool]] = []
    seen: set[int] = set()
    for prefix, sub in wrapper.named_modules(remove_duplicate=False):
        for kind, table in ((True, sub._parameters), (False, sub._buffers)):
            for local, tensor in table.items():
                if tensor is not None and id(tensor) not in seen:
                    seen.add(id(tensor))
                    names.append(f"{prefix}.{local}" if prefix else local)
                    slots.append((sub, local, kind))
    return tuple(names), slots


def op_name(path: str) -> str:
    """The operator name of the submodule at a dotted path: ``.`` spelled ``__``, an ``m`` before a digit."""
    from ..treespec_name._ast import encode_body

    body = encode_body(path)
    return body if body[:1].isalpha() else f"m{body}"


def submodules_of(model: torch.nn.Module, classes: Any, caller: str) -> list[tuple[str, Any]]:
    """The outermost submodules of ``model`` that are instances of ``classes`` and not already behind an operator,
    with their dotted paths; a submodule inside a chosen one is left out (none when all are behind operators).

    ``classes`` is a class, a class name (``"LlamaDecoderLayer"``, or a qualified name, where the class is
    defined or where its package exports it: ``"torch.nn.Linear"``) or a tuple (or list) of them; a name must
    name exactly one class among the model's modules. Raises ``TypeError`` for anything else and
    ``ValueError``, named after ``caller``, for a name that names no class or several, for classes matching no
    submodule (the message lists the classes the model has) and for the model itself being one.
    """
    present: dict[type, int] = {}
    for sub in model.modules():
        present[type(sub)] = present.get(type(sub), 0) + 1
    given = tuple(classes) if isinstance(classes, (tuple, list)) else (classes,)  # a list reads as a tuple
    if not given:
        raise ValueError(f"{caller}: classes={classes!r} names no class; give a class, a class name or a tuple of them")
    wanted = tuple(_resolve_class(c, present, caller) for c in given)
    if isinstance(model, wanted):
        raise ValueError(f"{caller}: the model itself is an instance of {_names(wanted)}; use as_custom_op")
    chosen: list[tuple[str, Any]] = []
    matched = False
    for path, sub in model.named_modules(remove_duplicate=False):
        matched = matched or (bool(path) and isinstance(sub, wanted))
        if (
            path
            and isinstance(sub, wanted)
            and not is_custom_op_module(sub)
            and not any(path.startswith(p + ".") for p, _ in chosen)  # a dotted path, not the schema language
        ):
            chosen.append((path, sub))
    if not matched:
        listed = ", ".join(f"{cls.__name__} (x{n})" for cls, n in present.items() if cls is not type(model))
        raise ValueError(f"{caller}: no submodule of the model is an instance of {_names(wanted)}; the model's submodules are {listed}")
    return chosen


def _names(classes: tuple[type, ...]) -> str:
    return " or ".join(c.__qualname__ for c in classes)


def _resolve_class(given: Any, present: dict[type, int], caller: str) -> type:
    if isinstance(given, type):
        return given
    if not isinstance(given, str):
        raise TypeError(f"{caller}: classes must be classes or class names, not {type(given).__qualname__}")
    # a class name is looked up among the model's own classes, never imported; a qualified name may name the class
    # where its package exports it ("torch.nn.Linear" for torch.nn.modules.linear.Linear)
    found = [c for c in present if given in (c.__name__, c.__qualname__, f"{c.__module__}.{c.__qualname__}")]
    if not found and "." in given:
        package, _, qualname = given.rpartition(".")  # a dotted Python name, not one of the library's languages
        found = [c for c in present if c.__qualname__ == qualname and (c.__module__ + ".").startswith(package + ".")]
    if len(found) == 1:
        return found[0]
    if not found:
        listed = ", ".join(sorted({c.__name__ for c in present}))
        raise ValueError(f"{caller}: no module class of the model is named {given!r}; its classes are {listed}")
    listed = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in found)
    raise ValueError(f"{caller}: {given!r} names {len(found)} classes of the model ({listed}); give the class itself or its qualified name")


def replace_with_custom_ops(
    model: torch.nn.Module, classes: type | str | tuple[type | str, ...], namespace: str
) -> list[str]:
    """Replace, in place, every submodule of ``model`` that is an instance of ``classes`` by its
    :func:`as_custom_op` wrapper; return their dotted paths.

    ``classes`` is a class, a class name or a tuple of them (a name must name exactly one class among the
    model's modules). The operator of the submodule at ``path`` is ``namespace::<path>`` with ``.`` spelled
    ``__`` (``model.layers.0`` -> ``mypbp::model__layers__0``). A submodule inside one that is replaced is
    left alone. :func:`restore_modules` undoes it.

    Raises ``ValueError`` when ``classes`` matches no submodule (the message lists the module classes the model
    has), when a name names no class or several, or for a bad or taken operator name; ``TypeError`` for
    ``classes`` that are neither classes nor names.
    """
    chosen = submodules_of(model, classes, "replace_with_custom_ops")
    names = [op_name(p) for p, _ in chosen]
    wrappers: dict[int, Any] = {}
    done: list[str] = []
    try:
        for (path, sub), name in zip(chosen, names, strict=False):
            if id(sub) not in wrappers:
                wrappers[id(sub)] = wrap(sub, f"{namespace}::{name}", None, "replace_with_custom_ops")
            model.set_submodule(path, wrappers[id(sub)])
            done.append(path)
    except BaseException:
        for path in done:  # all or nothing
            model.set_submodule(path, model.get_submodule(path)._pbp_original)  # type: ignore[arg-type]  # the original Module
        for w in wrappers.values():
            w._pbp_op.close()
        raise
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
