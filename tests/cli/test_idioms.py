"""One small file per idiom of real sources (`tests/cli/idioms/`): exactly what is read, and what is noted.

Each file shows one way schemas are written in the wild. Its expectation lists the texts read as schemas
(with their context and any explicit allow_typevars flag) and the notes, as (code, line, column). A
template or a literal joined with something only the compiler or the interpreter knows is a note and never
a schema; everything a static read can see is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from piece_by_piece_serialize.cli.sources import kind_for_path, read_source
from piece_by_piece_serialize.cli import run

IDIOMS = Path(__file__).parent / "idioms"

EXPECTED: dict[str, tuple[list[tuple[str, str, bool | None]], list[tuple[str, int, int]]]] = {
    # Jinja templates (FBGEMM codegen): a placeholder in the literal, or a block between literals
    "jinja_placeholder.cpp": ([], [("template", 3, 17)]),
    "jinja_block_between_literals.cpp": ([], [("template", 3, 1)]),
    "jinja_in_python.py": ([], [("template", 4, 13)]),
    "jinja_in_yaml.yaml": ([], [("template", 1, 9)]),
    # YAML that is not native_functions.yaml: no 'func:' value has an argument list
    "kernel_list.yaml": ([], []),
    # what only the compiler knows: a macro joined to the literals, a macro first, an #if between them
    "macro_concat.cu": ([], [("not-static", 3, 40)]),
    "macro_prefix.cpp": ([], [("not-static", 3, 9)]),
    "preprocessor_between.cpp": ([], [("not-static", 3, 1)]),
    # a macro that stringizes its parameter into the schema (#NAME is not a directive)
    "macro_stringize.cpp": ([("cpp", "ok(Tensor x) -> Tensor", None)], [("not-static", 1, 41)]),
    # Objective-C++ is C++ (an @"..." string is not a schema)
    "objective_cpp.mm": (
        [
            ("cpp", "int4mm(Tensor A, Tensor B, int group_size, Tensor SZ) -> Tensor", None),
            ("cpp", "int8mm(Tensor A, Tensor B, Tensor scales) -> Tensor", None),
        ],
        [],
    ),
    # torch::schema / c10::schema, with the allow_typevars argument when written; a bare schema( is not torch's
    "torch_schema.cpp": (
        [
            ("torch::schema", "pure(Tensor x) -> Tensor", None),
            ("c10::schema", "conservative(Tensor(a!) x) -> ()", None),
            ("torch::schema", "generic(t x) -> t", True),
        ],
        [],
    ),
    # the parsing calls that build a c10::FunctionSchema, qualified or not
    "jit_parse_schema.cpp": (
        [
            ("torch::jit::parseSchema", "myops::a(t x) -> t", None),
            ("torch::jit::parseSchema", "myops::b(Tensor x) -> Tensor", False),
            ("torch::jit::parseSchemaOrName", "myops::c", None),
        ],
        [],
    ),
    # f-strings without fields are constants ({{ and }} are braces); with a field, or %, .format(): notes
    "fstring_no_fields.py": (
        [
            ("Library.define", "plain(Tensor x) -> Tensor", None),
            ("Library.define", 'mixed(Tensor x, str sep=",") -> Tensor', None),
            ("Library.define", 'braces(Tensor x, str s="{}") -> Tensor', None),
            ("custom_op", "(Tensor x, str sep='\\\\t') -> Tensor", None),
        ],
        [],
    ),
    "fstring_fields.py": ([], [("not-static", 5, 31)]),
    "format_and_percent.py": ([], [("not-static", 5, 16), ("not-static", 6, 16)]),
    # adjacent literals joined, comments and prefixes between them
    "adjacent_python.py": ([("Library.define", "attn(Tensor q, Tensor k, Tensor v, float scale=1.0, bool causal=False) -> Tensor", None)], []),
    "adjacent_cpp.cpp": (
        [
            ("cpp", 'attn(Tensor q, Tensor k, Tensor v, float scale=1.0, str mode="fast") -> Tensor', None),
            ("cpp", "name_only", None),  # read, then passed over by the checker: torch infers this schema
        ],
        [],
    ),
}


def test_every_idiom_file_has_an_expectation():
    assert sorted(p.name for p in IDIOMS.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_idiom(name):
    path = IDIOMS / name
    source = read_source(name, path.read_text(encoding="utf-8"), kind_for_path(name, explicit=False))
    sites, notes = EXPECTED[name]
    assert [(s.context, s.text, s.typevars) for s in source.sites] == sites
    assert [(p.code, p.line, p.column) for p in source.problems] == notes
    assert all(p.severity == "note" and not p.fatal for p in source.problems)
    for site in source.sites:  # every character maps to itself or to the backslash of its escape
        for i, ch in enumerate(site.text):
            line, col = site.positions[i]
            assert source.lines[line - 1][col - 1] in (ch, "\\"), (name, i)


def test_the_idioms_folder_checks_clean(capsys, monkeypatch):
    monkeypatch.chdir(IDIOMS.parent)
    assert run(["schema", "check", "--strict", "idioms"]) == 0  # notes never fail a run, even --strict
    out = capsys.readouterr().out
    # 16 sites read, 2 of them bare names torch infers (name_only, parseSchemaOrName("myops::c"))
    assert out.splitlines()[-1] == "checked 14 schemas: 0 errors, 0 warnings, 11 notes"
    assert out.count(": note[template]: template: not checked (") == 4
    assert out.count(": note[not-static]: cannot read statically: ") == 7
