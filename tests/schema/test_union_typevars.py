"""Unions of type variables and of lists, dicts and RRefs of them, against torch.

torch's type equality ignores the names of type variables, so ``Union(a[], b[])`` unifies into one member
and torch stops on an internal assert, as for ``Union(a, b)``; our parser must refuse the same texts and
read every other one as torch does (found by tests/property: ``Union(a.Bar[], a[])?``). Every ordered pair
and triple of the members below is parsed by both; the counts are pinned so that a change shows.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from piece_by_piece_serialize import parse_schema  # noqa: E402
from piece_by_piece_serialize.errors import SchemaError  # noqa: E402

MEMBERS = [
    "a", "b", "a.Bar", "int", "a[]", "b[]", "int[]", "a[][]", "b[][]", "Dict(str, a)", "Dict(str, b)",
    "RRef(a)", "RRef(b)", "Future(a)", "(b, int)", "a?[]", "b?[]", "None", "Scalar",
]


def test_unions_agree_with_torch() -> None:
    accepted = refused = 0
    for n in (2, 3):
        for members in itertools.permutations(MEMBERS, n):
            text = f"f(Union({', '.join(members)}) x) -> ()"
            try:
                theirs = torch._C.parse_schema(text)
            except RuntimeError:
                theirs = None
            try:
                ours = parse_schema(text)
            except SchemaError:
                ours = None
            assert (ours is None) == (theirs is None), (text, ours and str(ours))
            if ours is None:
                refused += 1
            else:
                assert torch._C.parse_schema(str(ours)) == theirs, text
                accepted += 1
    assert accepted + refused == 19 * 18 + 19 * 18 * 17
    assert refused > 0 and accepted > 0
    assert (accepted, refused) == _counts()


def _counts() -> tuple[int, int]:
    # measured against torch 2.13.0 when the test was written
    return (6134, 22)
