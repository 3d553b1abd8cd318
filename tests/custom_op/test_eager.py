"""Note [plain eager calls]: where nothing would see torch's dispatcher, the wrapper calls the real kernel itself;
everywhere else the operator is dispatched, and both routes give the same outputs and the same caches. Note [direct
eager calls]: once a structure is known, such a call is the module's own call on the caller's objects, with the
kernel's checks and records."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from piece_by_piece_serialize import as_custom_op, replace_with_custom_ops  # noqa: E402
from piece_by_piece_serialize.custom_op import CustomOpError  # noqa: E402

_names = (f"pbpeager::op{i}" for i in itertools.count())


class _Counted:
    """The operator, counting the calls that reach it through torch."""

    def __init__(self, op: Any) -> None:
        self.op, self.calls = op, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.op(*args)


class _Seen(TorchDispatchMode):
    """A dispatch mode that only records the names of the operators it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _wrapped() -> tuple[Any, Any, _Counted, str]:
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 3)
    qualname = next(_names)
    wrapped = as_custom_op(module, qualname)
    counted = wrapped._pbp_op.op = _Counted(wrapped._pbp_op.op)
    return module, wrapped, counted, qualname


def test_a_plain_eager_call_runs_the_kernel_without_the_dispatcher() -> None:
    module, wrapped, counted, _ = _wrapped()
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.equal(wrapped(x), module(x))
        assert torch.equal(wrapped(x), module(x))  # the second call is a known structure (Note [call sites])
    with torch.inference_mode():
        assert torch.equal(wrapped(x), module(x))
    assert counted.calls == 0
    assert len(wrapped._pbp_op.calls) == 1 and wrapped._pbp_op.results == []  # recorded; nothing left on the stack


@pytest.mark.parametrize("known", [False, True], ids=["first call", "known structure"])
@pytest.mark.parametrize("where", ["gradients on", "a dispatch mode", "the profiler", "autocast", "meta tensors", "vmap",
                                   "a TorchScript trace", "a torch-function mode"])
def test_anything_that_could_see_the_call_gets_the_operator(where: str, known: bool) -> None:
    module, wrapped, counted, qualname = _wrapped()
    x = torch.randn(2, 4)
    if known:  # the structure learned by a plain call first: the next call could be a direct one
        with torch.no_grad():
            wrapped(x)
    if where == "gradients on":
        out = wrapped(x)
        assert out.requires_grad and torch.equal(out, module(x))  # what torch's autograd fallback makes of it
    elif where == "a dispatch mode":
        mode = _Seen()
        with torch.no_grad(), mode:
            wrapped(x)
        assert f"{qualname.replace('::', '.')}.default" in mode.names
    elif where == "the profiler":
        with torch.no_grad(), torch.profiler.profile() as prof:
            wrapped(x)
        assert qualname in [e.name for e in prof.events()]
    elif where == "autocast":
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            if known:  # the kernel sees the call, and refuses its outputs' new dtype for the structure
                with pytest.raises(CustomOpError, match=r"dtypes \(torch.bfloat16,\)\) where an earlier call"):
                    wrapped(x)
            else:
                assert wrapped(x).dtype == torch.bfloat16
    elif where == "vmap":  # its keys in the thread's included set stand for its own check (Note [plain eager calls])
        # torch's vmap has no rule for the operator: it names it, so the call did reach torch's dispatcher
        with torch.no_grad(), pytest.raises(RuntimeError, match=f"Batching rule not implemented for {qualname}"):
            torch.vmap(wrapped)(torch.randn(3, 2, 4))
    elif where == "a TorchScript trace":  # as vmap: the Tracer key is included while it traces
        with torch.no_grad():
            traced = torch.jit.trace(wrapped, (x,), check_trace=False)
        assert qualname in str(traced.graph)
    elif where == "a torch-function mode":
        with torch.no_grad(), _Through():
            assert torch.equal(wrapped(x), module(x))
    else:  # Note [eager calls without values]: the Meta kernel runs the module on the meta tensors
        meta = as_custom_op(torch.nn.Linear(4, 3, device="meta"), next(_names))
        counted = meta._pbp_op.op = _Counted(meta._pbp_op.op)
        with torch.no_grad():
            out = meta(torch.empty(5, 4, device="meta"))
        assert out.shape == (5, 3) and out.is_meta
    assert counted.calls == 1


class _Through(torch.overrides.TorchFunctionMode):
    """A torch-function mode that only passes each call through."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class _Runs(torch.nn.Linear):
    """A linear layer counting its runs (in a list of the module's own: the wrapper is another object)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = [0]

    def forward(self, x: Any) -> Any:
        self.runs[0] += 1
        return super().forward(x)


def test_without_values_a_module_runs_once_per_input_shapes() -> None:
    # Note [eager calls without values]: on meta tensors the module's run gives only shapes; a structure called on
    # input shapes it recorded gets new outputs of the recorded shapes (80 identical layers on meta, issue 28)
    module = _Runs(4, 3, device="meta")
    wrapped = as_custom_op(module, next(_names))
    with torch.no_grad():
        outs = [wrapped(torch.empty(n, 4, device="meta")) for n in (5, 5, 7, 5, 7)]
    assert [tuple(o.shape) for o in outs] == [(5, 3), (5, 3), (7, 3), (5, 3), (7, 3)]
    assert all(o.is_meta and o.dtype == torch.float32 for o in outs) and len({id(o) for o in outs}) == 5
    assert module.runs == [2]
    with pytest.raises(RuntimeError):  # a shape the module refuses is still the module's to refuse
        wrapped(torch.empty(5, 6, device="meta"))


def _decode(model: Any, ids: Any, steps: int) -> tuple[list[Any], Any]:
    with torch.no_grad():
        out = model(ids, use_cache=True)
        logits, cache = [out.logits], out.cache
        for k in range(steps):
            out = model(ids[:, k : k + 1], cache=cache)
            logits.append(out.logits)
    return logits, cache


def test_both_routes_give_the_same_outputs_and_caches() -> None:
    """The same decode steps of a tiny Llama behind operators, plain (no dispatcher) and under a dispatch mode that
    only passes each call on (the dispatcher's route), against the unreplaced model: equal, caches included."""
    from _tiny_models import llama

    model = llama()
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(1))
    expected, cache = _decode(model, ids, 3)
    wrapped = llama()
    replace_with_custom_ops(wrapped, type(wrapped.model.layers[0]), "pbpeager")
    counters = [m._pbp_op for m in wrapped.model.layers]
    for op in counters:
        op.op = _Counted(op.op)
    plain = _decode(wrapped, ids, 3)
    assert sum(op.op.calls for op in counters) == 0
    mode = _Seen()
    with mode:
        dispatched = _decode(wrapped, ids, 3)
    assert sum(op.op.calls for op in counters) == 4 * len(counters)
    for logits, got_cache in (plain, dispatched):
        assert all(torch.equal(a, b) for a, b in zip(logits, expected, strict=True))
        for a, b in zip(got_cache.layers, cache.layers, strict=True):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


class _Given(torch.nn.Module):
    """Adds the first layer's keys to ``x`` after updating it, and keeps each cache object it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[Any] = []  # shared with the wrapper, a shallow copy

    def forward(self, x: Any, cache: Any) -> Any:
        self.given.append(cache)
        keys, _ = cache.update(x, x * 2, 0)
        return x + keys[:, :, -1:]


def _one_layer_cache(past: int) -> Any:
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.update(torch.randn(1, 2, past, 4), torch.randn(1, 2, past, 4), 0)
    return cache


def test_a_known_structure_runs_the_module_on_the_callers_own_objects() -> None:
    import copy

    module = _Given()
    wrapped = as_custom_op(module, next(_names))
    counted = wrapped._pbp_op.op = _Counted(wrapped._pbp_op.op)
    caches = [_one_layer_cache(past) for past in (3, 3, 5)]
    with torch.no_grad():
        for cache in caches:
            theirs = copy.deepcopy(cache)
            x = torch.randn(1, 2, 1, 4)
            assert torch.equal(wrapped(x, cache), _Given()(x, theirs))
            assert torch.equal(cache.layers[0].keys, theirs.layers[0].keys) and cache.get_seq_length() == theirs.get_seq_length()
    given = module.given
    assert given[0] is not caches[0]  # the first call of the structure: the kernel's rebuilt cache
    assert given[1] is caches[1] and given[2] is caches[2]
    assert counted.calls == 0


def test_a_direct_call_records_its_shapes_for_the_export() -> None:
    """Calibration at two batch sizes, the second a direct call: the fake kernel learns the batch from both."""
    module, wrapped, _, _ = _wrapped()
    with torch.no_grad():
        wrapped(torch.randn(2, 4))
        wrapped(torch.randn(5, 4))
    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.export.export(wrapped, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    x = torch.randn(7, 4)
    with torch.no_grad():
        assert torch.equal(program.module()(x), module(x))


class _Careless(torch.nn.Module):
    """Changes its input in place once told to."""

    def __init__(self) -> None:
        super().__init__()
        self.careless = False

    def forward(self, x: Any) -> Any:
        if self.careless:
            x.add_(1)
        return x * 2


class _Moody(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return x if bool(x.sum() > 0) else (x, x)


def test_a_direct_call_keeps_the_kernels_refusals() -> None:
    careless = as_custom_op(_Careless(), next(_names))
    moody = as_custom_op(_Moody(), next(_names))
    with torch.no_grad():
        careless(torch.ones(2))
        careless.careless = True  # the wrapper holds its own attributes
        with pytest.raises(CustomOpError, match=r"changed input tensor\(s\) \[0\] of the call in place"):
            careless(torch.ones(2))
        moody(torch.ones(2))
        with pytest.raises(CustomOpError, match="one output structure per call structure"):
            moody(-torch.ones(3))  # new input shapes: recorded, so checked
        # seen input shapes: the module's own answer; the operator refuses it where it runs (a program, a check)
        x = -torch.ones(2)
        out = moody(x)
        assert isinstance(out, tuple) and out[0] is x
