"""Output shapes under fake tensors, learned from the eager calls of a module behind a custom operator.

The rules are those of Note [learned shapes], in the package docstring: they are the contract a user relies on
when exporting, and the API reference shows them there.

Invariants: nothing here runs the module or holds a tensor; a rule is plain data (tuples of ints), so a call
record can be compared and printed; every refusal is a :class:`CustomOpError` that names the output dimension
and the candidates involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._error import CustomOpError

# ("dim", ((i, d), ...)) | ("const", (c,)) | ("sum", (((i, d), (j, e)), ...)) | ("plus", (((i, d), c), ...))
# | ("min", (((i, d), (j, e) or None, cap), ...))
Rule = tuple[str, tuple[Any, ...]]


# Candidates kept per rule: enough to show an ambiguity, bounded for modules with hundreds of inputs.
_MAX_CANDIDATES = 32


def learn(op: str, shapes: Sequence[tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]]) -> list[list[Rule]]:
    """For each output tensor, one rule per dimension, from the recorded calls."""
    ins = [[size for shape in call_in for size in shape] for call_in, _ in shapes]
    where = [(i, d) for i, shape in enumerate(shapes[0][0]) for d in range(len(shape))]
    if any(len(x) != len(where) for x in ins) or len({tuple(len(s) for s in out) for _, out in shapes}) != 1:
        raise CustomOpError(f"{op}: the recorded calls of one structure have tensors of different ranks; pass fake=")
    by_value = _positions(ins[0])
    indexed = {0: by_value}  # the calls' positions by size, each made once: the capped rules read other calls'
    rules: list[list[Rule]] = []
    for k, rank in enumerate(len(s) for s in shapes[0][1]):
        per_dim: list[Rule] = []
        for d in range(rank):
            target = [out[k][d] for _, out in shapes]
            dims = [a for a in by_value.get(target[0], ()) if all(x[a] == t for x, t in zip(ins, target, strict=False))]
            if dims:
                per_dim.append(("dim", tuple(where[a] for a in dims[:_MAX_CANDIDATES])))
                continue
            if len(set(target)) == 1:
                per_dim.append(("const", (target[0],)))
                continue
            sums = [
                (a, b)
                for a, va in enumerate(ins[0])
                for b in by_value.get(target[0] - va, ())
                if a <= b and all(x[a] + x[b] == t for x, t in zip(ins, target, strict=False))
            ]
            if sums:
                per_dim.append(("sum", tuple((where[a], where[b]) for a, b in sums[:_MAX_CANDIDATES])))
                continue
            plus = [
                a for a in range(len(where)) if len({t - x[a] for x, t in zip(ins, target, strict=False)}) == 1
            ]
            if plus:
                per_dim.append(("plus", tuple((where[a], target[0] - ins[0][a]) for a in plus[:_MAX_CANDIDATES])))
                continue
            per_dim.append(_bounded(ins, target, where, indexed))
        rules.append(per_dim)
    return rules


def _positions(sizes: list[int]) -> dict[int, list[int]]:
    """Where each size occurs among a call's input dimensions."""
    by_value: dict[int, list[int]] = {}
    for a, v in enumerate(sizes):
        by_value.setdefault(v, []).append(a)
    return by_value


def _bounded(ins: list[list[int]], target: list[int], where: list[tuple[int, int]], indexed: dict[int, dict[int, list[int]]]) -> Rule:
    """The last rules: an input dimension, or the sum of two, capped at a constant (a sliding window's cache keeps
    at most its window: Llama 4's chunked attention). The cap is the largest target; a call below it fixes the
    candidates (as the sum's first call does), and at least one call must reach past it (else an earlier rule
    holds)."""
    cap = max(target)
    u = next(c for c, t in enumerate(target) if t < cap)  # there is one: a constant target is an earlier rule
    below = ins[u]
    by_value = indexed.get(u)
    if by_value is None:
        by_value = indexed[u] = _positions(below)
    capped = [
        (a, b)
        for a, va in enumerate(below)
        for b in ([None] if va == target[u] else []) + [b for b in by_value.get(target[u] - va, ()) if b >= a]
        if all(min(x[a] + (0 if b is None else x[b]), cap) == t for x, t in zip(ins, target, strict=False))
        and any(x[a] + (0 if b is None else x[b]) > cap for x in ins)
    ]
    if not capped:
        return ("none", ())
    return ("min", tuple((where[a], None if b is None else where[b], cap) for a, b in capped[:_MAX_CANDIDATES]))


def _spell(kind: str, cand: Any) -> str:
    if kind == "dim":
        return f"input tensor {cand[0]} dim {cand[1]}"
    if kind == "const":
        return str(cand)
    if kind == "sum":
        (i, d), (j, e) = cand
        return f"input tensor {i} dim {d} + input tensor {j} dim {e}"
    if kind == "min":
        (i, d), second, cap = cand
        return f"min(input tensor {i} dim {d}{'' if second is None else f' + input tensor {second[0]} dim {second[1]}'}, {cap})"
    (i, d), c = cand
    return f"input tensor {i} dim {d} {'+' if c >= 0 else '-'} {abs(c)}"


def _value(kind: str, cand: Any, sizes: Sequence[Any]) -> Any:
    if kind == "dim":
        return sizes[cand[0]][cand[1]]
    if kind == "const":
        return cand
    if kind == "sum":
        (i, d), (j, e) = cand
        return sizes[i][d] + sizes[j][e]
    if kind == "min":
        import torch

        (i, d), second, cap = cand
        return torch.sym_min(sizes[i][d] + (0 if second is None else sizes[second[0]][second[1]]), cap)  # type: ignore[no-untyped-call]  # unannotated in torch
    (i, d), c = cand
    return sizes[i][d] + c


def _expression(size: Any) -> Any:
    """A symbolic size's expression, as its shape environment has simplified it (``None`` for a plain int)."""
    return None if isinstance(size, int) else size.node.expr


def evaluate(op: str, k: int, rules: Sequence[Rule], sizes: Sequence[Any]) -> list[Any]:
    from torch.fx.experimental.symbolic_shapes import optimization_hint, statically_known_true

    shape = []
    for d, (kind, cands) in enumerate(rules):
        if kind == "none":
            raise CustomOpError(
                f"{op}: output tensor {k} dim {d} is not an input dimension, a constant, a sum of them or one of those "
                "capped at a constant in the recorded calls; pass fake= to as_custom_op"
            )
        try:
            values = [_value(kind, c, sizes) for c in cands]
        except IndexError:  # a rule read from a file that does not fit this call (the archive's reader checks the rest)
            ranks = ", ".join(str(len(s)) for s in sizes)
            raise CustomOpError(
                f"{op}: output tensor {k} dim {d}: its rule names a dimension this call's input tensors lack "
                f"({', '.join(_spell(kind, c) for c in cands)}; their ranks: {ranks})"
            ) from None
        first = _expression(values[0])
        for c, v in zip(cands[1:], values[1:], strict=False):
            # the same expression (one declared Dim: the batch of every input) is equal without asking sympy, which
            # costs about a millisecond a comparison (issue 28: 80 layers' calls, a dozen candidates each)
            if (first is not None and _expression(v) == first) or statically_known_true(values[0] == v):
                continue
            if not isinstance(values[0], int) and not isinstance(v, int) and optimization_hint(values[0]) == optimization_hint(v):
                if kind == "min":
                    # Capped sizes equal in every recorded call and the traced inputs: a sliding cache's keys and its
                    # count, equal below the window and both past the cap beyond it. Telling the tracer they are
                    # equal would tie the uncapped sizes together (the count to the keys' length, which part
                    # ways past the window): the first candidate is taken, as the rule's data cannot tell them apart.
                    continue
                # Two symbolic sizes that every recorded call and the traced inputs have equal (the batch of two
                # inputs): say so to the tracer, which fails if the user declared them independent.
                import torch

                torch._check(values[0] == v)  # type: ignore[no-untyped-call]  # unannotated in torch
            else:
                raise CustomOpError(
                    f"{op}: output tensor {k} dim {d} cannot be derived: in every recorded call it equals both "
                    f"{_spell(kind, cands[0])} and {_spell(kind, c)}, which differ here ({values[0]} and {v}); call the "
                    "module once more in eager mode with other sizes (batch, sequence), or pass fake= to as_custom_op"
                )
        shape.append(values[0])
    return shape
