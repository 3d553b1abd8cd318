"""Union normalisation agrees with torch over a grid of member combinations.

torch builds every ``Union(...)`` by flattening, unifying (``unifyTypes``: subtypes absorbed, Futures and
equal-length tuples merged) and sorting its members (Note [Union normalisation] in schema/_union.py). Each
grid case is one schema handed to ``torch._C.parse_schema`` and to ours; they must agree on accept/reject and on
the printed text, except where a documented printer deviation applies (Note [Printer deviations]: torch prints a
Union holding Scalar as ``Union(, str, Scalar)``, and an optional of an optional Scalar as ``Union(Scalar)?``),
and then torch must read our text back as an equal schema. Every case is counted; nothing is sampled.
"""

from __future__ import annotations

import itertools
import re

import pytest

from _schema_oracle import both
from piece_by_piece_serialize.errors import SchemaError
from piece_by_piece_serialize.schema import BaseType, OptionalType, UnionType, _all_types, parse_schema, torch_class_exists

SCALAR = BaseType("Scalar")

torch = pytest.importorskip("torch")

MEMBERS = [
    "int", "float", "complex", "Scalar", "SymInt", "ScalarType", "bool", "str", "NoneType", "Tensor", "Any",
    "AnyClassType", "__torch__.torch.classes.quantized.LinearPackedParamsBase", "t", "u", "Future(int)",
    "Future(NoneType)", "Future(Scalar)", "Future(float?)", "Await(int)", "Await(Scalar)", "RRef(int)",
    "(int, float)", "(int, NoneType)", "(Scalar, str)", "(float?, str)", "int[]", "Dict(str, int)",
    "Union(int, str)", "Scalar[]", "Union(Scalar)[]", "Dict(str, Union(Scalar))",
]  # fmt: skip


def _cases(keep=lambda *atoms: True, members=MEMBERS) -> list[str]:
    """The grid; ``keep(*atoms)`` selects the combinations of member texts to include."""
    # members with and without "?", except NoneType? (an error in both: checked by the corpus)
    atoms = members + [m + "?" for m in members if m != "NoneType"]
    pairs = [f"Union({a}, {b})" for a, b in itertools.product(atoms, repeat=2) if keep(a, b)]
    triples = [f"Union({a}, {b}, {c})" for a, b, c in itertools.combinations(members, 3) if keep(a, b, c)]
    unions = pairs + triples
    wrapped = [f"{u}?" for u in pairs] + [f"Future({u})" for u in pairs] + [f"({u}, int)" for u in pairs]
    product = [(a, b) for a, b in itertools.product(atoms, repeat=2) if keep(a, b)]
    futures = [f"Union(Future({a}), Future({b}), str)" for a, b in product]
    tuples = [f"Union(({a}, int), ({b}, int), str)" for a, b in product]
    return unions + wrapped + futures + tuples


def _documented(schema: object) -> bool:
    """A documented printer deviation applies: a Union of two or more members holding Scalar (torch prints
    ``Union(, str, Scalar)``), or an optional Scalar (torch prints ``Union(Scalar)?`` for ``Scalar??``)."""
    for node in _all_types(schema.arguments[0].type):  # type: ignore[attr-defined]
        if isinstance(node, UnionType) and len(node.members) >= 2 and SCALAR in node.members:
            return True
        if isinstance(node, OptionalType) and node.elem == SCALAR:
            return True
    return False


def test_union_grid_agrees_with_torch() -> None:
    """Accept/reject and printed text agree with torch on every grid case; our text is a fixed point."""
    cases = _cases()
    counts = {"both reject": 0, "same text": 0, "documented deviation": 0}
    disagreements = []
    for t in cases:
        theirs, ours = both(f"f({t} x) -> ()")
        if theirs is None or ours is None:
            if theirs is None and ours is None:
                counts["both reject"] += 1
            else:
                disagreements.append((t, str(theirs), str(ours)))
            continue
        # canonical = fixed point
        assert parse_schema(str(ours)) == ours and str(parse_schema(str(ours))) == str(ours), t
        if str(ours) == str(theirs):
            counts["same text"] += 1
        elif _documented(ours) and torch._C.parse_schema(str(ours)) == theirs:
            counts["documented deviation"] += 1
        else:
            disagreements.append((t, str(theirs), str(ours)))
    assert disagreements[:10] == [] and len(disagreements) == 0
    assert sum(counts.values()) == len(cases) == 28_774
    # measured with torch 2.13: every outcome is exercised
    assert counts == {"both reject": 920, "same text": 26_669, "documented deviation": 1_185}


MISSPELLED = "__torch__.torch.classes.quantized.LinearPacpedParamsBase"  # not registered


def test_every_written_class_is_checked() -> None:
    """With ``class_exists=torch_class_exists`` an unregistered class is an error wherever it is written, even
    when the Union absorbs it (``AnyClassType``, ``Any``, ``Future(Any)``): torch checks while it parses."""
    members = [MISSPELLED if m.startswith("__torch__") else m for m in MEMBERS]
    cases = _cases(lambda *atoms: any(a.startswith(MISSPELLED) for a in atoms), members)
    agree = 0
    for t in cases:
        text = f"f({t} x) -> ()"
        with pytest.raises(RuntimeError):
            torch._C.parse_schema(text)
        with pytest.raises(SchemaError):
            parse_schema(text, class_exists=torch_class_exists)
        agree += 1
    assert agree == len(cases) == 1_953


def test_every_written_type_variable_is_checked() -> None:
    """With ``allow_typevars=False`` a type variable is an error even when the Union absorbs it."""
    cases = _cases(lambda *atoms: bool({"t", "u", "t?", "u?"}.intersection(atoms)))
    agree = 0
    for t in cases:
        text = f"foo::f({t} x) -> ()"
        with pytest.raises(RuntimeError):
            torch._C.parse_schema(text, allow_typevars=False)
        with pytest.raises(SchemaError):
            parse_schema(text, allow_typevars=False)
        agree += 1
    assert agree == len(cases) == 3_828


def test_absorbed_class_error_text() -> None:
    text = f"f(Union(int, Stream, {MISSPELLED}, AnyClassType) y) -> ()"
    assert str(parse_schema(text)) == "f(Union(int, Stream, AnyClassType) y) -> ()"
    with pytest.raises(SchemaError) as info:
        parse_schema(text, class_exists=torch_class_exists)
    assert info.value.pos == text.index("__torch__")
    assert info.value.msg == (
        "unknown custom class type 'quantized.LinearPacpedParamsBase' (register it with torch::class_ first)"
    )


# Unions of type variables and of lists, dicts and RRefs of them. torch's type equality ignores the names of type
# variables, so Union(a[], b[]) unifies into one member and torch stops on an internal assert, as for Union(a, b);
# ours must refuse the same texts and read every other one as torch does (found by tests/property:
# Union(a.Bar[], a[])?). Every ordered pair and triple of the members below is parsed by both; the counts are
# pinned so that a change shows.
TYPEVAR_MEMBERS = [
    "a", "b", "a.Bar", "int", "a[]", "b[]", "int[]", "a[][]", "b[][]", "Dict(str, a)", "Dict(str, b)",
    "RRef(a)", "RRef(b)", "Future(a)", "(b, int)", "a?[]", "b?[]", "None", "Scalar",
]


def test_unions_of_type_variables_agree_with_torch() -> None:
    accepted = refused = 0
    for n in (2, 3):
        for members in itertools.permutations(TYPEVAR_MEMBERS, n):
            text = f"f(Union({', '.join(members)}) x) -> ()"
            theirs, ours = both(text)
            assert (ours is None) == (theirs is None), (text, ours and str(ours))
            if ours is None:
                refused += 1
            else:
                assert torch._C.parse_schema(str(ours)) == theirs, text
                accepted += 1
    assert accepted + refused == 19 * 18 + 19 * 18 * 17
    # measured against torch 2.13.0 when the test was written
    assert (accepted, refused) == (6134, 22)


@pytest.mark.parametrize(
    ("union", "gone"),
    [
        ("Union((int, Any), (Any, (Tensor, Tensor)), (str, (int, str)))", "(str, (int, str))"),  # torch: an assert, read again
        ("Union((int, Any), (Any, (Tensor, Tensor)), (str, (int, str)), Device)", "(str, (int, str))"),  # another Union
    ],
)
def test_a_union_that_normalises_again_to_another_type_is_refused_naming_the_member(union: str, gone: str) -> None:
    """torch's one merging pass can leave a member next to one made later in the pass that absorbs it (Note [Unstable
    unions]): torch accepts the text, but its own printed text is another type when read again. Canonical text must
    read back as the same type, so the parser refuses the Union and names the member to leave out."""
    text = f"f({union} x) -> ()"
    theirs = torch._C.parse_schema(text)
    try:
        again = torch._C.parse_schema(str(theirs))
    except RuntimeError as exc:
        assert "INTERNAL ASSERT FAILED" in str(exc)
    else:
        assert again != theirs
    with pytest.raises(SchemaError, match=rf"where '{re.escape(gone)}' still unifies with another member: .* leave '{re.escape(gone)}' out") as refused:
        parse_schema(text)
    assert refused.value.pos == text.index("Union")
    for kept in (f"{union}[] x", f"({union}, int) x", f"Dict(str, {union}) x", f"Future({union}) x"):  # kept as written
        with pytest.raises(SchemaError, match="still unifies with another member"):
            parse_schema(f"f({kept}) -> ()")
    # torch normalises the optional of a Union and a Union inside a Union again: there the member merges, as in torch
    for merged in (f"{union}? x", f"Union({union}, Stream) x"):
        text = f"f({merged}) -> ()"
        assert str(parse_schema(text)) == str(torch._C.parse_schema(text))
        assert parse_schema(str(parse_schema(text))) == parse_schema(text)
