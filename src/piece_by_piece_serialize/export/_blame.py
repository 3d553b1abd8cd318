"""Where an export attempt failed: the smallest module whose code raised, or whose guards broke the dynamic shapes.

Note [blame]
~~~~~~~~~~~~
An export fails in one of two ways. Most failures (a data-dependent guard, an operator or type fake tensors do
not support) are raised while the model runs under tracing: the innermost module whose ``forward`` (or a
method, or a plain function it called) was on the stack at that moment is to blame, read off the traceback.
A dynamic dimension whose declared range the code does not support is reported only after tracing, as a
constraint violation, by torch's check of every guard the trace added. :class:`Watch` records, while the
model is traced, how many guards the shape environment held when each module was entered and left; after the
failure every guard is evaluated over the declared range of its dimensions (the range's ends, the example's
sizes and their neighbours, and powers of two and their neighbours up to the end: a guard that holds on all of
them is taken as true), and each guard that fails is blamed on the innermost module open when it was added.
Dimensions given the same ``Dim`` are one dimension; a derived ``Dim`` is its expression of the root.

Blame is a hint, not a proof: the export is tried again with the blamed modules behind operators, and only
that try says whether the cut was enough.

Note [specialized dimensions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A piece exported alone declares dynamic the dimensions that differ between its recorded calls; when its code
specializes one (a Python loop over the sequence, as Jamba's Mamba mixer runs on its reference path), torch
raises a constraint violation that names the flat inputs by their place (``L['tensors'][17].size()[1]``) and not
the line. :class:`Specialized` keeps the symbol torch gives each such dimension as tracing begins; after the
failure, each symbol the shape environment replaced by an integer is a specialized dimension, named by the
piece's input, and the guard ``Eq(symbol, value)`` the trace added says where: torch records the frame of the
model's code that added it. That frame may be a function of no module (Jamba's ``mamba_selective_scan``), so the
export alone is watched as an attempt is (:class:`Watch`), and the innermost of the piece's submodules open when
the guard was added is named too: a piece put behind an operator whole cannot have its loop held by a
translation, and that submodule, behind an operator of its own instead, can (the report's programs by size say so).

Imports: :mod:`._record` (module paths); torch (and its sympy helpers) on use.
"""

from __future__ import annotations

import contextlib
import traceback
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ._record import module_paths

DATA_DEPENDENT = "data-dependent guard"
CONSTRAINT = "dynamic dimension constraint violated"
UNSUPPORTED = "unsupported operator or type"
OTHER = "other"
FAILURE_KINDS = (DATA_DEPENDENT, CONSTRAINT, UNSUPPORTED, OTHER)

# Sample points per dimension when checking a guard over a declared range (Note [blame]); the end of an unbounded
# range is taken as this.
_FAR = 8192


@dataclass(frozen=True)
class Failure:
    """Why an export attempt failed: the kind (one of :data:`FAILURE_KINDS`) and the first line of torch's message;
    ``detail`` for a constraint violation, the guard and where it is false; ``where`` the file and line of the
    model's own code torch failed in (``modeling_x.py:120``), when the traceback shows one; ``fix`` torch's
    suggested fix, when it gives one; ``text`` torch's whole message."""

    kind: str
    message: str
    detail: str = ""  # for a constraint violation, the guard added in the module and where it is false
    where: str = ""
    fix: str = ""
    text: str = ""
    inside: str = ""  # a piece's export alone: the submodule whose code specialized a size ("mamba (JambaMambaMixer)")

    @classmethod
    def of(cls, exc: BaseException, detail: str = "") -> Failure:
        innermost = reasons(exc)[-1]
        text = f"{type(innermost).__name__}: {str(innermost).strip()}"
        return cls(classify(exc), first_line(exc), detail, source_line(exc), "; ".join(suggested_fixes(exc)), text)


def source_line(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of the model's own code in the traceback of ``exc`` or its causes:
    neither torch's, nor this library's, nor Python's; "" when there is none."""
    import os
    import sysconfig

    import torch

    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skipped = (os.path.dirname(os.path.abspath(torch.__file__)), ours, sysconfig.get_paths()["stdlib"])
    for e in reversed(chain(exc)):  # the innermost exception first: it was raised nearest to the model's code
        found = ""
        tb: types.TracebackType | None = e.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if not name.startswith("<") and not os.path.abspath(name).startswith(skipped):
                found = f"{name}:{tb.tb_lineno}"
            tb = tb.tb_next
        if found:
            return found
    return ""


def _shorter(filename: str) -> str:
    """``filename`` from its package on (``transformers/cache_utils.py``) when it is installed, else from the
    working directory when it is under it (``tests/export/test_own_programs.py``), else as it is: every file the
    messages name is named so."""
    import os
    import sysconfig

    full = os.path.abspath(filename)
    for root in dict.fromkeys((sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], os.getcwd())):
        if full.startswith(os.path.join(root, "")):
            return os.path.relpath(full, root)
    return filename


def chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify(exc: BaseException) -> str:
    """The kind of an export failure, from the exception and its causes."""
    from torch._dynamo.exc import Unsupported, UserError, UserErrorType
    from torch._subclasses import fake_tensor as ft
    from torch.fx.experimental import symbolic_shapes as ss

    for e in chain(exc):
        if isinstance(e, (ss.GuardOnDataDependentSymNode, ss.PendingUnbackedSymbolNotFound, ft.DataDependentOutputException)):
            return DATA_DEPENDENT
        if isinstance(e, ss.ConstraintViolationError) or (isinstance(e, UserError) and e.error_type == UserErrorType.CONSTRAINT_VIOLATION):
            return CONSTRAINT
        if isinstance(e, UserError) and e.error_type == UserErrorType.DYNAMIC_CONTROL_FLOW:
            return DATA_DEPENDENT
        unsupported = (ft.UnsupportedOperatorException, ft.DynamicOutputShapeException, ft.UnsupportedFakeTensorException, Unsupported, NotImplementedError)
        if isinstance(e, unsupported):
            return UNSUPPORTED
    text = " ".join(str(e) for e in chain(exc))
    # torch words some refusals of fake tensors only in their message (a tensor's data read, numpy())
    if "data pointer" in text or "FakeTensor" in text or "fake tensor" in text.lower():
        return UNSUPPORTED
    return OTHER


# Exceptions code raises to look something up and catches to try another way: met as the implicit context
# (__context__) of a failure, they are how torch got there, not why it failed.
_LOOKUPS = (NameError, KeyError, AttributeError, StopIteration, ImportError)


def reasons(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, as :func:`chain`, but not through an implicit context that is a look-up torch
    caught (``NameError: module is not installed as a submodule``): what a message quotes."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out:
        out.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__ or isinstance(current.__context__, _LOOKUPS):
            break
        else:
            current = current.__context__
    return out


def first_line(exc: BaseException) -> str:
    """``Type: first non-empty line of the message`` of the innermost cause that has one."""
    for e in reversed(reasons(exc)):
        for line in str(e).splitlines():
            if line.strip():
                return f"{type(e).__name__}: {line.strip()}"
    return type(exc).__name__


def suggested_fixes(exc: BaseException) -> list[str]:
    """The fixes torch suggests: the lines under "Suggested fixes:" of a constraint violation (``feat = 4``), or
    the first check it offers for a data-dependent guard (``torch._check(...)``); torch's prose, read by lines."""
    for e in chain(exc):
        lines = [line.strip() for line in str(e).splitlines()]
        if "Suggested fixes:" in lines:
            fixes = []
            for line in lines[lines.index("Suggested fixes:") + 1 :]:
                if not line:
                    break
                fixes.append(line)
            return fixes
        for i, line in enumerate(lines):
            if line.startswith("To fix the error, insert one of the following checks"):
                offered = [x for x in lines[i + 1 : i + 4] if "torch._check" in x]
                return [offered[0].partition(". ")[2] or offered[0]] if offered else []
    return []


class Watch:
    """What one export attempt traced (Note [blame]): the module stack and each module's window of guards.

    ``enter`` is given to the exported :class:`FlatCall` (its ``on_enter``): it is called with the traced flat
    tensors and finds the shape environment, the declared dimensions and their ranges.
    """

    def __init__(self, model: Any, specs: Sequence[dict[int, Any] | None]) -> None:
        self.paths = module_paths(model)
        self.specs = specs
        self.events: list[tuple[int, int, str]] = []  # (guards so far, +1 enter | -1 leave, module path)
        self.env: Any = None
        self.ranges: dict[Any, Any] = {}  # declared symbol -> its range when tracing began
        self.canon: dict[Any, Any] = {}  # symbol -> its dimension's expression of one root symbol
        self.names: dict[Any, Any] = {}  # root symbol -> a symbol named after its Dim, for messages
        self.details: dict[str, str] = {}  # blamed module -> its first failing guard and where it fails
        self.places: dict[str, str] = {}  # blamed module -> the file, line and function that took that guard
        self.completed = False  # the model's forward returned: the failure came after tracing
        self.heartbeat: Any = None  # called with each module's path as tracing enters it (progress, for the log)

    def enter(self, tensors: tuple[Any, ...]) -> None:
        import torch
        from torch._guards import detect_fake_mode

        mode = detect_fake_mode(list(tensors))
        if mode is None or mode.shape_env is None:
            return
        self.env = mode.shape_env
        roots: dict[str, Any] = {}
        for i, (t, dims) in enumerate(zip(tensors, self.specs, strict=True)):
            for d, spec in (dims or {}).items():
                size = t.shape[d]
                if not isinstance(size, torch.SymInt):
                    continue
                expr = size.node.expr
                if not expr.is_Symbol:
                    continue
                name, fn = _group(spec, i, d)
                if fn is None:
                    self.canon.setdefault(expr, roots.setdefault(name, expr))
                elif name in roots:
                    self.canon.setdefault(expr, fn(roots[name]))
        import sympy

        for name, root in roots.items():
            self.ranges[root] = self.env.var_to_range[root]
            self.names[root] = sympy.Symbol(name, integer=True)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        import torch

        def pre(module: Any, inputs: Any) -> None:
            path = self.paths.get(id(module))
            if path is not None and self.env is not None:
                self.events.append((len(self.env.guards), 1, path))
                if self.heartbeat is not None:
                    self.heartbeat(path)

        def post(module: Any, inputs: Any, output: Any) -> None:
            path = self.paths.get(id(module))
            if path is not None and self.env is not None:
                self.events.append((len(self.env.guards), -1, path))
                self.completed = self.completed or path == ""

        handles = [
            torch.nn.modules.module.register_module_forward_pre_hook(pre),
            torch.nn.modules.module.register_module_forward_hook(post),
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    # ---- after the failure --------------------------------------------------------------------------

    def blame(self, exc: BaseException) -> list[str]:
        """The paths of the modules to blame for ``exc`` (Note [blame]); empty when none can be."""
        if not self.completed:
            path = _innermost_frame_module(exc, self.paths)
            if path is None:
                n = len(self.env.guards) if self.env is not None else 0
                path = self._owners(n + 1)[n]  # the modules still open when it failed
            return [] if path is None else [path]
        if classify(exc) != CONSTRAINT or self.env is None:
            return []
        blamed: set[str] = set()
        owners = self._owners(len(self.env.guards))
        for index, (expr, point) in self._violating():
            path = owners[index]
            if path is not None and path not in blamed:
                blamed.add(path)
                where = ", ".join(f"{self.names[s]}={v}" for s, v in sorted(point.items(), key=str) if s in expr.free_symbols)
                self.details[path] = f"guard {expr.xreplace(self.names)} is false at {where}"
                frame = self.env.guards[index].sloc.framework_loc  # the frame of the Python code that branched
                if isinstance(frame, traceback.FrameSummary):
                    self.places[path] = f"{_shorter(frame.filename)}:{frame.lineno} in {frame.name}"
        return sorted(blamed)

    def owner(self, index: int) -> str | None:
        """The path of the innermost module open when guard ``index`` was added (``None``: none was)."""
        return self._owners(index + 1)[index]

    def _owners(self, n: int) -> list[str | None]:
        """For each of the first ``n`` guards, the innermost module open when it was added; one pass over the
        events (a module entered with ``c`` guards so far owns guard ``c`` onwards, until it is left)."""
        owners: list[str | None] = []
        stack: list[str] = []
        for count, step, path in self.events:
            while len(owners) < min(count, n):
                owners.append(stack[-1] if stack else None)
            if step > 0:
                stack.append(path)
            elif stack and stack[-1] == path:
                stack.pop()
        while len(owners) < n:
            owners.append(stack[-1] if stack else None)
        return owners

    def _violating(self) -> Iterator[tuple[int, tuple[Any, dict[Any, int]]]]:
        """The guards that fail somewhere in the declared ranges (Note [blame]): their index, their expression
        of the root symbols and a point where they are false."""
        verdicts: dict[Any, dict[Any, int] | None] = {}
        for i, guard in enumerate(self.env.guards):
            expr = guard.expr.xreplace(self.canon)
            if expr not in verdicts:
                verdicts[expr] = self._fails(expr)
            point = verdicts[expr]
            if point is not None:
                yield i, (expr, point)

    def _fails(self, expr: Any) -> dict[Any, int] | None:
        from torch.utils._sympy.interp import sympy_interp
        from torch.utils._sympy.reference import PythonReferenceAnalysis

        symbols = expr.free_symbols
        if not symbols or not symbols <= self.ranges.keys():
            return None
        hints = getattr(self.env, "backed_var_to_val", None) or self.env.var_to_val
        base = {s: int(hints[s]) for s in symbols}
        for point in _points(symbols, self.ranges, base):
            try:
                if not sympy_interp(PythonReferenceAnalysis, point, expr):
                    return point
            except (ArithmeticError, TypeError, ValueError):
                continue
        return None


class Specialized:
    """The dynamic dimensions of a piece's export alone its code specialized, and where (Note [specialized
    dimensions]). ``enter`` is given to the exported :class:`FlatCall` (its ``on_enter``), and enters ``watch``
    too, which the export runs under (:meth:`Watch.watching`); ``specs`` are the dimensions declared dynamic of the
    piece's own inputs, which follow ``offset`` weights."""

    def __init__(self, specs: Sequence[dict[int, Any] | None], offset: int, watch: Watch) -> None:
        self.specs, self.offset = specs, offset
        self.watch = watch  # the piece's modules as tracing entered and left them: whose code specialized
        self.env: Any = None
        self.symbols: list[tuple[int, int, Any]] = []  # (input, dimension, its symbol as tracing began)

    def enter(self, tensors: tuple[Any, ...]) -> None:
        import torch
        from torch._guards import detect_fake_mode

        self.watch.enter(tensors)
        mode = detect_fake_mode(list(tensors))
        if mode is None or mode.shape_env is None:
            return
        self.env = mode.shape_env
        for i, dims in enumerate(self.specs):
            for d in dims or {}:
                size = tensors[self.offset + i].shape[d]
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    self.symbols.append((i, d, size.node.expr))

    def describe(self, labels: Sequence[str], module: Any) -> tuple[str, str, str]:
        """("specialized to 6 in its submodule mamba (JambaMambaMixer) by
        transformers/models/jamba/modeling_jamba.py:422 (in mamba_selective_scan): hidden_states dim 1", that
        frame's ``file:line``, that submodule as "mamba (JambaMambaMixer)"), the inputs named by ``labels``; ("",
        "", "") when it specialized none. Where first: a report's line clips it. The submodule is the innermost one of ``module`` (the piece) the
        watch saw open when the guard was added, if any: a piece put behind an operator whole cannot hold its
        loop in a translation, and that submodule, behind an operator of its own, can."""
        if self.env is None:
            return "", "", ""
        by_value: dict[int, list[str]] = {}
        for i, d, symbol in self.symbols:
            value = self.env.replace(symbol)
            if value.is_Integer:
                by_value.setdefault(int(value), []).append(f"{labels[i]} dim {d}")
        parts, where, inner = [], "", ""
        for value, dims in by_value.items():
            index, frame = self._guard(value)
            at = "" if frame is None else f" by {_shorter(frame.filename)}:{frame.lineno} (in {frame.name})"
            owner = None if index is None else self.watch.owner(index)
            if owner:  # "" is the piece itself; the submodule first, as what to act on
                inner = inner or f"{owner} ({type(module.get_submodule(owner)).__name__})"
                at = f" in its submodule {inner}{at}"
            where = where or ("" if frame is None else f"{frame.filename}:{frame.lineno}")
            parts.append(f"specialized to {value}{at}: {', '.join(dims)}")
        return "; ".join(parts), where, inner

    def _guard(self, value: int) -> tuple[int | None, Any]:
        """The index and the frame of the model's code of the first guard ``Eq(symbol, value)`` on a declared
        symbol."""
        import sympy

        declared = {symbol for _, _, symbol in self.symbols}
        for index, guard in enumerate(self.env.guards):
            expr, frame = guard.expr, guard.sloc.framework_loc
            if (isinstance(expr, sympy.Eq) and isinstance(frame, traceback.FrameSummary) and len(expr.free_symbols) == 1
                    and expr.free_symbols <= declared and sympy.Integer(value) in (expr.lhs, expr.rhs)):  # fmt: skip
                return index, frame
        return None, None


def _group(spec: Any, i: int, d: int) -> tuple[str, Any]:
    """The dimension a spec names (a named Dim by its name; each hint by itself) and, for a derived Dim, its
    function of the root."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint

    if isinstance(spec, _DimHint):
        return f"#{i}.{d}", None
    if isinstance(spec, _DerivedDim):
        return str(spec.root.__name__), spec.fn
    return str(spec.__name__), None


def _values(low: int, high: int, hint: int) -> list[int]:
    top = min(high, max(_FAR, hint * 4))
    near = [low, low + 1, low + 2, low + 3, hint - 1, hint, hint + 1, 2 * hint, (low + top) // 2, top - 1, top]
    near += [v for k in range(2, 14) for v in (2**k - 1, 2**k, 2**k + 1)]
    return sorted({v for v in near if low <= v <= top})


def _points(symbols: Any, ranges: dict[Any, Any], base: dict[Any, int]) -> Iterator[dict[Any, int]]:
    """Points of the declared ranges at which a guard is checked: each dimension through its values with the
    others at the example's sizes, then all at their lower and all at their upper ends."""
    bounds = {}
    for s in symbols:
        r = ranges[s]
        low, high = _end(r.lower), _end(r.upper)
        bounds[s] = (0 if low is None else low, _FAR if high is None else high)
    for s in symbols:
        for v in _values(*bounds[s], base[s]):
            yield {**base, s: v}
    yield {s: bounds[s][0] for s in symbols}
    yield {s: min(bounds[s][1], _FAR) for s in symbols}


def _end(x: Any) -> int | None:
    """An end of a value range as an int, None when infinite: sympy's ``oo`` or torch's ``int_oo``, whose
    ``is_finite`` is True (it is a sympy Integer standing for infinity)."""
    from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity

    if isinstance(x, (IntInfinity, NegativeIntInfinity)) or not x.is_finite:
        return None
    return int(x)


def _innermost_frame_module(exc: BaseException, paths: dict[int, str]) -> str | None:
    """The module of the innermost traceback frame whose ``self`` is a module of the model, over the exception
    and its causes (torch re-raises a tracing failure from inside its own frames)."""
    found: str | None = None
    for e in chain(exc):
        tb: types.TracebackType | None = e.__traceback__
        last = None
        while tb is not None:
            owner = tb.tb_frame.f_locals.get("self")
            if owner is not None and id(owner) in paths:
                last = paths[id(owner)]
            tb = tb.tb_next
        if last is not None:
            found = last
    return found
