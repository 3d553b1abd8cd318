"""Finding schema strings in text, Python, C++ and YAML, and mapping each character back to the file.

The position map is checked exhaustively on every fixture: each decoded character must sit where the
map says, either as itself or as the backslash of the escape sequence that produced it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from piece_by_piece_serialize.cli.sources import kind_for_path, read_sites

FIXTURES = Path(__file__).parent / "fixtures"
ALL_FIXTURES = sorted(p for p in FIXTURES.iterdir() if p.is_file())


def sites_of(path: Path):
    kind = kind_for_path(str(path), explicit=True)
    sites, problems = read_sites(str(path), path.read_text(encoding="utf-8"), kind)
    return sites, problems


def test_fixture_folder_has_good_and_bad_files_of_every_kind():
    kinds = {(p.name.split("_")[0].split(".")[0], kind_for_path(str(p), explicit=True)) for p in ALL_FIXTURES}
    for kind in ("text", "python", "cpp", "yaml"):
        assert ("good", kind) in kinds and ("bad", kind) in kinds, kind


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_every_character_maps_to_where_it_was_written(path):
    sites, problems = sites_of(path)
    assert sites, "every fixture holds schemas"
    assert problems == []
    checked = 0
    for site in sites:
        assert len(site.positions) == len(site.text) + 1
        for i, ch in enumerate(site.text):
            line, col = site.positions[i]
            written = site.lines[line - 1][col - 1]
            # YAML folds a line break into a space, mapped to the last character of the line before
            assert written == ch or written == "\\" or (ch == " " and site.context == "yaml"), (site.text, i)
            checked += 1
    assert checked == sum(len(s.text) for s in sites)


def test_text_lines_and_comments():
    sites, _ = read_sites("x.schema", "# comment\n\n  ns::f(int x) -> int  \nns::g() -> ()\n", "text")
    assert [s.text for s in sites] == ["ns::f(int x) -> int", "ns::g() -> ()"]
    assert sites[0].positions[0] == (3, 3)
    assert sites[0].positions[-1] == (3, 22)


def test_python_calls_keywords_and_folding():
    path = FIXTURES / "good_ops.py"
    sites, _ = sites_of(path)
    assert [(s.context, s.text) for s in sites] == [
        ("Library.define", "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
        ("Library.define", "scale_(Tensor(a!) self, float factor=0.5) -> Tensor(a!)"),
        ("torch.library.define", "(Tensor x, int[] sizes, int dim=0) -> Tensor[]"),
        ("custom_op", "(Tensor x, float y) -> Tensor"),
    ]
    # the folded schema starts in the module constant and continues in the call
    split = sites[2]
    assert split.positions[0] == (13, 9)
    assert split.positions[len("(Tensor x, int[] sizes")] == (14, 46)


def test_python_escapes_and_unicode_columns():
    source = 'x = "é"; lib.define("f(str s=\\"a\\\\tb\\") -> ()")\n'
    sites, _ = read_sites("m.py", source, "python")
    (site,) = sites
    assert site.text == 'f(str s="a\\tb") -> ()'
    # columns count characters, not UTF-8 bytes ("é" is two bytes)
    assert site.positions[0] == (1, 22)
    assert site.positions[site.text.index('"')] == (1, 30)  # the backslash of \"


def test_python_import_aliases():
    source = "import torch.library as tl\nfrom torch.library import define as d\ntl.define('ns::a', '() -> ()')\nd('ns::b', schema='(int x) -> ()')\n"
    sites, _ = read_sites("m.py", source, "python")
    assert [(s.context, s.text) for s in sites] == [("torch.library.define", "() -> ()"), ("torch.library.define", "(int x) -> ()")]


def test_python_syntax_error_is_a_fatal_problem_not_an_exception():
    # fatal: the run fails (exit 2) rather than passing a file whose schemas were never read (issue 14)
    sites, problems = read_sites("m.py", "lib.define('f() -> ()'\n", "python")
    assert sites == []
    assert [(p.fatal, p.line, p.message[:27]) for p in problems] == [(True, 1, "cannot parse Python source ")]


def test_cpp_literals_joined_and_escapes_decoded():
    sites, _ = sites_of(FIXTURES / "good_ops.cpp")
    assert [s.text for s in sites] == [
        "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "scale_(Tensor(a!) self, float factor=0.5) -> Tensor(a!)",
        'myops::quote(Tensor x, str sep="\\t") -> Tensor',
        'myops::raw(Tensor x, str s="a\\nb") -> Tensor',
        "name_only",
    ]
    joined = sites[1]
    assert joined.positions[0] == (6, 10)
    assert joined.positions[len("scale_(Tensor(a!) self, ")] == (7, 10)


def test_yaml_plain_folded_and_quoted():
    sites, _ = sites_of(FIXTURES / "good_native.yaml")
    assert [s.text for s in sites] == [
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "long_one(Tensor self, int[] sizes, int dim=0) -> Tensor[]",
        'quoted(Tensor self, str sep="#") -> Tensor',
    ]


def test_yaml_block_scalar_is_reported():
    sites, problems = read_sites("n.yaml", "- func: >\n    f() -> ()\n- func: g() -> ()\n", "yaml")
    assert [s.text for s in sites] == ["g() -> ()"]
    assert [(p.line, p.severity) for p in problems] == [(1, "warning")]


def test_kind_for_path():
    assert kind_for_path("a/b.py", explicit=False) == "python"
    assert kind_for_path("a/b.cu", explicit=False) == "cpp"
    assert kind_for_path("a/native_functions.yaml", explicit=False) == "yaml"
    assert kind_for_path("a/ops.schema", explicit=False) == "text"
    assert kind_for_path("a/requirements.txt", explicit=False) is None
    assert kind_for_path("a/requirements.txt", explicit=True) == "text"


def test_every_func_of_torchs_native_functions_yaml():
    """The oracle for the YAML reader: torchgen's packaged native_functions.yaml, read without a YAML library.

    Every `- func:` entry is found; each text, prefixed with `aten::`, is a schema torch parses and that
    torch registers, and our canonical print of it is torch's.
    """
    import torch
    import torchgen

    from piece_by_piece_serialize.schema import parse_schema

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    text = path.read_text(encoding="utf-8")
    sites, problems = read_sites(str(path), text, "yaml")
    n_entries = sum(1 for line in text.split("\n") if line.lstrip()[:7] == "- func:")
    assert problems == []
    assert len(sites) == n_entries > 2000
    registered = {str(s) for s in torch._C._jit_get_all_schemas()}
    printed = [str(torch._C.parse_schema("aten::" + site.text)) for site in sites]
    assert sum(p in registered for p in printed) == n_entries
    assert sum(str(parse_schema("aten::" + site.text)) == p for site, p in zip(sites, printed)) == n_entries


def test_python_reader_agrees_with_what_torch_registered():
    """The oracle for the Python reader: torch's own quantized_decomposed library, defined with Library.define.

    Each schema string found in the module's source (implicit concatenation included), completed with the
    library's namespace, prints exactly as the schema torch registered when the module was imported.
    """
    import dataclasses

    import torch
    import torch.ao.quantization.fx._decomposed as module

    from piece_by_piece_serialize.schema import parse_schema

    path = Path(module.__file__)
    sites, problems = read_sites(str(path), path.read_text(encoding="utf-8"), "python")
    assert problems == [] and len(sites) >= 10
    assert {s.context for s in sites} == {"Library.define"}
    registered = {(s.name, s.overload_name): str(s) for s in torch._C._jit_get_all_schemas()}
    agree = 0
    for site in sites:
        ours = parse_schema(site.text)
        full = dataclasses.replace(ours, name=dataclasses.replace(ours.name, namespace="quantized_decomposed"))
        agree += registered.get((f"quantized_decomposed::{ours.name.name}", ours.name.overload)) == str(full)
    assert agree == len(sites)


def test_python_too_deep_for_ast_is_fatal():
    sites, problems = read_sites("m.py", "lib.define(" + " + ".join(['"a"'] * 5000) + ")\n", "python")
    assert sites == []
    assert [(p.fatal, p.message) for p in problems] == [
        (True, "cannot parse Python source (nested too deeply); its schemas were not checked")
    ]
    # a long but parseable '+' chain is not followed: a note says so, never half a schema
    sites, problems = read_sites("m.py", "lib.define(" + " + ".join(['"a"'] * 200) + ")\n", "python")
    assert sites == []
    assert [(p.severity, p.code, p.line, p.column) for p in problems] == [("note", "not-static", 1, 12)]
