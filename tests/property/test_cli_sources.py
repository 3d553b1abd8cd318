"""Properties of the CLI's schema-site readers (piece_by_piece_serialize.cli.sources).

1. Any text, read as any kind, yields sites whose position maps are complete and inside the file, and
   never raises (hostile or truncated sources are reported, not crashed on).
2. Encoding a string as a Python / C++ / YAML literal (split into adjacent pieces at random points) and
   reading it back gives the same string, with every character mapped to itself or to the backslash of
   its escape in the original file; a string holding a Jinja opener ('{{', '{%', '{#') comes back as one
   template note instead, never as a schema.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from piece_by_piece_serialize.cli.sources import read_source, read_sites, template_marker

KINDS = ("text", "python", "cpp", "yaml")
# text rich in the characters the readers care about
SOURCE_TEXT = st.lists(
    st.sampled_from(
        list("()[]{}\"'\\/*#:-_ \n\tabcdefRLu8xn0177é")
        + ["def(", "lib.define(", "TORCH_SELECTIVE_SCHEMA(", "func: ", "R\"(", "//", "/*", "*/", '"""']
        + ["torch::schema(", "c10::schema(", "parseSchema(", "#if X\n", "{{", "{%", "f\"", "pbp: ignore[", "STRING(X)", ", "]
    ),
    max_size=120,
).map("".join)
SCHEMA_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


def assert_positions_sane(sites, text):
    lines = text.split("\n")
    for site in sites:
        assert len(site.positions) == len(site.text) + 1
        for line, col in site.positions:
            assert 1 <= line <= len(lines)
            assert 1 <= col <= len(lines[line - 1]) + 1


@given(SOURCE_TEXT, st.sampled_from(KINDS))
@example('def("\\', "cpp")  # found by the fuzz profile: an unterminated literal ending in a backslash
@example("/*#if X\npbp: ignore[", "cpp")  # found by the fuzz profile: a directive on a block comment's second line
def test_any_text_reads_without_crashing(text, kind):
    sites, problems = read_sites("f", text, kind)
    assert_positions_sane(sites, text)
    lines = text.split("\n")
    for problem in problems:
        assert problem.severity in ("error", "warning", "note")
        assert 1 <= problem.line <= len(lines) and 1 <= problem.column <= len(lines[problem.line - 1]) + 1
    for directive in read_source("f", text, kind).suppressions:
        assert lines[directive.line - 1][directive.column - 1 :].startswith("pbp:")


def assert_read_back(sites, problems, value, text):
    """One site holding ``value``, each character mapped; or, for a template, one note and no site."""
    if template_marker(value) >= 0:
        assert sites == []
        assert [p.code for p in problems] == ["template"]
        return
    (site,) = sites
    assert site.text == value
    assert_each_char_mapped(site, text)


def assert_each_char_mapped(site, text):
    lines = text.split("\n")
    for i, ch in enumerate(site.text):
        line, col = site.positions[i]
        written = lines[line - 1][col - 1]
        assert written == ch or written == "\\", (site.text, i)


def pieces(value: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(value) + 1) for c in cuts})
    out, last = [], 0
    for p in points:
        out.append(value[last:p])
        last = p
    out.append(value[last:])
    return out


@given(SCHEMA_TEXT, st.lists(st.integers(0, 100), max_size=3), st.booleans())
def test_python_literals_round_trip(value, cuts, multiline):
    joiner = "\n    " if multiline else " "
    source = "lib = Library('ns', 'DEF')\nlib.define(\n    " + joiner.join(repr(p) for p in pieces(value, cuts)) + "\n)\n"
    sites, problems = read_sites("m.py", source, "python")
    assert problems == [] or template_marker(value) >= 0
    assert_read_back(sites, problems, value, source)


@given(SCHEMA_TEXT, st.lists(st.integers(0, 100), max_size=3), st.lists(st.booleans(), min_size=4, max_size=4))
def test_python_fstrings_without_fields_round_trip(value, cuts, fstring):
    # each piece is an f-string (braces doubled) or a plain literal: both are constant strings
    def literal(piece: str, f: bool) -> str:
        return "f" + repr(piece).replace("{", "{{").replace("}", "}}") if f else repr(piece)

    pieces_ = pieces(value, cuts)
    source = "lib = Library('ns', 'DEF')\nlib.define(\n    " + "\n    ".join(literal(p, f) for p, f in zip(pieces_, fstring + [False] * 4)) + "\n)\n"
    sites, problems = read_sites("m.py", source, "python")
    assert problems == [] or template_marker(value) >= 0
    assert_read_back(sites, problems, value, source)


def cpp_literal(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\%03o" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@given(SCHEMA_TEXT, st.lists(st.integers(0, 100), max_size=3))
def test_cpp_adjacent_literals_round_trip(value, cuts):
    source = "TORCH_LIBRARY(ns, m) {\n  m.def(" + " // piece\n        ".join(cpp_literal(p) for p in pieces(value, cuts)) + ");\n}\n"
    sites, problems = read_sites("m.cpp", source, "cpp")
    assert_read_back(sites, problems, value, source)


def yaml_double_quoted(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or ch in "\x85\xa0\u2028\u2029":
            out.append("\\x%02x" % ord(ch) if ord(ch) < 0x100 else "\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@given(SCHEMA_TEXT)
def test_yaml_double_quoted_round_trip(value):
    # the second entry gives the file the native_functions shape whatever the first one holds
    source = "- func: " + yaml_double_quoted(value) + "\n  variants: function\n- func: f(Tensor x) -> Tensor\n"
    sites, problems = read_sites("n.yaml", source, "yaml")
    assert sites[-1].text == "f(Tensor x) -> Tensor"
    assert_read_back(sites[:-1], problems, value, source)
