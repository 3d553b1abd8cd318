"""`pbp-serialize` through `run(argv)` and through real subprocesses: exact output and exit codes.

Exit codes: 0 clean, 1 findings, 2 usage or I/O error. Findings print `path:line:col: severity: message`,
the original source line and a caret at the column of the original file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from piece_by_piece_serialize.cli import run

FIXTURES = Path(__file__).parent / "fixtures"
BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def in_fixtures(monkeypatch):
    # paths in the output are as given on the command line: run from the fixture folder
    monkeypatch.chdir(FIXTURES)


def syntax(schema: str, **options: bool) -> str:
    """The parser's own message for a bad schema: the CLI relays it (its wording belongs to the schema module)."""
    from piece_by_piece_serialize import SchemaError
    from piece_by_piece_serialize.schema import parse_schema

    with pytest.raises(SchemaError) as info:
        parse_schema(schema, **options)
    return info.value.msg


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------------
# schema check: each source kind, good and bad


@pytest.mark.parametrize(
    ("name", "n"),
    [("good.schema", 3), ("good_ops.py", 4), ("good_ops.cpp", 4), ("good_native.yaml", 3)],
)
def test_good_files_are_clean(capsys, name, n):
    assert cli(capsys, "schema", "check", name) == (0, f"checked {n} schemas: 0 errors, 0 warnings\n", "")


BAD_TEXT = """\
bad.schema:2:16: error[syntax]: {m1}
  myops::f(int x,) -> ()
                 ^
bad.schema:3:20: warning[misread-number]: torch reads 0x10 as the integer 0, not 16
  myops::g(int flags=0x10) -> ()
                     ^
bad.schema:4:10: warning[dispatcher-ignores]: the dispatcher ignores the tensors inside 'Tensor[][]' when it picks a kernel (only Tensor, Tensor?, Tensor[] and Tensor?[] arguments are dispatch inputs)
  myops::h(Tensor[][] nested) -> ()
           ^
checked 3 schemas: 1 error, 2 warnings
""".format(m1=syntax("myops::f(int x,) -> ()"))

BAD_PYTHON = """\
bad_ops.py:7:10: error[syntax]: {m1}
      "int in) -> Tensor"
           ^
bad_ops.py:9:15: error[typevar]: {m2}; Library.define parses schemas with type variables off
  lib.define("g(t x) -> t")
                ^
bad_ops.py:10:35: error[define-format]: torch.library.define rejects this text: it must start with '(' and have ' -> ' with one space on each side
  torch.library.define("myops::h", "(Tensor x)->Tensor")
                                    ^
bad_ops.py:13:69: warning[misread-number]: torch reads 1E5 as the integer 1, not 100000.0
  @custom_op("myops::k", mutates_args=(), schema="(Tensor x, Scalar t=1E5) -> Tensor")
                                                                      ^
checked 4 schemas: 3 errors, 1 warning
""".format(m1=syntax("f(Tensor x, int in) -> Tensor"), m2=syntax("g(t x) -> t", allow_typevars=False))

BAD_CPP = """\
bad_ops.cpp:5:14: warning[misread-size]: torch reads the list size '2.5' as 2
          "int[2.5] size) -> Tensor");
               ^
bad_ops.cpp:6:62: error[syntax]: {m1}
    m.def(TORCH_SELECTIVE_SCHEMA("myops::g(Tensor x, float eps=inf) -> Tensor"));
                                                               ^
checked 2 schemas: 1 error, 1 warning
""".format(m1=syntax("myops::g(Tensor x, float eps=inf) -> Tensor"))

BAD_YAML = """\
bad_native.yaml:1:28: error[syntax]: {m1}
  - func: f(Tensor self, int in) -> Tensor
                             ^
bad_native.yaml:5:13: warning[no-roundtrip]: torch prints the default [1, 1] of an int[] as the single value 1, which parses back only with a fixed size (int[2])
      int[] x=[1, 1]) -> Tensor
              ^
checked 2 schemas: 1 error, 1 warning
""".format(m1=syntax("f(Tensor self, int in) -> Tensor"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [("bad.schema", BAD_TEXT), ("bad_ops.py", BAD_PYTHON), ("bad_ops.cpp", BAD_CPP), ("bad_native.yaml", BAD_YAML)],
)
def test_bad_files_exact_output(capsys, name, expected):
    assert cli(capsys, "schema", "check", name) == (1, expected, "")


def test_caret_column_is_the_original_files_column():
    # Independently of the printed text: the caret sits under the character the finding is about.
    lines = BAD_CPP.splitlines()
    source, caret = lines[1], lines[2]
    assert source[caret.index("^")] == "2"  # the '2.5' in the second of two adjacent C++ literals
    lines = BAD_PYTHON.splitlines()
    assert lines[1][lines[2].index("^") :].startswith("in)")


def test_warnings_alone_pass_unless_strict(capsys, tmp_path):
    path = tmp_path / "w.schema"
    path.write_text("myops::g(int flags=0x10) -> ()\n")
    code, out, _ = cli(capsys, "schema", "check", str(path))
    assert code == 0 and out.endswith("checked 1 schema: 0 errors, 1 warning\n")
    code, out, _ = cli(capsys, "schema", "check", "--strict", str(path))
    assert code == 1
    assert out.splitlines()[0] == f"{path}:1:20: error[misread-number]: torch reads 0x10 as the integer 0, not 16"
    assert out.endswith("checked 1 schema: 1 error, 0 warnings\n")


def test_quiet_drops_the_summary(capsys):
    assert cli(capsys, "schema", "check", "--quiet", "good.schema") == (0, "", "")
    code, out, _ = cli(capsys, "schema", "check", "-q", "bad.schema")
    assert code == 1 and out == BAD_TEXT.rsplit("checked", 1)[0]


def test_folder_walk_reads_known_suffixes_in_order(capsys):
    code, out, err = cli(capsys, "schema", "check", ".")
    assert code == 1
    heads = [line for line in out.splitlines() if line[:1] not in (" ", "")]
    assert [h.split(":")[0] for h in heads[:-1]] == [
        "./bad.schema", "./bad.schema", "./bad.schema",
        "./bad_native.yaml", "./bad_native.yaml",
        "./bad_ops.cpp", "./bad_ops.cpp",
        "./bad_ops.py", "./bad_ops.py", "./bad_ops.py", "./bad_ops.py",
    ]  # fmt: skip
    assert heads[-1] == "checked 25 schemas: 6 errors, 5 warnings"
    assert err == ""


def test_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("# from a pipe\nmyops::f(Tensor x) -> Tensor\nmyops::g(int x=) -> ()\n"))
    code, out, _ = cli(capsys, "schema", "check", "-")
    assert code == 1
    assert out.splitlines()[:3] == [
        f"<stdin>:3:16: error[syntax]: {syntax('myops::g(int x=) -> ()')}",
        "  myops::g(int x=) -> ()",
        "                 ^",
    ]


# ------------------------------------------------------------------------------------------------
# JSON


def test_json_records(capsys):
    code, out, err = cli(capsys, "schema", "check", "--format", "json", "bad.schema", "bad_ops.cpp")
    assert code == 1
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 5
    for record in records:
        assert set(record) == {"path", "line", "column", "severity", "code", "message", "schema"}
        assert isinstance(record["line"], int) and isinstance(record["column"], int)
        assert record["severity"] in ("error", "warning")
    assert [(r["path"], r["line"], r["column"], r["severity"], r["code"]) for r in records] == [
        ("bad.schema", 2, 16, "error", "syntax"),
        ("bad.schema", 3, 20, "warning", "misread-number"),
        ("bad.schema", 4, 10, "warning", "dispatcher-ignores"),
        ("bad_ops.cpp", 5, 14, "warning", "misread-size"),
        ("bad_ops.cpp", 6, 62, "error", "syntax"),
    ]
    # the schema is the decoded text torch receives: adjacent C++ literals joined, escapes decoded
    assert records[3]["schema"] == 'f(Tensor x, str sep="\\t", int[2.5] size) -> Tensor'
    assert err == "checked 5 schemas: 2 errors, 3 warnings\n"  # the summary stays off stdout


# ------------------------------------------------------------------------------------------------
# infer_schema pitfalls, generated by torch itself


# Python functions whose defaults infer_schema writes into text torch cannot read (annotations are strings
# under `from __future__ import annotations`, resolved in this module's globals, hence module level).
def quote(x: torch.Tensor, s: str = 'say "hi"') -> torch.Tensor: ...
def infinite(x: torch.Tensor, eps: float = float("inf")) -> torch.Tensor: ...
def not_a_number(x: torch.Tensor, eps: float = float("nan")) -> torch.Tensor: ...
def keyword(x: torch.Tensor, Ellipsis: int = 1) -> torch.Tensor: ...
def backslash(x: torch.Tensor, p: str = "trailing\\") -> torch.Tensor: ...
def newline(x: torch.Tensor, p: str = "two\nlines") -> torch.Tensor: ...


def _pitfalls():
    return [(f.__name__, torch.library.infer_schema(f, mutates_args=())) for f in (quote, infinite, not_a_number, keyword, backslash, newline)]


# what the caret points at in the Python source line holding custom_op(..., schema=<repr of the schema>)
PITFALL_FINDINGS = {
    "quote": 'hi"")',
    "infinite": "inf)",
    "not_a_number": "nan)",
    "keyword": "Ellipsis=1",
    "backslash": '"trailing',
    "newline": '"two',
}


def test_infer_schema_pitfalls_caught_where_torch_fails(capsys, tmp_path):
    pitfalls = _pitfalls()
    assert [name for name, _ in pitfalls] == list(PITFALL_FINDINGS)
    # the same schemas inside a custom_op(schema=...) call: Python escapes are decoded, columns mapped
    source = ["from torch.library import custom_op", ""]
    for name, schema in pitfalls:
        with pytest.raises(RuntimeError):  # the oracle: torch cannot parse what its own infer_schema wrote
            torch._C.parse_schema(f"myops::{name}{schema}")
        source.append(f"custom_op('myops::{name}', mutates_args=(), schema={schema!r})")
    path = tmp_path / "inferred.py"
    path.write_text("\n".join(source) + "\n", encoding="utf-8")
    code, out, _ = cli(capsys, "schema", "check", "--format", "json", str(path))
    assert code == 1
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == [3, 4, 5, 6, 7, 8]
    lines = source
    for record, (name, schema) in zip(records, pitfalls):
        assert record["severity"] == "error" and record["code"] == "syntax"
        assert record["message"] == syntax(schema, allow_nameless=True)
        assert record["schema"] == schema
        # the caret column, in the Python source line, is at the offending text
        at = lines[record["line"] - 1][record["column"] - 1 :]
        assert at.startswith(PITFALL_FINDINGS[name]), (name, at)


# ------------------------------------------------------------------------------------------------
# format


def test_format_prints_canonical_forms(capsys, tmp_path):
    path = tmp_path / "f.schema"
    path.write_text("myops::f(Tensor x)->Tensor\nmyops::g(int[2] s=[1, 1], *, float a=1.0) -> (Tensor)\n")
    assert cli(capsys, "schema", "format", str(path)) == (
        0,
        "myops::f(Tensor x) -> Tensor\nmyops::g(int[2] s=1, *, float a=1.) -> Tensor\n",
        "",
    )


def test_format_shortest(capsys, tmp_path):
    path = tmp_path / "f.schema"
    path.write_text("myops::norm(Tensor x, float eps=1e-05, float[] w=[0.1, 2.], Scalar s=0.25) -> Tensor\n")
    torch_print = str(torch._C.parse_schema(path.read_text().strip()))
    assert torch_print == "myops::norm(Tensor x, float eps=1.0000000000000001e-05, float[] w=[0.10000000000000001, 2.], Scalar s=0.25) -> Tensor"
    assert cli(capsys, "schema", "format", str(path)) == (0, torch_print + "\n", "")
    shortest = "myops::norm(Tensor x, float eps=1e-05, float[] w=[0.1, 2.], Scalar s=0.25) -> Tensor"
    assert cli(capsys, "schema", "format", "--shortest", str(path)) == (0, shortest + "\n", "")
    # either spelling passes --check; a third shows both
    assert cli(capsys, "schema", "format", "--check", str(path)) == (0, "", "")
    path.write_text(torch_print + "\n")
    assert cli(capsys, "schema", "format", "--check", str(path)) == (0, "", "")
    path.write_text("myops::norm(Tensor x, float eps=0.00001, float[] w=[0.1, 2.], Scalar s=0.25) -> Tensor\n")
    code, out, _ = cli(capsys, "schema", "format", "--check", str(path))
    assert code == 1 and out.splitlines()[-2:] == [f"  canonical: {torch_print}", f"  shortest:  {shortest}"]


@pytest.mark.slow
def test_shortest_spelling_reads_back_the_same_in_torch():
    # over every schema torch registers: the shortest print parses in torch to the very same schema and defaults
    from piece_by_piece_serialize.schema import parse_schema, print_shortest

    shorter = 0
    for registered in torch._C._jit_get_all_schemas():
        printed = str(registered)
        try:
            ours = parse_schema(printed, allow_typevars=True)
        except ValueError:
            continue  # torch's own unreadable prints (the torch-own-print note)
        short = print_shortest(ours)
        back = torch._C.parse_schema(short)
        assert back == registered, short
        assert [repr(a.default_value) for a in back.arguments] == [repr(a.default_value) for a in registered.arguments]
        assert parse_schema(short, allow_typevars=True) == ours
        shorter += short != printed
    assert shorter >= 10  # e.g. eps=1e-05 in the norms, where torch prints 1.0000000000000001e-05


def test_format_check(capsys, tmp_path):
    assert cli(capsys, "schema", "format", "--check", "good.schema", "good_native.yaml", "good_ops.cpp") == (0, "", "")
    path = tmp_path / "f.schema"
    path.write_text("myops::ok(Tensor x) -> Tensor\nmyops::f(Tensor  x)->Tensor\n")
    assert cli(capsys, "schema", "format", "--check", str(path)) == (
        1,
        f"{path}:2:17: error[not-canonical]: schema is not in canonical form\n"
        "  myops::f(Tensor  x)->Tensor\n"
        "                  ^\n"
        "  canonical: myops::f(Tensor x) -> Tensor\n",
        "",
    )


def test_format_reports_syntax_errors_on_stderr(capsys):
    code, out, err = cli(capsys, "schema", "format", "bad.schema")
    assert code == 1
    assert out == "myops::g(int flags=0) -> ()\nmyops::h(Tensor[][] nested) -> ()\n"
    assert err.splitlines()[0] == f"bad.schema:2:16: error[syntax]: {syntax('myops::f(int x,) -> ()')}"


# ------------------------------------------------------------------------------------------------
# names


def test_names(capsys):
    assert cli(capsys, "schema", "names", "myops::f(Tensor x, Tensor(a!) out, *, int k, ...) -> Tensor") == (0, "x\nout\nk\n", "")
    assert cli(capsys, "schema", "names", "(Tensor a, Tensor b) -> Tensor") == (0, "a\nb\n", "")


def test_names_error(capsys):
    assert cli(capsys, "schema", "names", "myops::f(Tensor x") == (
        1,
        "",
        f"<schema>:1:18: error: {syntax('myops::f(Tensor x')}\n"
        "  myops::f(Tensor x\n"
        "                   ^\n",
    )


# ------------------------------------------------------------------------------------------------
# name decode / encode


def test_name_encode_then_decode(capsys):
    code, out, err = cli(capsys, "name", "encode", "((*, *), {'a': *, 'ids': [*, *, *]})")
    assert (code, err) == (0, "")
    name = out.strip()
    assert name[:3] == "___" and name.replace("_", "").isalnum()
    assert cli(capsys, "name", "decode", name) == (0, "tuple\n  tuple\n    * x2\n  dict\n    'a': *\n    'ids': list\n      * x3\n", "")


def test_name_encode_matches_the_library_on_real_pytrees(capsys):
    from torch.utils._pytree import tree_flatten

    from piece_by_piece_serialize import tree_spec_as_name

    value = ({"input_ids": 1, "attention_mask": 2}, [3, (4,)], ())
    leaves, spec = tree_flatten(value)
    code, out, _ = cli(capsys, "name", "encode", "({'input_ids': *, 'attention_mask': *}, [*, (*,)], ())")
    assert code == 0 and out == tree_spec_as_name(spec, len(leaves)) + "\n"


def test_name_decode_type_info(capsys):
    assert cli(capsys, "name", "decode", "dict__2_a__b") == (0, "dict (2 tensors, in this key order)\n  'a': Tensor\n  'b': Tensor\n", "")


def test_name_decode_error_has_caret(capsys):
    code, out, err = cli(capsys, "name", "decode", "list__x")
    assert (code, out) == (1, "")
    assert err.splitlines()[1:] == ["  list__x", "        ^"]
    assert err.splitlines()[0][: len("<name>:1:7: error: ")] == "<name>:1:7: error: "


def test_name_encode_error_has_caret(capsys):
    assert cli(capsys, "name", "encode", "(*, *") == (
        1,
        "",
        "<description>:1:6: error: expected ')' or ',', got end of input\n  (*, *\n       ^\n",
    )


def test_name_encode_never_evaluates(capsys, tmp_path):
    marker = tmp_path / "pwned"
    code, out, err = cli(capsys, "name", "encode", f"__import__('pathlib').Path({str(marker)!r}).touch()")
    assert code == 1 and out == "" and "error: expected" in err
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------
# usage and I/O errors


@pytest.mark.parametrize(
    "argv",
    [[], ["schema"], ["schema", "check", "--format", "xml"], ["name", "decode"], ["bogus"]],
    ids=["nothing", "schema", "bad-format", "decode-no-arg", "bogus"],
)
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("usage: pbp-serialize")
    assert "error:" in err and "Traceback" not in err


def test_missing_file_exits_2_and_checks_the_rest(capsys):
    code, out, err = cli(capsys, "schema", "check", "nope.schema", "good.schema")
    assert code == 2
    assert err == "pbp-serialize: error: cannot read nope.schema: no such file or directory\n"
    assert out == "checked 3 schemas: 0 errors, 0 warnings\n"


def test_not_utf8_exits_2(capsys, tmp_path):
    path = tmp_path / "latin1.schema"
    path.write_bytes(b"myops::f(str s=\"caf\xe9\") -> ()\n")
    code, _, err = cli(capsys, "schema", "check", str(path))
    assert code == 2
    assert err == f"pbp-serialize: error: cannot read {path}: not UTF-8 text (invalid continuation byte at byte 19)\n"


def test_help_exits_0(capsys):
    code, out, _ = cli(capsys, "schema", "check", "--help")
    assert code == 0 and "--strict" in out and "--format" in out


@pytest.mark.parametrize(
    "argv",
    [["schema", "check"], ["schema", "format"], ["schema", "names"], ["name", "decode"], ["name", "encode"], ["demo"]],
    ids=lambda argv: " ".join(argv),
)
def test_every_subcommand_has_a_description(capsys, argv):
    code, out, _ = cli(capsys, *argv, "--help")
    usage, _, rest = out.partition("\n\n")
    description = rest.partition("\n\n")[0]
    assert code == 0 and usage.startswith(f"usage: pbp-serialize {' '.join(argv)} ")
    assert len(description.split()) >= 20  # a paragraph that says what the command does, not just its name


def test_top_level_help_describes_every_command(capsys):
    code, out, _ = cli(capsys, "--help")
    demo = " ".join(out[out.index("    demo ") :].split("options:")[0].split())
    assert code == 0 and "custom operators" in demo and "torch.export" in demo


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["schema", "check", "--bogus", "x.schema"], "usage: pbp-serialize schema check "),
        (["schema", "format", "--strict"], "usage: pbp-serialize schema format "),
        (["name", "decode", "x", "y"], "usage: pbp-serialize name decode "),
        (["demo", "--fast"], "usage: pbp-serialize demo "),
    ],
    ids=["check", "format", "decode", "demo"],
)
def test_unknown_arguments_show_the_subcommands_usage(capsys, argv, usage):
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(usage)
    assert err.splitlines()[-1].startswith(f"{usage.removeprefix('usage: ').rstrip()}: error: unrecognized arguments: ")


# ------------------------------------------------------------------------------------------------
# real subprocesses


def subprocess_run(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("command", [["pbp-serialize"], [sys.executable, "-m", "piece_by_piece_serialize"]], ids=["script", "module"])
def test_subprocess_same_output(command):
    result = subprocess_run(*command, "schema", "check", "bad.schema")
    assert (result.returncode, result.stdout, result.stderr) == (1, BAD_TEXT, "")
    result = subprocess_run(*command, "schema", "check", "good_ops.py")
    assert (result.returncode, result.stdout, result.stderr) == (0, "checked 4 schemas: 0 errors, 0 warnings\n", "")
    result = subprocess_run(*command, "schema")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_schema_and_name_commands_do_not_import_torch():
    probe = (
        "import sys\n"
        "from piece_by_piece_serialize.cli import run\n"
        "codes = [run(['schema', 'check', '--quiet', 'bad_ops.py']), run(['schema', 'format', 'good.schema']),"
        " run(['schema', 'names', 'f(Tensor x) -> Tensor']), run(['name', 'decode', 'dict__2_a__b'])]\n"
        "print(codes, 'torch' in sys.modules)\n"
    )
    result = subprocess_run(sys.executable, "-c", probe)
    assert result.stdout.splitlines()[-1] == "[1, 0, 0, 0] False", result.stderr


# ------------------------------------------------------------------------------------------------
# the embedded default: every schema registered in torch


def _torch_rejects_own_print(torch) -> list[str]:
    """Registered schemas whose print torch's own parser refuses (the oracle of the torch-own-print note)."""
    out = []
    for schema in torch._C._jit_get_all_schemas():
        try:
            torch._C.parse_schema(str(schema))
        except RuntimeError:
            out.append(str(schema))
    return out


@pytest.mark.slow
def test_embedded_default_checks_every_torch_schema(capsys):
    import torch
    import torch.distributed.tensor  # noqa: F401  registers _dtensor:: schemas, one of them printed with PyObject

    total = len(torch._C._jit_get_all_schemas())
    own = _torch_rejects_own_print(torch)
    assert "_dtensor::mesh_get_process_group(PyObject mesh, int dim) -> PyObject" in own
    code, out, err = cli(capsys, "schema", "check", "--format", "json")
    assert code == 1 and total > 4000
    records = [json.loads(line) for line in out.splitlines()]
    # one error, torch's own: a schema that declares posinf twice (torch's parser does not look)
    (error,) = [r for r in records if r["severity"] == "error"]
    assert error["code"] == "duplicate-argument" and error["schema"].startswith("static_runtime::clamp_nan_to_num(")
    assert [a.name for a in torch._C.parse_schema(error["schema"]).arguments][-2:] == ["posinf", "posinf"]
    warnings = [r for r in records if r["severity"] == "warning"]
    notes = [r for r in records if r["severity"] == "note"]
    good = total - len(own)
    summary = err.splitlines()
    assert summary[:7] == [
        f"checked {total} schemas registered in torch {torch.__version__}",
        f"  parsed:                 {good}/{total}",
        f"  argument names agree:   {good}/{total}",
        f"  printed as torch does:  {good}/{total}",
        f"  torch re-parses ours:   {good}/{total}",
        f"  torch rejects its own print of {len(own)} (so do we)",
        f"  1 error, {len(warnings)} warnings",
    ]
    # its warnings are all tensor containers the dispatcher ignores
    assert {r["code"] for r in warnings} == {"dispatcher-ignores"}
    assert [r["code"] for r in notes] == ["torch-own-print"] * len(own)
    assert summary[7:] == ["    error duplicate-argument: 1", f"    note torch-own-print: {len(own)}", f"    warning dispatcher-ignores: {len(warnings)}"]
    assert all(r["path"] == "<torch>" and 1 <= r["line"] <= total for r in records)


def test_torch_own_print_accepted_by_us_is_an_error(monkeypatch):
    """The note is earned: were our parser to accept a print torch refuses, the run would fail."""
    from piece_by_piece_serialize.cli import _check

    real = _check._torch_parse
    monkeypatch.setattr(_check, "_torch_parse", lambda torch, text: (None, "refused") if text.startswith("aten::add.Tensor(") else real(torch, text))
    found = []
    summary = _check.check_torch(emit=found.append)
    assert summary.errors == 2 and summary.disagreements == 1  # and torch's own duplicate-argument
    assert [f.message for f in found if f.code == "torch-reparse"] == ["we parse what torch rejects: refused"]


@pytest.mark.slow
def test_demo(capsys):
    import torch

    code, out, err = cli(capsys, "demo", "--quiet")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[-1] == "demo: OK"
    total = len(torch._C._jit_get_all_schemas())
    good = total - len(_torch_rejects_own_print(torch))
    assert f"  parsed:                 {good}/{total}" in lines
    assert "decoded spec equal: True; rebuilt input equal: True" in lines
    assert any(line.startswith("name (") and "input_ids" in line for line in lines)
    # part 1, the job: the one call with its report, the program equal to the model, the artifact loaded in a
    # fresh process equal too
    assert any(line.startswith("  LlamaForCausalLM exported piece by piece in ") and "2 pieces behind operators" in line for line in lines)
    assert any(line.lstrip().startswith("layers.0-1 (x2)") and "behind an operator" in line and "own program" in line for line in lines)
    assert any(line.startswith("the program against the model, decode steps") and line.endswith("max |diff| = 0") for line in lines)
    assert any(line.startswith("loaded in a fresh process: 2 operators, load ") and line.endswith("max |diff| = 0") for line in lines)


def test_byte_order_mark_does_not_shift_columns(capsys, tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b'\xef\xbb\xbfimport torch\nlib = torch.library.Library("m", "DEF")\nlib.define("f(int x,) -> ()")\n')
    code, out, _ = cli(capsys, "schema", "check", "--quiet", str(path))
    assert code == 1
    assert out.splitlines()[0].startswith(f"{path}:3:21: error[syntax]: ")
