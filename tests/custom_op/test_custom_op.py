"""as_custom_op on plain modules: every argument and output kind, the wrapper's identity, the fake kernel's
learned shapes, and every error of the module docstring (nothing silently wrong)."""

from __future__ import annotations

import collections
import inspect
import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize import CustomOpError, as_custom_op, replace_with_custom_ops, restore_modules  # noqa: E402
from piece_by_piece_serialize.custom_op import is_custom_op_module  # noqa: E402

_names = (f"pbpu::op{i}" for i in itertools.count())
Pair = collections.namedtuple("Pair", ["first", "second"])


class Everything(torch.nn.Module):
    """Positional, defaulted, *args, keyword-only and **kwargs; nested inputs; a nested output with None."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("offset", torch.arange(3.0))

    def forward(self, x, pair=None, *more, scale: float = 2.0, mask=None, **extra):
        out = self.lin(x) * scale + self.offset
        if pair is not None:
            out = out + pair.first.sum() - pair.second[0].sum()
        for m in more:
            out = out + m["a"].mean()
        if mask is not None:
            out = out.masked_fill(mask, 0.0)
        for value in extra.values():
            out = out + (value if isinstance(value, (int, float)) else value.sum())
        return {"out": out, "none": None, "pair": Pair(out.sum(-1), [x, out]), "flag": bool(scale > 1)}


def _calls(x: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    pair = Pair(torch.ones(2), [torch.full((3,), 0.5)])
    return [
        ((x,), {}),
        ((x, pair), {}),
        ((x, pair, {"a": torch.ones(2)}, {"a": torch.zeros(5)}), {"scale": 0.5}),
        ((x,), {"mask": x[:, :3] > 0, "bias": torch.ones(3), "count": 3}),
        ((), {"x": x, "pair": pair, "scale": 3.0, "mask": None}),
    ]


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


def test_every_argument_and_output_kind() -> None:
    module = Everything()
    wrapped = as_custom_op(module, next(_names))
    x = torch.randn(5, 4)
    for args, kwargs in _calls(x):
        _same(wrapped(*args, **kwargs), module(*args, **kwargs))
    assert len(wrapped._pbp_op.calls) == 5  # one call structure each


def test_the_wrapper_is_the_module() -> None:
    module = Everything()
    wrapped = as_custom_op(module, next(_names))
    assert isinstance(wrapped, Everything) and is_custom_op_module(wrapped) and not is_custom_op_module(module)
    assert inspect.signature(wrapped.forward) == inspect.signature(module.forward)
    assert list(wrapped.state_dict()) == list(module.state_dict())
    assert all(p is q for p, q in zip(wrapped.parameters(), module.parameters()))
    with pytest.raises(TypeError):  # a bad call fails as the module's own forward would
        wrapped(torch.ones(2, 4), scale=1.0, x=torch.ones(2, 4))


def test_the_operator_is_called() -> None:
    module = Everything()
    qualname = next(_names)
    wrapped = as_custom_op(module, qualname)
    seen = []
    with torch.profiler.profile() as prof:
        wrapped(torch.ones(2, 4))
    seen = [e.name for e in prof.events()]
    assert qualname in seen


class Grow(torch.nn.Module):
    """Output shapes of every rule: an input dimension, a constant, a sum, a dimension plus a constant."""

    def forward(self, x, past):
        joined = torch.cat([past, x], dim=1)  # (b, p + s, 8)
        padded = torch.nn.functional.pad(x, (0, 0, 2, 0))  # (b, s + 2, 8)
        return joined, padded, torch.zeros(7), x.sum(-1)


def test_export_uses_learned_shapes_not_the_module() -> None:
    module = Grow()
    wrapped = as_custom_op(module, next(_names))
    wrapped(torch.randn(2, 3, 8), torch.randn(2, 5, 8))
    wrapped(torch.randn(4, 4, 8), torch.randn(4, 2, 8))  # batch and sequence grow by different amounts
    rules = wrapped._pbp_op.calls
    b, s, p = torch.export.Dim("b"), torch.export.Dim("s"), torch.export.Dim("p")
    program = torch.export.export(
        wrapped, (torch.randn(2, 6, 8), torch.randn(2, 4, 8)), dynamic_shapes=({0: b, 1: s}, {0: b, 1: p}), strict=False
    )
    assert len(rules) == 1
    for shape_x, shape_p in (((1, 1, 8), (1, 9, 8)), ((5, 7, 8), (5, 3, 8))):
        x, past = torch.randn(shape_x), torch.randn(shape_p)
        for got, want in zip(program.module()(x, past), module(x, past)):
            assert torch.equal(got, want)


class Window(torch.nn.Module):
    """Keeps at most 4 positions, as a sliding-window cache does: a sum, and a dimension, capped at a constant."""

    def forward(self, x, past):
        return torch.cat([past, x], dim=1)[:, -4:], x[:, -4:] * 2


def test_a_dimension_capped_at_a_constant_is_learned() -> None:
    module = Window()
    wrapped = as_custom_op(module, next(_names))
    for b, s, p in ((2, 1, 2), (3, 2, 1), (2, 3, 3), (1, 6, 2)):  # the last two past the cap: 6 and 8 keep 4
        wrapped(torch.randn(b, s, 8), torch.randn(b, p, 8))
    b, s, p = torch.export.Dim("b"), torch.export.Dim("s", max=16), torch.export.Dim("p", max=16)
    program = torch.export.export(
        wrapped, (torch.randn(2, 2, 8), torch.randn(2, 3, 8)), dynamic_shapes=({0: b, 1: s}, {0: b, 1: p}), strict=False
    )
    for shape_x, shape_p in (((1, 1, 8), (1, 1, 8)), ((5, 2, 8), (5, 1, 8)), ((2, 9, 8), (2, 7, 8)), ((3, 1, 8), (3, 12, 8))):
        x, past = torch.randn(shape_x), torch.randn(shape_p)
        got, want = program.module()(x, past), module(x, past)
        assert [t.shape for t in got] == [t.shape for t in want]
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


class Triple(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x, x, x], dim=0)  # (3 b, ...): no rule derives it (2 b is b + b)


def test_an_underivable_shape_is_an_error_and_fake_overrides_it() -> None:
    dims = {0: torch.export.Dim("b")}
    wrapped = as_custom_op(Triple(), next(_names))
    wrapped(torch.ones(2, 3))
    wrapped(torch.ones(5, 3))
    with pytest.raises(CustomOpError, match="output tensor 0 dim 0 is not an input dimension"):
        torch.export.export(wrapped, (torch.ones(4, 3),), dynamic_shapes=(dims,), strict=False)
    module = Triple()
    traced = as_custom_op(module, next(_names), fake=module.forward)
    traced(torch.ones(2, 3))
    program = torch.export.export(traced, (torch.ones(4, 3),), dynamic_shapes=(dims,), strict=False)
    assert program.module()(torch.ones(7, 3)).shape == (21, 3)


def test_one_calibration_call_that_cannot_tell_two_dimensions_apart() -> None:
    wrapped = as_custom_op(Grow(), next(_names))
    wrapped(torch.randn(2, 8, 8), torch.randn(2, 8, 8))  # batch 2, sequence 8 = the hidden size 8
    dims = ({0: torch.export.Dim("b"), 1: torch.export.Dim("s")}, {0: torch.export.Dim("b2")})
    with pytest.raises(CustomOpError, match="cannot be derived: in every recorded call it equals both"):
        torch.export.export(wrapped, (torch.randn(2, 6, 8), torch.randn(2, 8, 8)), dynamic_shapes=dims, strict=False)


def test_export_before_any_eager_call_is_an_error() -> None:
    wrapped = as_custom_op(Triple(), next(_names))
    with pytest.raises(CustomOpError, match="never called eagerly with this call structure"):
        torch.export.export(wrapped, (torch.ones(4, 3),), strict=False)


class InPlace(torch.nn.Module):
    def forward(self, x, y):
        y.add_(1)
        return x + y


class Moody(torch.nn.Module):
    def forward(self, x):
        return x if bool(x.sum() > 0) else (x, x)


class Opaque(torch.nn.Module):
    def forward(self, x, how):
        return x


def test_what_cannot_be_carried_is_refused() -> None:
    with pytest.raises(CustomOpError, match=r"changed input tensor\(s\) \[1\] of the call in place"):
        as_custom_op(InPlace(), next(_names))(torch.ones(2), torch.ones(2))
    moody = as_custom_op(Moody(), next(_names))
    moody(torch.ones(2))
    with pytest.raises(CustomOpError, match="one output structure per call structure"):
        moody(-torch.ones(2))
    with pytest.raises(CustomOpError, match="argument 1 holds a object, which a custom operator cannot carry"):
        as_custom_op(Opaque(), next(_names))(torch.ones(2), object())


def test_a_cache_inside_a_container_is_refused() -> None:
    pytest.importorskip("transformers")
    from transformers import DynamicCache

    class Take(torch.nn.Module):
        def forward(self, x, state):
            return x

    cache = DynamicCache()
    cache.update(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), 0)
    with pytest.raises(CustomOpError, match="holds a cache inside a container; pass the cache as an argument"):
        as_custom_op(Take(), next(_names))(torch.ones(2), {"cache": cache})


def test_names() -> None:
    qualname = next(_names)
    first = as_custom_op(Triple(), qualname)  # the operator lives as long as its module
    with pytest.raises(ValueError, match="already exists"):
        as_custom_op(Triple(), qualname)
    with pytest.raises(ValueError, match="already exists"):
        as_custom_op(Triple(), "aten::add")
    for bad in ("noname", "ns::op.overload", "ns::", "a b::c"):
        with pytest.raises(ValueError, match="as_custom_op"):
            as_custom_op(Triple(), bad)
    with pytest.raises(TypeError, match="expected a torch.nn.Module"):
        as_custom_op(lambda x: x, "pbpu::lambda")  # type: ignore[arg-type]
    wrapped = as_custom_op(Triple(), next(_names))
    with pytest.raises(ValueError, match="already behind operator"):
        as_custom_op(wrapped, next(_names))
    del first


class Tower(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()) for _ in range(3)])
        self.head = torch.nn.Linear(4, 2)
        self.shared = self.blocks[1]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.shared(x))


def test_replace_and_restore() -> None:
    model = Tower()
    x = torch.randn(3, 4)
    want = model(x)
    keys = list(model.state_dict())
    paths = replace_with_custom_ops(model, torch.nn.Sequential, "pbpr")
    assert paths == ["blocks.0", "blocks.1", "blocks.2", "shared"]  # the inner Linear and ReLU are left alone
    assert model.shared is model.blocks[1] and is_custom_op_module(model.shared)
    assert torch.equal(model(x), want) and list(model.state_dict()) == keys
    assert replace_with_custom_ops(model, torch.nn.Sequential, "pbpr") == []  # already done
    assert restore_modules(model) == paths
    assert type(model.blocks[0]) is torch.nn.Sequential and torch.equal(model(x), want)
    # the operator names are free again
    assert replace_with_custom_ops(model, torch.nn.Sequential, "pbpr") == paths
    restore_modules(model)
    with pytest.raises(ValueError, match="the model itself"):
        replace_with_custom_ops(torch.nn.Sequential(), torch.nn.Sequential, "pbpr")


def test_public_names() -> None:
    """Every name the package exports resolves; the custom-operator ones come from their module."""
    import subprocess
    import sys

    import piece_by_piece_serialize as pbp

    for name in pbp.__all__:
        assert getattr(pbp, name) is not None, name
    assert pbp.as_custom_op is as_custom_op and pbp.CustomOpError is CustomOpError and issubclass(CustomOpError, TypeError)
    code = "import sys, piece_by_piece_serialize.custom_op; print('transformers' in sys.modules, 'lark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # neither is needed to wrap a plain module


def test_replace_takes_class_names_and_refuses_classes_that_match_nothing() -> None:
    model = Tower()
    x = torch.randn(3, 4)
    want = model(x)
    assert replace_with_custom_ops(model, "Sequential", "pbpn") == ["blocks.0", "blocks.1", "blocks.2", "shared"]
    assert torch.equal(model(x), want)
    restore_modules(model)
    assert replace_with_custom_ops(model, "torch.nn.modules.container.Sequential", "pbpn") == ["blocks.0", "blocks.1", "blocks.2", "shared"]
    restore_modules(model)
    with pytest.raises(
        ValueError,
        match=r"^replace_with_custom_ops: no submodule of the model is an instance of Conv2d; the model's submodules are "
        r"ModuleList \(x1\), Sequential \(x3\), Linear \(x4\), ReLU \(x3\)$",
    ):
        replace_with_custom_ops(model, torch.nn.Conv2d, "pbpn")
    with pytest.raises(ValueError, match=r"no module class of the model is named 'Conv2d'; its classes are Linear, ModuleList, ReLU, Sequential, Tower"):
        replace_with_custom_ops(model, "Conv2d", "pbpn")
    with pytest.raises(TypeError, match="replace_with_custom_ops: classes must be classes or class names, not int"):
        replace_with_custom_ops(model, 3, "pbpn")  # type: ignore[arg-type]
    assert all(not is_custom_op_module(m) for m in model.modules())  # nothing half done


def test_a_class_name_that_names_two_classes_is_refused() -> None:
    class Linear(torch.nn.Module):  # the same name as torch.nn.Linear
        def forward(self, x: Any) -> Any:
            return x

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), Linear())
    with pytest.raises(ValueError, match=r"'Linear' names 2 classes of the model \(torch\.nn\.modules\.linear\.Linear, .*Linear\); give the class itself"):
        replace_with_custom_ops(model, "Linear", "pbpn")


def test_errors_of_replace_are_named_after_it() -> None:
    with pytest.raises(ValueError, match=r"^replace_with_custom_ops: 'no namespace::blocks__0' is not an operator name"):
        replace_with_custom_ops(Tower(), torch.nn.Sequential, "no namespace")


def test_a_program_calling_the_operator_keeps_nothing_of_its_calls() -> None:
    """Note [eager results]: the kernel leaves its objects for the wrapper only; a program calls the operator
    itself, and before, every call's outputs stayed on the stack for good (a decode loop kept every step)."""
    import gc
    import weakref

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            return self.inner(x)

    model = Outer().eval()
    model.inner = as_custom_op(model.inner, next(_names))
    x = torch.randn(2, 4)
    with torch.no_grad():
        model(x)  # calibration: the wrapper takes the kernel's objects
    runnable = torch.export.export(model, (x,)).module()
    outputs = []
    with torch.no_grad():
        for _ in range(3):
            out = runnable(x)
            outputs.append(weakref.ref(out))
            del out
    gc.collect()
    assert [ref() for ref in outputs] == [None, None, None]
