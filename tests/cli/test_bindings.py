"""`schema check` over registration code shaped like DeepSpeed, Torch-TensorRT, intel-extension-for-pytorch, the
legacy RegisterOperators API, executorch and vllm (`tests/cli/bindings/`, its README says what each imitates).

Pinned: every finding, and every schema site the readers find (`--list-sites`), per file and context. pybind11 and
`torch::class_` bindings give no site and no note; `torch::jit::Operator(...)`, `.op(...)` and `.options().schema(...)`
are read; the project's helpers are read once named (`--schema-function` or `schema-functions`); vllm's duplicate
argument is an error at the second one, naming the first; torch confirms what it can.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch

from piece_by_piece_serialize.cli import run

BINDINGS = Path(__file__).parent / "bindings"
HELPERS = "register_fake_tosa_op,bind_pattern_to_op"

# (path, line, column, severity, code) of every finding, in output order, with the helpers named
EXPECTED = [
    ("dynamic/ops/register.py", 9, 12, "note", "not-static"),
    ("dynamic/ops/register.py", 12, 39, "warning", "misread-size"),
    ("dynamic/ops/register.py", 13, 19, "note", "not-static"),
    ("dynamic/ops/register.py", 17, 85, "error", "syntax"),
    ("executorch/backends/arm/tosa/dialect/ops/ops.py", 30, 87, "error", "typevar"),
    ("executorch/backends/cadence/aot/ops_registrations.py", 17, 148, "error", "duplicate-argument"),
    ("intel_extension/csrc/jit/register_dnnl_jit_ops.cpp", 30, 45, "warning", "misread-number"),
    ("legacy/csrc/register_ops.cpp", 13, 53, "warning", "misread-size"),
    ("vllm/csrc/torch_bindings.cpp", 9, 12, "warning", "no-roundtrip"),
    ("vllm/csrc/torch_bindings.cpp", 15, 27, "warning", "no-roundtrip"),
    ("vllm/csrc/torch_bindings.cpp", 16, 69, "error", "duplicate-argument"),
]
# (path, context, checked) -> number of schema sites
SITES = {
    ("dynamic/ops/register.py", "Library.define", True): 1,  # the f-string whose only field is the name
    ("dynamic/ops/register.py", "parse_schema", True): 1,
    ("dynamic/ops/register.py", "torch.library.define", True): 1,
    ("executorch/backends/arm/tosa/dialect/ops/ops.py", "schema function", True): 3,
    ("executorch/backends/cadence/aot/ops_registrations.py", "Library.define", True): 1,
    ("executorch/backends/cadence/aot/ops_registrations.py", "schema function", True): 2,
    ("intel_extension/csrc/jit/register_dnnl_jit_ops.cpp", "torch::jit::parseSchema", True): 4,
    ("legacy/csrc/register_ops.cpp", "torch::jit::parseSchemaOrName", False): 1,  # .op("my_ops::relu", fn)
    ("legacy/csrc/register_ops.cpp", "torch::jit::parseSchemaOrName", True): 2,
    ("tensorrt/core/runtime/register_jit_hooks.cpp", "cpp", False): 3,  # .def("__str__", ...) and the like: names
    ("tensorrt/core/runtime/register_jit_hooks.cpp", "cpp", True): 1,  # the TORCH_LIBRARY def
    ("vllm/csrc/torch_bindings.cpp", "cpp", True): 2,
}
SUMMARY = "checked 18 schemas: 4 errors, 5 warnings, 2 notes"


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    root = tmp_path / "tree"
    shutil.copytree(BINDINGS, root)
    monkeypatch.chdir(root)
    return root


def check_json(capsys, *argv: str) -> tuple[int, list[dict], list[dict], str]:
    code = run(["schema", "check", "--format", "json", "--list-sites", *argv])
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    sites = [r for r in records if r.get("record") == "site"]
    findings = [r for r in records if "record" not in r]
    return code, sites, findings, err


def _findings(records: list[dict]) -> list[tuple]:
    return [(r["path"].removeprefix("./"), r["line"], r["column"], r["severity"], r["code"]) for r in records]


def _sites(records: list[dict]) -> dict[tuple, int]:
    return dict(Counter((r["path"].removeprefix("./"), r["context"], r["checked"]) for r in records))


def test_every_finding_and_site_with_the_helpers_named(tree, capsys):
    code, sites, findings, err = check_json(capsys, "--schema-function", HELPERS, ".")
    assert (code, err) == (1, SUMMARY + "\n")
    assert _findings(findings) == EXPECTED
    assert _sites(sites) == SITES
    assert sum(n for (_, _, checked), n in SITES.items() if checked) == 18


def test_pybind11_and_torch_class_bindings_give_nothing(tree, capsys):
    # DeepSpeed's shape: 6 stringized defs in the module's macro, 2 in a file-level one, 2 plain pybind11 names;
    # Torch-TensorRT's: class methods, two of them named by a macro. Before, each stringized def was a note.
    code, sites, findings, err = check_json(capsys, "deepspeed", "tensorrt")
    assert (code, err) == (0, "checked 1 schema: 0 errors, 0 warnings\n")
    assert findings == []
    assert [(s["path"], s["checked"]) for s in sites] == [("tensorrt/core/runtime/register_jit_hooks.cpp", False)] * 3 + [
        ("tensorrt/core/runtime/register_jit_hooks.cpp", True)
    ]


def test_the_helpers_are_read_only_when_named(tree, capsys):
    code, sites, findings, _ = check_json(capsys, "executorch")
    assert code == 0 and findings == []
    assert _sites(sites) == {("executorch/backends/cadence/aot/ops_registrations.py", "Library.define", True): 1}


def test_the_helpers_named_in_pyproject(tree, capsys):
    (tree / "pyproject.toml").write_text('[tool.pbp-serialize]\nschema-functions = ["register_fake_tosa_op", "bind_pattern_to_op"]\n')
    code, sites, findings, err = check_json(capsys, ".")
    assert (code, err) == (1, SUMMARY + "\n")
    assert _findings(findings) == EXPECTED and _sites(sites) == SITES


def test_list_sites_needs_json(tree, capsys):
    assert run(["schema", "check", "--list-sites", "."]) == 2
    assert capsys.readouterr().err.endswith("pbp-serialize schema check: error: --list-sites needs --format json\n")


def test_text_output_names_each_rule(tree, capsys):
    code = run(["schema", "check", "--schema-function", HELPERS, "intel_extension", "vllm"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[-4:] == [
        "vllm/csrc/torch_bindings.cpp:16:69: error[duplicate-argument]: argument name 'q_seqlens' is used twice "
        "(arguments 4 and 8): a call by keyword reaches only one of them; the first is at line 15, column 74",
        '        "    float scale, Tensor block_table, Tensor seq_lens, Tensor q_seqlens) -> ()");',
        "                                                                      ^",
        "checked 6 schemas: 1 error, 3 warnings",
    ]


def test_torch_agrees(tree, capsys):
    _, sites, findings, _ = check_json(capsys, "--schema-function", HELPERS, ".")
    failing = {(f["path"], f["schema"]) for f in findings if f["severity"] == "error"}
    cpp = [s for s in sites if s["checked"] and s["path"].endswith(".cpp")]
    assert len(cpp) == 9
    for site in cpp:
        # each schema read from C++ without an error is one torch takes (but a custom class's, registered at run time)
        if (site["path"], site["schema"]) not in failing and "__torch__.torch.classes." not in site["schema"]:
            torch._C.parse_schema(site["schema"])
    # torch takes the duplicate too, which is why only the checker can see it
    (dup,) = [f for f in findings if f["code"] == "duplicate-argument" and f["path"].endswith(".cpp")]
    names = [a.name for a in torch._C.parse_schema("vllm::" + dup["schema"]).arguments]
    assert Counter(names)["q_seqlens"] == 2
