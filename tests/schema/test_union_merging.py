"""Union member merging through an index gives exactly what torch's pairwise loop gives.

torch merges a Union's members pairwise (filterDuplicateSubtypes: each member, from the right, with the nearest
member before it that it unifies with), which is quadratic. The parser finds the same partner through shape keys
(Note [Indexed member merging] in schema/_union.py). Here both run on the same flattened members, drawn from a
seeded grammar of member types that covers every wildcard (Any, AnyClassType, Scalar, None inside a Future or a
tuple, nested Unions, Await) and every kind that merges (Futures, tuples, type variables, classes): the
survivors must be the same objects' equals, in the same order, with the same source spans. Every case counts.
The torch oracle for whole Unions is tests/schema/test_schema_union_oracle.py.
"""

from __future__ import annotations

import random

from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import ClassType, TypeVar, _all_types, parse_schema
from piece_by_piece_serialize.schema import _union as st

ATOMS = [
    "int", "float", "complex", "Scalar", "SymInt", "str", "bool", "NoneType", "Tensor", "Any", "AnyClassType",
    "__torch__.torch.classes.quantized.LinearPackedParamsBase", "__torch__.torch.classes.ns.Other", "t", "u",
    "int[]", "Dict(str, int)", "Dict(str, t)", "RRef(int)", "Device",
]  # fmt: skip


def _member_text(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.35:
        return rng.choice(ATOMS)
    kind = rng.random()
    inner = _member_text(rng, depth - 1)
    if kind < 0.35:
        return f"Future({inner})"
    if kind < 0.45:
        return f"Await({inner})"
    if kind < 0.75:
        elems = [inner] + [_member_text(rng, depth - 1) for _ in range(rng.randrange(0, 3))]
        return "(" + ", ".join(elems) + ")"
    if kind < 0.9:
        return inner + "?" if inner != "NoneType" else inner
    return f"Union({inner}, {_member_text(rng, depth - 1)})"


def _parsed_member(text: str):
    try:
        schema = parse_schema(f"f({text} x) -> ()")
    except SchemaError:
        return None
    return st._member(schema.arguments[0].type)


def _spans(types) -> list:
    return [
        (str(node), node.span) for t in types for node in _all_types(t) if isinstance(node, (TypeVar, ClassType))
    ]


def _members(rng: random.Random, size: int, wild_share: float) -> list:
    members = []
    while len(members) < size:
        text = _member_text(rng, 3)
        if rng.random() > wild_share:  # mostly members without a wildcard, which the shape keys index
            for wild in ("Any", "AnyClassType", "Scalar", "NoneType", "Union", "Await"):
                text = text.replace(wild, "str")
        m = _parsed_member(text)
        if m is not None:
            members.append(m)
    return members


def test_indexed_merging_equals_the_pairwise_loop() -> None:
    rng = random.Random(15)
    counts = {"cases": 0, "merged": 0, "no merge": 0, "members": 0, "merges": 0}
    for case in range(3000):
        size = rng.choice((2, 3, 5, 8, 13, 30))
        members = _members(rng, size, wild_share=rng.choice((0.0, 0.1, 0.5, 1.0)))
        types = list(st._flatten(members))
        assert all(t._depth <= st._INDEXED_DEPTH for t in types)
        pairwise = st._merge_pairwise(list(types), 0)
        indexed = st._merge_indexed(list(types), 0)
        assert indexed == pairwise, (case, [str(t) for t in types])
        assert [str(t) for t in indexed] == [str(t) for t in pairwise]
        assert _spans(indexed) == _spans(pairwise)
        counts["cases"] += 1
        counts["members"] += len(types)
        counts["merges"] += len(types) - len(pairwise)
        counts["merged" if len(pairwise) < len(types) else "no merge"] += 1
    # measured: 803 cases with merges (3,012 merges in all), 2,197 without, 29,078 members
    assert counts["cases"] == 3000 and counts["merged"] > 600 and counts["no merge"] > 1500, counts
    assert counts["merges"] > 2000, counts


def test_every_member_pair_of_the_oracle_grid() -> None:
    """The members of the torch oracle grid, each pair and each triple in both orders."""
    from test_schema_union_oracle import MEMBERS

    atoms = [m for m in (_parsed_member(t) for t in MEMBERS + [t + "?" for t in MEMBERS if t != "NoneType"])]
    atoms = [a for a in atoms if a is not None]
    cases = 0
    for a in atoms:
        for b in atoms:
            for c in (None, *atoms[::3]):
                types = list(st._flatten([a, b] + ([c] if c is not None else [])))
                assert st._merge_indexed(list(types), 0) == st._merge_pairwise(list(types), 0)
                cases += 1
    assert cases == len(atoms) ** 2 * (1 + len(atoms[::3]))


def test_deep_members_take_the_pairwise_loop() -> None:
    """A member deeper than _INDEXED_DEPTH sends the Union through torch's loop, errors included."""
    deep = "Future(" * 60 + "int" + ")" * 60
    text = f"f(Union({deep}, Future(int), str) x) -> ()"
    assert str(parse_schema(text)) == f"f(Union({deep}, Future(int), str) x) -> ()"
    member = _parsed_member(deep)
    assert member._depth > st._INDEXED_DEPTH
    types = list(st._flatten([member, _parsed_member("Future(int)"), _parsed_member("str")]))
    assert st._filter_duplicates(list(types), 0) == st._merge_pairwise(list(types), 0)
