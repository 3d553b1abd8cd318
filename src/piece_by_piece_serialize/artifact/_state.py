"""A piece that has no program of its own: its state written down, and its module given back by the user.

Note [implementations]
~~~~~~~~~~~~~~~~~~~~~~
A piece that cannot be exported (its code branches on data, say) is stored as its weights (the operator's
inputs in the top program) and the qualified name of its class. Loading it runs that class's code, so the
class must come from the user, in ``implementations=``: the loader never imports by name. An entry may be

* the class itself: the module is rebuilt from the state written at save time (:class:`ModuleState`), its
  plain attributes (numbers, strings, booleans, None, and tuples, lists and dicts of them) set, its children
  rebuilt the same way (``torch.nn``'s own classes are found in ``torch.nn``; others must be given too), its
  parameters and buffers taken from the weights; ``__init__`` is not called. A transformers config (a Mamba
  mixer's ``config``) is carried as its JSON (``to_json_string``: plain values, and its attention
  implementation) with its ``model_type``, if its class is the one transformers registers for that type
  (``CONFIG_MAPPING``); at load it is rebuilt with ``from_dict`` of that registered class, looked up only when
  transformers is already imported (the model's code imports it) and only among the types it registers: the
  file names a key of transformers' own table, never a module or a class. A piece holding anything else (a
  function, another object) cannot be rebuilt from its class, and the error says so by name;
* an instance of the class, built by the user as the model builds it: the archive's weights replace its
  own at each call (``torch.func.functional_call``); its parameters and buffers must have the names, shapes
  and dtypes of the stored ones.

Entries are matched to pieces by the class's qualified name (``module.Class``); a dict maps a piece's dotted
path to its entry instead.

Imports: :mod:`._manifest`, :mod:`._errors`; torch on use.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from ._errors import ArtifactError
from ._manifest import ModuleState, Value

# The attributes every torch.nn.Module has (hooks, the parameter tables): restored by Module.__init__, never stored.
_MODULE_INTERNALS: frozenset[str] | None = None


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _internals() -> frozenset[str]:
    global _MODULE_INTERNALS
    if _MODULE_INTERNALS is None:
        import torch

        _MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - {"training"}
    return _MODULE_INTERNALS


def _storable(v: Any, depth: int = 0) -> bool:
    if depth > 16:
        return False
    if v is None or type(v) in (bool, int, float, str):
        return True
    if type(v) in (tuple, list):
        return all(_storable(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(type(k) is str and _storable(x, depth + 1) for k, x in v.items())
    return False


# transformers' table of config classes by model_type; looked up only once transformers is imported
_CONFIGS = "transformers.models.auto.configuration_auto"


def _config(value: Any) -> tuple[str, dict[str, Value]] | None:
    """A transformers config as (its model_type, its JSON), if its class is the one transformers registers for
    that type and its JSON is plain values; None for anything else (Note [implementations])."""
    auto = sys.modules.get(_CONFIGS)
    model_type = getattr(type(value), "model_type", None)
    if auto is None or not isinstance(model_type, str) or model_type not in auto.CONFIG_MAPPING:
        return None
    if auto.CONFIG_MAPPING[model_type] is not type(value):  # a subclass of its own: its class would be lost
        return None
    try:
        data = json.loads(value.to_json_string(use_diff=False))
    except (TypeError, ValueError):  # a value JSON cannot hold: only an instance carries it
        return None
    implementation = getattr(value, "_attn_implementation", None)  # not in its JSON; the model's code reads it
    if isinstance(implementation, str):
        data["attn_implementation"] = implementation
    return (model_type, data) if _storable(data) else None


# transformers' JSON writes an infinite or NaN float as {"__float__": "Infinity"} (Granite-MoE-hybrid's
# time_step_limit is (0.0, inf)); its file reader turns the tag back into the float, from_dict does not
_FLOAT_TAGS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _special_floats(value: Any) -> Any:
    """``value`` with each float tag of transformers' JSON (``{"__float__": "Infinity"}``) the float it stands for."""
    if type(value) is dict:
        tag = value.get("__float__")
        if len(value) == 1 and isinstance(tag, str) and tag in _FLOAT_TAGS:
            return _FLOAT_TAGS[tag]
        return {k: _special_floats(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_special_floats(v) for v in value)
    return value


def _rebuilt_config(model_type: str, data: dict[str, Value], source: str, where: str) -> Any:
    """The config carried as (``model_type``, ``data``), built by the class transformers registers for that type."""
    auto = sys.modules.get(_CONFIGS)
    if auto is None:
        raise ArtifactError(source, f"{where} holds a transformers config ({model_type}): import transformers before loading, as the model's code does")
    if model_type not in auto.CONFIG_MAPPING:
        raise ArtifactError(source, f"{where} holds a config of model_type {model_type!r}, which transformers does not register")
    implementation = data.get("attn_implementation")
    if implementation is not None and implementation not in _attention_implementations():
        # a name transformers does not have would be looked up elsewhere (a kernel from the Hub) when the code reads it
        raise ArtifactError(source, f"{where}: its {model_type} config names the attention implementation {implementation!r}, which transformers does not register")
    try:
        return auto.CONFIG_MAPPING[model_type].from_dict(_special_floats(dict(data)))
    except Exception as exc:  # transformers refuses the values: the file's, not the loader's, fault
        raise ArtifactError(source, f"{where}: its {model_type} config cannot be rebuilt: {exc}") from None


def _attention_implementations() -> set[str]:
    """The attention implementations transformers has: ``eager`` and those of its registry, if loaded."""
    utils = sys.modules.get("transformers.modeling_utils")
    registered = getattr(utils, "ALL_ATTENTION_FUNCTIONS", None)
    return {"eager", *(registered.keys() if registered is not None else ())}


def capture(module: Any) -> ModuleState:
    """The state of ``module`` and its children that :func:`rebuild` needs (Note [implementations])."""
    attributes: list[tuple[str, Value]] = []
    unstorable: list[tuple[str, str]] = []
    configs: list[tuple[str, str, Value]] = []
    for name, value in module.__dict__.items():
        if name in _internals() or name.startswith("_pbp_"):
            continue
        config = None if _storable(value) else _config(value)
        if _storable(value):
            attributes.append((name, value))
        elif config is not None:
            configs.append((name, *config))
        else:
            unstorable.append((name, qualified(type(value))))
    return ModuleState(
        qualified(type(module)),
        tuple(attributes),
        tuple(n for n, p in module._parameters.items() if p is not None),
        tuple(n for n, b in module._buffers.items() if b is not None),
        tuple(sorted(module._non_persistent_buffers_set)),
        tuple(n for table in (module._parameters, module._buffers) for n, t in table.items() if t is None),
        tuple((n, capture(c)) for n, c in module._modules.items() if c is not None),
        tuple(unstorable),
        tuple(configs),
    )


@functools.cache
def _torch_nn_classes() -> dict[str, type]:
    import torch

    return {qualified(c): c for c in vars(torch.nn).values() if isinstance(c, type) and issubclass(c, torch.nn.Module)}


def resolve(entries: Any, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``implementations`` as (by class qualified name, by piece path), every entry a class or a module."""
    import torch

    by_class: dict[str, Any] = {}
    by_path: dict[str, Any] = {}
    items = entries.items() if isinstance(entries, Mapping) else ((None, e) for e in entries)
    for path, entry in items:
        if isinstance(entry, type) and issubclass(entry, torch.nn.Module):
            key = qualified(entry)
        elif isinstance(entry, torch.nn.Module):
            key = qualified(type(entry))
        else:
            raise TypeError(f"load_piece_by_piece: implementations holds {entry!r}; give module classes or module instances")
        if path is None:
            if key in by_class and by_class[key] is not entry:
                raise ArtifactError(source, f"implementations gives {key} twice; give a dict by piece path to tell them apart")
            by_class[key] = entry
        else:
            by_path[str(path)] = entry
    return by_class, by_path


def check_rebuildable(state: ModuleState, classes: Mapping[str, Any], source: str, piece: str) -> None:
    """What :func:`rebuild` refuses, before anything else of the archive is read: a class of the module tree neither
    given nor torch.nn's (all of them at once when there are several), or attributes the archive cannot carry, at
    the first module (depth first) where :func:`rebuild` would meet them (a load that fails for a class should not
    first spend its time deserializing programs)."""
    missing = _missing(state, classes)
    if len(missing) > 1:  # all at once: a user would otherwise learn them one load at a time
        named = ", ".join(f"{c} ({f'its submodule {at}' if at else 'the piece'})" for c, at in missing.items())
        raise ArtifactError(source, f"the piece {piece} needs {len(missing)} classes: {named}; pass those classes in implementations= (the loader imports nothing by name)")
    stack = [(state, "")]
    while stack:
        node, prefix = stack.pop()
        where = f"the piece {piece}" + (f" (its submodule {prefix[:-1]})" if prefix else "")
        if node.cls not in classes and node.cls not in _torch_nn_classes():
            raise ArtifactError(source, f"{where} is a {node.cls}: pass that class in implementations= (the loader imports nothing by name)")
        if node.unstorable:
            held = ", ".join(f"{name} ({kind})" for name, kind in node.unstorable)
            raise ArtifactError(
                source,
                f"{where} holds attributes the archive cannot carry: {held}; pass an instance of {node.cls} in "
                "implementations= instead of the class",
            )
        stack.extend((child, f"{prefix}{name}.") for name, child in reversed(node.children))


def rebuild(state: ModuleState, weights: Mapping[str, Any], classes: Mapping[str, Any], source: str, piece: str, prefix: str = "") -> Any:
    """The module of ``state``, built from its class without ``__init__`` (Note [implementations]). Only once
    :func:`check_rebuildable` has passed on ``state`` and ``classes``: the loader checks every piece it rebuilds before
    it reads any program, and this walk does not repeat it."""
    import torch

    cls = classes.get(state.cls) or _torch_nn_classes()[state.cls]
    where = f"the piece {piece}" + (f" (its submodule {prefix[:-1]})" if prefix else "")
    module: Any = object.__new__(cls)  # no __init__: the state below is the module's (Note [implementations])
    torch.nn.Module.__init__(module)
    for name, value in state.attributes:
        module.__dict__[name] = value
    for name, model_type, data in state.configs:
        module.__dict__[name] = _rebuilt_config(model_type, data, source, where)
    for table, names in ((module._parameters, state.parameters), (module._buffers, state.buffers)):
        for name in names:
            tensor = weights.get(prefix + name)
            if tensor is None:
                raise ArtifactError(source, f"{where}: the archive has no weight {prefix + name}")
            table[name] = tensor if table is module._buffers or isinstance(tensor, torch.nn.Parameter) else torch.nn.Parameter(tensor, requires_grad=False)
    module._non_persistent_buffers_set.update(state.non_persistent)
    for name in state.empty:  # registered as None, as a Linear without bias holds its bias
        module._parameters.setdefault(name, None)
    for name, child in state.children:
        module._modules[name] = rebuild(child, weights, classes, source, piece, f"{prefix}{name}.")
    return module


def _missing(state: ModuleState, classes: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Each class of the module tree of ``state`` that is neither given nor torch.nn's -> the first submodule of
    that class (``""``: the piece itself)."""
    out = {} if state.cls in classes or state.cls in _torch_nn_classes() else {state.cls: prefix[:-1]}
    for name, child in state.children:
        for cls, at in _missing(child, classes, f"{prefix}{name}.").items():
            out.setdefault(cls, at)
    return out


def check_instance(instance: Any, names: tuple[str, ...], weights: list[Any], source: str, piece: str) -> None:
    """An instance given for a piece must hold every stored weight, with its shape and dtype."""
    own = {**dict(instance.named_parameters()), **dict(instance.named_buffers())}
    for name, tensor in zip(names, weights, strict=True):
        mine = own.get(name)
        if mine is None or tuple(mine.shape) != tuple(tensor.shape) or mine.dtype != tensor.dtype:
            what = "has no" if mine is None else f"has a {mine.dtype} {tuple(mine.shape)}"
            raise ArtifactError(
                source, f"the instance given for the piece {piece} {what} {name}, where the archive has a {tensor.dtype} {tuple(tensor.shape)}"
            )
