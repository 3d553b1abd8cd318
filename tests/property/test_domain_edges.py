"""``Domain.edges`` of a condition on one size gives the first change of its value on either side of the
start, as a scan of every size finds it (Note [edges of a domain] in ``export/_edges.py``).

Conditions are drawn over the domain reader's vocabulary (sums, products, negations, floor divisions, remainders,
max and min of the size and integers; comparisons joined by and, or, not). A condition's value at a size is what
``Domain.why_not`` says of it there: it holds, it is false, or it divides by zero, three values. Near the start
(60 sizes either side) every condition's edges are exact; over a range of 5,000 sizes, a condition whose
comparisons are of affine functions of the size (drawn without division, remainder, max, min or a product of the
size with itself) has its changes solved for, and so exact at any distance."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from piece_by_piece_serialize.domains import Const, Domain, Op, Size

X = Size(0, 0)
_COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


def _terms(affine: bool) -> st.SearchStrategy[Any]:
    leaf = st.one_of(st.just(X), st.integers(-60, 3000).map(Const))

    def grow(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        pair = st.tuples(children, children)
        scaled = st.tuples(st.integers(-9, 9).map(Const), children)  # a product by a constant: still affine
        forms = [
            st.tuples(st.sampled_from(["add", "sub"]), pair).map(lambda t: Op(t[0], t[1])),
            scaled.map(lambda t: Op("mul", t)),
            children.map(lambda c: Op("neg", (c,))),
        ]
        if not affine:
            forms += [
                st.tuples(st.sampled_from(["mul", "max", "min"]), pair).map(lambda t: Op(t[0], t[1])),
                st.tuples(st.sampled_from(["floordiv", "mod"]), children, st.integers(-3, 9).map(Const)).map(lambda t: Op(t[0], t[1:])),
                st.tuples(st.sampled_from(["floordiv", "mod"]), st.integers(-50, 50).map(Const), children).map(lambda t: Op(t[0], t[1:])),
            ]
        return st.one_of(*forms)

    return st.recursive(leaf, grow, max_leaves=5)


def _conditions(affine: bool) -> st.SearchStrategy[Any]:
    terms = _terms(affine)
    compare = st.tuples(st.sampled_from(_COMPARE), terms, terms).map(lambda t: Op(t[0], (t[1], t[2])))

    def join(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.tuples(st.sampled_from(["and", "or"]), st.lists(children, min_size=2, max_size=3)).map(lambda t: Op(t[0], tuple(t[1]))),
            children.map(lambda c: Op("not", (c,))),
        )

    return st.recursive(compare, join, max_leaves=3)


def _value(domain: Domain, v: int) -> str:
    why = domain.why_not([(v,)])
    return "holds" if not why else ("zero" if "divides by zero" in why else "false")


def _scanned(domain: Domain, start: int, low: int, high: int) -> set[int]:
    """The sizes on either side of the first change from ``start``, up and down, by reading every size."""
    here, out = _value(domain, start), set()
    for step, end in ((1, high + 1), (-1, low - 1)):
        for v in range(start + step, end, step):
            if _value(domain, v) != here:
                out.update((v - step, v))
                break
    return out


def _edges(condition: Any, start: int, low: int, high: int) -> tuple[set[int], set[int]]:
    """The edges ``Domain.edges`` gives a domain of ``condition`` alone, and those a scan of every size finds."""
    domain = Domain((condition,), 1, (X,), (1,))
    return domain.edges([(start,)], 0, low, high).get((X,), set()), _scanned(domain, start, low, high)


def _no_tie(condition: Any) -> None:
    # a condition ``size == constant`` or ``size == size`` is a domain's fixed size or tie, which has no edges
    assume(not (isinstance(condition, Op) and condition.name == "eq" and isinstance(condition.args[0], Size)
                and isinstance(condition.args[1], Const | Size)))  # fmt: skip


@given(_conditions(affine=False), st.integers(1, 2000))
def test_near_the_start_the_edges_of_any_condition_are_its_first_changes(condition: Any, start: int) -> None:
    _no_tie(condition)
    got, want = _edges(condition, start, max(1, start - 60), start + 60)
    assert got == want, str(condition)


@given(_conditions(affine=True), st.integers(1, 5000))
def test_the_edges_of_an_affine_condition_are_its_first_changes_at_any_distance(condition: Any, start: int) -> None:
    _no_tie(condition)
    got, want = _edges(condition, start, 1, 5000)
    assert got == want, str(condition)


def test_the_edges_of_named_conditions_are_their_first_changes_either_side() -> None:
    # solved for where affine (a change 900 sizes away, a second change after a first, a product by zero, sides
    # that meet between two sizes), scanned near the start where not (a remainder): each against a scan of every
    # size from the start
    conditions = [
        Op("ne", (Op("mul", (Const(8), Op("add", (X, Const(3))))), Const(8 * 1000))),  # only 997 is outside
        Op("and", (Op("le", (X, Const(300))), Op("ne", (X, Const(150))))),
        Op("or", (Op("gt", (Op("mul", (Const(0), X)), Const(5))), Op("ge", (Op("neg", (X,)), Const(-40))))),
        Op("lt", (Op("sub", (X, X)), Const(1))),  # true at every size: no edge
        Op("eq", (Op("mod", (X, Const(7))), Const(3))),  # not affine: scanned, its first changes near the start
        Op("gt", (Op("sub", (Const(1999), Op("mul", (X, Const(2))))), Op("floordiv", (Const(9), Const(2))))),
        Op("not", (Op("lt", (Op("mul", (Const(3), X)), Const(1000))),)),  # where the sides meet between two sizes
        Op("le", (Op("sub", (Const(500), Op("mul", (X, Const(3))))), Const(7))),
    ]
    for condition in conditions:
        for start, low, high in ((100, 1, 2000), (5, 1, 100), (160, 140, 1200)):
            got, want = _edges(condition, start, low, high)
            assert got == want, (str(condition), start, got, want)
