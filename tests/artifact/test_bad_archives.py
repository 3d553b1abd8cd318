"""Bad archives are refused before anything of them runs: missing, not an archive, truncated, another format
version, a manifest that disagrees with the programs, and the payloads torch.export.load would run (a pickled
weight, a symbolic expression or a guard that is code, a call of something that is not an operator).

Each hostile payload, if run, would create a marker file; the test checks the error and that the file is absent.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")


from _archive_edit import redigest  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=64)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=torch.nn.Linear)
    path = tmp_path_factory.mktemp("good") / "good.pt2"
    result.save(path)
    result.close()
    load_piece_by_piece(path).close()  # the control: the untouched archive loads
    return path


def _rewrite(src: Path, dst: Path, member: str, change: Callable[[bytes], bytes]) -> Path:
    """A copy of the archive ``src`` with ``member`` (a path inside its folder) changed, the manifest's digests those
    of the changed program (an attacker keeps the archive consistent)."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        members = {info.filename.split("/", 1)[1]: old.read(info) for info in old.infolist()}
        members[member] = change(members[member])
        if member.startswith("models/"):
            redigest(members)
        for info in old.infolist():
            new.writestr(info, members[info.filename.split("/", 1)[1]])
    return dst


def _json(change: Callable[[Any], None]) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        parsed = json.loads(data)
        change(parsed)
        return json.dumps(parsed).encode()

    return apply


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nothing\.pt2"):
        load_piece_by_piece(tmp_path / "nothing.pt2")


def test_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "text.pt2"
    path.write_text("hello")
    with pytest.raises(ArtifactError, match=r"text\.pt2: not an archive \(a zip file\)"):
        load_piece_by_piece(path)
    other = tmp_path / "other.pt2"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("a/b.txt", "x")
        z.writestr("c/d.txt", "y")
    with pytest.raises(ArtifactError, match="not a PT2 archive: its files are not all in one folder"):
        load_piece_by_piece(other)


def test_a_truncated_archive(good: Path, tmp_path: Path) -> None:
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 30):
        path = tmp_path / f"cut{cut}.pt2"
        path.write_bytes(data[:cut])
        with pytest.raises(ArtifactError, match="not an archive"):
            load_piece_by_piece(path)


def test_another_format_version(good: Path, tmp_path: Path) -> None:
    path = _rewrite(good, tmp_path / "v3.pt2", "extra/pbp_manifest.json", _json(lambda m: m.update(version=3)))
    with pytest.raises(ArtifactError, match=r"v3\.pt2: manifest version: format version 3, where this library reads version 2$"):
        load_piece_by_piece(path)
    # version 1 had no program digests (Note [program digests]): read as it was, it could not be checked
    path = _rewrite(good, tmp_path / "v1.pt2", "extra/pbp_manifest.json", _json(lambda m: m.update(version=1)))
    with pytest.raises(ArtifactError, match=r"format version 1, where this library reads version 2: save the model again"):
        load_piece_by_piece(path)
    path = _rewrite(good, tmp_path / "x.pt2", "extra/pbp_manifest.json", lambda data: b"{not json")
    with pytest.raises(ArtifactError, match="manifest : is not JSON"):
        load_piece_by_piece(path)


def test_a_manifest_that_disagrees_with_the_programs(good: Path, tmp_path: Path) -> None:
    def drop_operator(m: Any) -> None:
        del m["operators"][0]

    path = _rewrite(good, tmp_path / "missing.pt2", "extra/pbp_manifest.json", _json(drop_operator))
    with pytest.raises(ArtifactError, match=r"the program calls operators the manifest does not describe: \['m0'\]"):
        load_piece_by_piece(path)

    def miscount(m: Any) -> None:
        m["operators"][1]["calls"][0]["n_flat"] += 1

    path = _rewrite(good, tmp_path / "count.pt2", "extra/pbp_manifest.json", _json(miscount))
    with pytest.raises(ArtifactError, match=r"the program calls m2 with 1 tensors and 2 weights where the manifest says 2 and 2"):
        load_piece_by_piece(path)

    def rename(m: Any) -> None:
        m["operators"][0]["calls"][0]["key"] = "not the key"

    path = _rewrite(good, tmp_path / "key.pt2", "extra/pbp_manifest.json", _json(rename))
    with pytest.raises(ArtifactError, match=r"manifest operators\[0\]\.calls\[0\]\.key: does not match the call structure it keys"):
        load_piece_by_piece(path)


def test_programs_by_size_in_the_manifest_are_checked(good: Path, tmp_path: Path) -> None:
    """An operator's programs by size (Note [programs by size]): 1 to 64 of them, each a program of the archive with
    its digest, only for an operator without a program of its own, with the key of one of its call structures."""

    def sized(m: Any) -> None:  # its own program moved to its programs by size: a legit archive
        op = m["operators"][0]
        op["by_size"] = [{"program": op["program"], "program_digest": op["program_digest"]}]
        op["program"] = op["program_digest"] = None

    loaded = load_piece_by_piece(_rewrite(good, tmp_path / "sized.pt2", "extra/pbp_manifest.json", _json(sized)))
    x = torch.randn(5, 4)
    with torch.no_grad():
        got = loaded(x)
    loaded.close()
    control = load_piece_by_piece(good)
    with torch.no_grad():
        assert torch.equal(got, control(x))
    control.close()
    cases = {
        "both": (lambda op: op.update(by_size=[{"program": op["program"], "program_digest": op["program_digest"]}]), r"only of an operator without a program of its own"),
        "empty": (lambda op: op.update(by_size=[], program=None, program_digest=None), r"programs by size are 1 to 64"),
        "extra key": (lambda op: op.update(by_size=[{"program": op["program"], "program_digest": op["program_digest"], "x": 1}], program=None, program_digest=None), r"by_size\[0\]: expected the keys"),
        "bad digest": (lambda op: op.update(by_size=[{"program": op["program"], "program_digest": "0" * 64}], program=None, program_digest=None), r"is not the program the operator m0 \(0\) was saved with"),
    }
    for name, (change, message) in cases.items():
        path = _rewrite(good, tmp_path / f"{name}.pt2", "extra/pbp_manifest.json", _json(lambda m, change=change: change(m["operators"][0])))
        with pytest.raises(ArtifactError, match=message):
            load_piece_by_piece(path)


def _marker(tmp_path: Path) -> tuple[Path, str]:
    marker = tmp_path / "ran"
    return marker, f"__import__('pathlib').Path({str(marker)!r}).touch()"


def test_a_pickled_weight_is_refused(good: Path, tmp_path: Path) -> None:
    def pickled(config: Any) -> None:
        next(iter(config["config"].values()))["use_pickle"] = True

    path = _rewrite(good, tmp_path / "pickle.pt2", "data/weights/model_weights_config.json", _json(pickled))
    with pytest.raises(ArtifactError, match="a pickled payload, which loading would unpickle; refused"):
        load_piece_by_piece(path)


def test_code_in_a_program_is_refused_and_never_runs(good: Path, tmp_path: Path) -> None:
    marker, code = _marker(tmp_path)

    def expression(program: Any) -> None:
        values = program["graph_module"]["graph"]["tensor_values"]
        first = next(v for v in values.values() if any("as_expr" in s for s in v["sizes"]))
        next(s for s in first["sizes"] if "as_expr" in s)["as_expr"]["expr_str"] = code

    def guard(program: Any) -> None:
        program["guards_code"] = [f"L['x'].size()[0] == 1 or {code}"]

    def target(program: Any) -> None:
        aten = next(n for n in program["graph_module"]["graph"]["nodes"] if n["target"].startswith("torch.ops.aten."))
        aten["target"] = "builtins.eval"

    def weight_name(program: Any) -> None:
        spec = next(s for s in program["graph_module"]["signature"]["input_specs"] if "parameter" in s)
        spec["parameter"]["parameter_name"] = 'x"); ' + code + " #"

    cases = [
        (expression, "has an expression that is refused: expected"),
        (guard, "which is not a comparison of sizes"),
        (target, "calls 'builtins.eval', which is not an allowed operator"),
        (weight_name, "is not a dotted path of ASCII identifiers"),
    ]
    for change, message in cases:
        path = _rewrite(good, tmp_path / f"{change.__name__}.pt2", "models/model.json", _json(change))
        with pytest.raises(ArtifactError, match=message):
            load_piece_by_piece(path)
        assert not marker.exists(), change.__name__


# Each would keep sympy busy for hours, or fill the memory, if the text reached sympify (the factorial of 10**8;
# a number of 300 million bits; a shift by 10**18), or raise from inside torch (a division by zero).
_HOSTILE_EXPRESSIONS = [
    ("factorial(Integer(100000000))", "unknown function 'factorial'"),
    ("Pow(Integer(10), Integer(100000000))", "Pow may compute a number of more than MAX_NUMBER_BITS=4096 bits"),
    ("Mul(Symbol('s0', integer=True), Pow(Integer(7), Add(Integer(99999999999), Integer(1))))", "Pow may compute"),
    ("LShift(Integer(1), Integer(1000000000000000000))", "LShift may compute"),
    ("PowByNatural(Integer(3), Integer(99999999999999999999))", "PowByNatural may compute"),
    ("Integer(" + "9" * 5000 + ")", "an integer has at most MAX_INTEGER_DIGITS=20 digits"),
    ("FloorDiv(Symbol('s0', integer=True), Integer(0))", "ZeroDivisionError while building"),
    ("Symbol('s0', integer=True).__class__", "expected end of input, got '.'"),
    # torch's ModularIndexing.eval recursed to Python's limit on a float, 10 s (Note [endless indexing])
    ("ModularIndexing(Float('1.0e-5', precision=24), Symbol('s0', integer=True), Integer(3))",
     "ValueError while building ModularIndexing(Float('1.0e-5', precision=24), Symbol('s0', integer=True), "
     "Integer(3)): torch's ModularIndexing recurses without end"),
    # the fuzzer's findings of 7 December 2026 (Note [bounded evaluation]): sympy expanding a power of a symbol, or of
    # an infinity, as a polynomial; torch's CleanDiv taking a gcd of a small float's power made exact
    ("Pow(Pow(Symbol('s0'), Integer(499872)), Float('0.5', precision=53))", "Pow may form a power of a symbol beyond MAX_SYMBOL_DEGREE=64"),
    ("Pow(Pow(-oo, Float('1.0e-5', precision=100)), Integer(499872))", "Pow may form a power of a symbol beyond MAX_SYMBOL_DEGREE=64"),
    ("CleanDiv(Symbol('s0', integer=True), Pow(Float('1.0e-5', precision=100), Integer(467232)))",
     "Pow may compute a number of more than MAX_NUMBER_BITS=4096 bits"),
]


_IDS = ["factorial", "huge_pow", "pow_of_a_sum", "huge_shift", "huge_pow_by_natural", "long_integer", "zero_division", "attribute", "endless_indexing",
        "power_of_a_symbol", "power_of_an_infinity", "power_of_a_small_float"]


@pytest.mark.parametrize(("text", "message"), _HOSTILE_EXPRESSIONS, ids=_IDS)
def test_an_expression_sympy_would_evaluate_for_hours_is_refused_at_once(good: Path, tmp_path: Path, text: str, message: str) -> None:
    import time

    def expression(program: Any) -> None:
        values = program["graph_module"]["graph"]["tensor_values"]
        first = next(v for v in values.values() if any("as_expr" in s for s in v["sizes"]))
        next(s for s in first["sizes"] if "as_expr" in s)["as_expr"]["expr_str"] = text

    path = _rewrite(good, tmp_path / "hostile.pt2", "models/model.json", _json(expression))
    start = time.perf_counter()
    with pytest.raises(ArtifactError, match=f"has an expression that is refused: {re.escape(message)}"):
        load_piece_by_piece(path)
    assert time.perf_counter() - start < 10  # today's loader ran for hours on the first three


def test_a_program_loads_with_its_expressions_built_by_our_reader_and_none_given_to_sympify(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the legitimate archive, loaded with sympy's parser of text disabled: every expression reaches torch as an object
    import sympy.parsing.sympy_parser as parser

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"sympy parsed text: {args[0]!r}")

    monkeypatch.setattr(parser, "parse_expr", refuse)
    loaded = load_piece_by_piece(good)
    x = torch.randn(5, 4)
    try:
        program = loaded.program
        assert loaded(x).shape == (5, 2)
    finally:
        loaded.close()
    assert program is not None


_HOSTILE_RANGES = [
    # torch's deserializer bumps its unbacked counter once per index below the name's: 10**9 steps
    ({"u1000000000": {"min_val": 0, "max_val": 5}}, "names 'u1000000000', which is neither a symbol's name of at most 8 characters nor an expression of the program"),
    ({"u 12": {"min_val": 0, "max_val": 5}}, "names 'u 12', which is neither"),  # int() reads " 12"
    ({"s0 + 99": {"min_val": 0, "max_val": 5}}, "names 's0 + 99', which is neither"),  # not an expression of the program
    ({"s0": {"min_val": "__import__('os')", "max_val": 5}}, "at .range_constraints.s0.min_val: expected a 64-bit integer"),  # the strict reader's
    ({"s0": {"min_val": 0, "max_val": 10**30}}, "at .range_constraints.s0.max_val: expected a 64-bit integer"),  # the strict reader's
    ({"s0": {"min_val": 0, "max_val": 5, "evil": 1}}, "at .range_constraints.s0: RangeConstraint has no field 'evil'"),  # the strict reader's
]


@pytest.mark.parametrize(("constraints", "message"), _HOSTILE_RANGES, ids=["huge_index", "spaced_index", "unknown_expression", "string", "huge_bound", "extra_key"])
def test_a_hostile_range_constraint_is_refused_at_once(good: Path, tmp_path: Path, constraints: dict[str, Any], message: str) -> None:
    import time

    def ranges(program: Any) -> None:
        program["range_constraints"].update(constraints)

    path = _rewrite(good, tmp_path / "ranges.pt2", "models/model.json", _json(ranges))
    start = time.perf_counter()
    with pytest.raises(ArtifactError, match=re.escape(message)):
        load_piece_by_piece(path)
    assert time.perf_counter() - start < 10  # today's loader counted to 10**9 on the first


# Each passes Python's own checks and would run at every call of the loaded program, for ever or for hours (Note
# [guard cost] in artifact/_rules.py): a tower of powers, a power of a size, a factorial, a huge literal.
_HOSTILE_GUARDS = [
    "L['x'].size()[0] == 9 ** 9 ** 9",
    "L['x'].size()[0] ** L['x'].size()[0] > 0",
    "(L['x'].size()[0] ** 64) ** 64 > 0",
    "L['x'].size()[0] ** 100000000 > 0",
    "math.factorial(100000000) > L['x'].size()[0]",
    "math.comb(10 ** 8, 5 * 10 ** 7) > 0",
    "L['x'].size()[0] < " + "9" * 30,
    "L['x'].size()[0] >= 1 and " * 800 + "True",
]


@pytest.mark.parametrize("guard", _HOSTILE_GUARDS, ids=["tower", "size_power", "nested_power", "huge_exponent", "factorial", "comb", "long_integer", "long_text"])
def test_a_guard_whose_cost_grows_with_a_number_in_the_file_is_refused(good: Path, tmp_path: Path, guard: str) -> None:
    def guards(program: Any) -> None:
        program["guards_code"] = [guard]

    path = _rewrite(good, tmp_path / "guard.pt2", "models/model.json", _json(guards))
    with pytest.raises(ArtifactError, match="which is not a comparison of sizes"):
        load_piece_by_piece(path)


def test_guards_as_torch_prints_them_are_accepted(good: Path, tmp_path: Path) -> None:
    # what torch's Python printer writes of sizes (PowByNatural as **, FloorToInt as math.floor, Max as max, ...),
    # about the program's input (the flat call's tensors_0, batch x 4): the archive loads and computes (torch
    # compiles guards only for a program with example inputs, which the loader never reads: Note [guard cost])
    import sympy
    from torch.utils._sympy.functions import FloorToInt, IntTrueDiv, PowByNatural
    from torch.utils._sympy.printers import PythonPrinter

    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    expressions = [
        sympy.Le(PowByNatural(s0, sympy.Integer(2)), 4096), sympy.Ge(FloorToInt(IntTrueDiv(s0, s1)), 1),
        sympy.Eq(sympy.Max(s0, s1), s0), sympy.Ne(sympy.Mod(s0, 4), 3), sympy.Lt(s0 * s1 + 3, 2**40),
    ]  # fmt: skip
    names = {"s0": "L['tensors_0'].size()[0]", "s1": "L['tensors_0'].size()[1]"}
    printed = [PythonPrinter().doprint(e).replace("s0", names["s0"]).replace("s1", names["s1"]) for e in expressions]

    def guards(program: Any) -> None:
        program["guards_code"] = printed

    loaded = load_piece_by_piece(_rewrite(good, tmp_path / "guards.pt2", "models/model.json", _json(guards)))
    try:
        assert loaded(torch.randn(5, 4)).shape == (5, 2)
    finally:
        loaded.close()


def test_a_pieces_range_narrowed_in_the_file_refuses_by_name_before_its_program_runs(good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [one check of the sizes]: a loaded piece's program is checked by its domain, read from the file, in place
    of torch's own check; a file that narrows a piece's range (digests kept consistent) is obeyed, refused by name
    where it says, and the program does not run there; torch's own check is not what refuses."""
    import torch._export.utils as export_utils

    def narrow(program: Any) -> None:
        (symbol,) = program["range_constraints"]
        program["range_constraints"][symbol] = {"min_val": 2, "max_val": 5}

    path = _rewrite(good, tmp_path / "narrow.pt2", "models/piece_0.json", _json(narrow))
    loaded = load_piece_by_piece(path)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch's own check of the inputs ran")

    monkeypatch.setattr(export_utils, "_check_input_constraints_for_graph", refuse)
    ran: list[Any] = []
    for op in loaded.__dict__["_finalizer"].peek()[2][0]:  # the loaded operators, each spied on
        runner = op.runner
        op.runner = lambda *t, _r=runner: ran.append(t) or _r(*t)
    assert loaded(torch.randn(4, 4)).shape == (4, 2) and len(ran) == 2
    ran.clear()
    with pytest.raises(ValueError, match=r"the program of 0 was not exported for these input sizes \(7x4\)"):
        loaded(torch.randn(7, 4))
    assert ran == []  # refused before the program ran
    loaded.close()
