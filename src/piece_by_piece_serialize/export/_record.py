"""Eager calls on the path tracing takes, and what they record.

Note [the tracing path]
~~~~~~~~~~~~~~~~~~~~~~~
A model may take another path in eager mode than under torch.export: transformers drops an all-ones
attention mask in eager mode but builds it when ``torch.compiler.is_exporting()`` (or ``is_compiling()``) is
true, so a layer called with ``attention_mask=None`` eagerly receives a tensor under tracing. The operators'
fake implementations learn from eager calls (Note [learned shapes] in :mod:`..custom_op`) and know only the
call structures they saw, so every eager call this package makes runs with the two flags torch.export itself
sets while it traces (``torch._export.utils._compiling_state_context``): the calls then have the structure
of the traced ones. Only the flags change; the tensors are real and the results equal eager results.

Imports: :mod:`..serialize` (deep copies, shared between the copies of one run: Note [shared copies]); torch on
use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..serialize import _caches, make_copy, shared_copies


@contextlib.contextmanager
def tracing_path() -> Iterator[None]:
    """Eager calls inside take the path torch.export's tracer takes (Note [the tracing path]), without grad."""
    import torch

    from ..custom_op import eager_without_values

    try:
        from torch._export.utils import _compiling_state_context
    except ImportError:  # pragma: no cover - torch before 2.5 sets the flags the same way
        _compiling_state_context = _set_flags
    with _compiling_state_context(), torch.no_grad(), eager_without_values():
        yield


@contextlib.contextmanager
def _set_flags() -> Iterator[None]:  # pragma: no cover - see tracing_path
    import torch

    old = torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag
    torch.compiler._is_compiling_flag = torch.compiler._is_exporting_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag, torch.compiler._is_exporting_flag = old


@dataclass
class Recorded:
    """One call of a module: copies of its arguments before the call, of its output and caches after it (copies
    that may share tensors with other calls' copies, Note [shared copies]: never changed in place)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any = None
    caches_after: list[Any] = field(default_factory=list)  # the written-back arguments after the call


@dataclass
class Recording:
    """What one eager run of a model recorded: the calls of the watched modules, and every module called."""

    calls: dict[str, list[Recorded]] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)  # every module path called, in the order of first call
    output: Any = None


def written_back(args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments of a call that an operator writes back after it, in order: its caches and shared dicts,
    the arguments :class:`..custom_op._calls.Call` lists in ``caches`` (``_caches.is_written_back``)."""
    return [v for v in (*args, *kwargs.values()) if _caches.is_written_back(v)]


def module_paths(model: Any) -> dict[int, str]:
    """The first dotted path of every module of ``model`` (``""`` for the model), by identity."""
    paths: dict[int, str] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        paths.setdefault(id(module), path)
    return paths


def run_recording(fn: Any, args: Sequence[Any], paths: dict[int, str], watched: dict[str, Any]) -> Recording:
    """Call ``fn`` on copies of ``args`` on the tracing path, recording every call of the modules in ``watched``
    (path -> module); every module of ``paths`` (id -> path) that is called is listed in ``Recording.called``."""
    import torch

    recording = Recording()
    copies = shared_copies()  # Note [shared copies]: a tensor unchanged between two copies is cloned once
    pending: dict[str, list[Recorded]] = {}
    seen: set[str] = set()

    def on_any(module: Any, inputs: Any) -> None:
        path = paths.get(id(module))
        if path is not None and path not in seen:
            seen.add(path)
            recording.called.append(path)

    def pre(path: str) -> Any:
        def hook(module: Any, a: tuple[Any, ...], k: dict[str, Any]) -> None:
            args_copy, kwargs_copy = copies.copy((a, k))
            pending.setdefault(path, []).append(Recorded(args_copy, kwargs_copy))

        return hook

    def post(path: str) -> Any:
        def hook(module: Any, a: tuple[Any, ...], k: dict[str, Any], output: Any) -> None:
            done = pending[path].pop()
            done.output = copies.copy(output)
            done.caches_after = [copies.copy(v) for v in written_back(a, k)]
            recording.calls.setdefault(path, []).append(done)

        return hook

    handles = [torch.nn.modules.module.register_module_forward_pre_hook(on_any)]
    try:
        for path, module in watched.items():
            handles.append(module.register_forward_pre_hook(pre(path), with_kwargs=True))
            handles.append(module.register_forward_hook(post(path), with_kwargs=True))
        copied = make_copy(tuple(args))
        with tracing_path():
            recording.output = fn(*copied)
    finally:
        for handle in handles:
            handle.remove()
    return recording
