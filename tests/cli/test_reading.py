"""What `schema check` reads, and what it refuses: no false greens, no hangs.

Only regular files are opened: a FIFO, socket or device met in a folder is passed over without being
opened (opening a FIFO blocks until a writer comes), and one named on the command line is refused. A file
or folder that cannot be read, and a Python file that cannot be parsed, fail the run with exit 2 and are
named on stderr, unless excluded. Standard input follows the same rule as files: UTF-8 (a BOM dropped),
no NUL byte. Plain text and stdin take full schemas and nameless ones; `--require-name` forces names, and
the messages speak of the command line, never of Python keywords.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from piece_by_piece_serialize.cli import run


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.schema").write_text("myops::f(Tensor x) -> Tensor\n", encoding="utf-8")
    return tmp_path


def stdin_bytes(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# ------------------------------------------------------------------------------------------------
# special files


def test_fifo_in_a_folder_is_passed_over(folder, capsys):
    os.mkfifo(folder / "pipe.py")
    os.mkfifo(folder / "pipe.schema")
    # run in a subprocess with a timeout: a reader that opened the FIFO would block forever
    result = subprocess.run(
        [sys.executable, "-m", "piece_by_piece_serialize", "schema", "check", "."],
        cwd=folder, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")


def test_fifo_named_on_the_command_line_is_refused_without_blocking(folder, capsys):
    os.mkfifo(folder / "pipe.schema")
    result = subprocess.run(
        [sys.executable, "-m", "piece_by_piece_serialize", "schema", "check", "pipe.schema", "ok.schema"],
        cwd=folder, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == "pbp-serialize: error: cannot read pipe.schema: not a regular file (use '-' to read standard input)\n"
    assert result.stdout == "checked 1 schema: 0 errors, 0 warnings\n"


def test_dangling_symlink_in_a_folder_is_not_a_source(folder, capsys):
    (folder / "gone.py").symlink_to(folder / "nowhere.py")
    assert cli(capsys, "schema", "check", ".") == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")


def test_symlinked_folders_are_not_followed(folder, capsys):
    (folder / "sub").mkdir()
    (folder / "sub" / "bad.schema").write_text("myops::g(int x,) -> ()\n", encoding="utf-8")
    (folder / "sub" / "loop").symlink_to(folder, target_is_directory=True)  # a cycle, if followed
    code, out, _ = cli(capsys, "schema", "check", ".")
    assert code == 1 and out.splitlines()[-1] == "checked 2 schemas: 1 error, 0 warnings"


# ------------------------------------------------------------------------------------------------
# unreadable files and folders


def test_unreadable_folder_fails_the_run(folder, capsys, monkeypatch):
    (folder / "locked").mkdir()
    (folder / "locked" / "hidden.schema").write_text("myops::g(int x,) -> ()\n", encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path):
        if os.path.basename(path) == "locked":
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, out, err = cli(capsys, "schema", "check", ".")
    assert (code, out) == (2, "checked 1 schema: 0 errors, 0 warnings\n")
    assert err == "pbp-serialize: error: cannot read folder ./locked: Permission denied\n"
    # excluded, it is not even listed
    assert cli(capsys, "schema", "check", "--exclude", "locked", ".") == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")


def _as_nobody() -> list[str]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged user")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture()
def shared_folder():
    # pytest's tmp_path lives under a folder only root may enter: make one the unprivileged user can reach
    root = Path(tempfile.mkdtemp(prefix="pbp-unreadable-"))
    root.chmod(0o755)
    yield root
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755)
    shutil.rmtree(root)


def test_unreadable_folder_and_file_for_real(shared_folder):
    drop = _as_nobody()
    root = shared_folder
    (root / "ok.schema").write_text("myops::f(Tensor x) -> Tensor\n", encoding="utf-8")
    (root / "locked").mkdir()
    (root / "locked" / "a.schema").write_text("myops::g(int x,) -> ()\n", encoding="utf-8")
    (root / "secret.py").write_text("lib.define('f(int x,) -> ()')\n", encoding="utf-8")
    (root / "locked").chmod(0)
    (root / "secret.py").chmod(0)
    probe = subprocess.run([*drop, sys.executable, "-c", "import piece_by_piece_serialize"], cwd=root, capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip("the unprivileged user cannot run this interpreter")
    result = subprocess.run([*drop, sys.executable, "-m", "piece_by_piece_serialize", "schema", "check", "."], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert sorted(result.stderr.splitlines()) == [
        "pbp-serialize: error: cannot read ./secret.py: Permission denied",
        "pbp-serialize: error: cannot read folder ./locked: Permission denied",
    ]
    assert result.stdout == "checked 1 schema: 0 errors, 0 warnings\n"


def test_unparseable_python_fails_the_run_unless_excluded(folder, capsys):
    (folder / "ops.py").write_text("import torch\nlib = torch.library.Library('m', 'DEF')\nlib.define('f(Tensor x) -> Tensor'\n", encoding="utf-8")
    code, out, err = cli(capsys, "schema", "check", ".")
    assert (code, out) == (2, "checked 1 schema: 0 errors, 0 warnings\n")
    assert err == "pbp-serialize: error: ./ops.py:3:11: cannot parse Python source ('(' was never closed); its schemas were not checked\n"
    assert cli(capsys, "schema", "check", "--exclude", "ops.py", ".")[0] == 0


def test_the_checked_files_own_warnings_stay_quiet(folder, capsys):
    import warnings

    (folder / "regex.py").write_text("import re, torch\nPAT = re.compile('\\d+')\ntorch._C.parse_schema('f(int x) -> ()')\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an invalid escape in the file must not become our warning
        assert cli(capsys, "schema", "check", "regex.py") == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")


def test_python_without_schema_calls_is_not_parsed(folder, capsys):
    # a file that mentions none of define(, custom_op, triton_op, parse_schema cannot hold a schema site;
    # parsing every Python file of a tree would cost ~0.4 s per MB for nothing
    (folder / "py2_script.py").write_text("print 'hello'\n", encoding="utf-8")
    assert cli(capsys, "schema", "check", ".") == (0, "checked 1 schema: 0 errors, 0 warnings\n", "")


def test_nul_byte_is_not_text(folder, capsys):
    (folder / "blob.cpp").write_bytes(b'm.def("f(Tensor x) -> Tensor");\n\x00\x01\x02')
    code, _, err = cli(capsys, "schema", "check", "blob.cpp")
    assert code == 2
    assert err == "pbp-serialize: error: cannot read blob.cpp: not text (a NUL byte at byte 32)\n"


# ------------------------------------------------------------------------------------------------
# stdin: the same UTF-8 rule as files


def test_binary_stdin_is_refused(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    code, out, err = cli(capsys, "schema", "check", "-")
    assert (code, out) == (2, "checked 0 schemas: 0 errors, 0 warnings\n")
    assert err == "pbp-serialize: error: cannot read <stdin>: not UTF-8 text (invalid start byte at byte 0)\n"


def test_stdin_nul_is_refused(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, b"myops::f(Tensor x) -> Tensor\n\x00")
    code, _, err = cli(capsys, "schema", "check", "-")
    assert code == 2 and err == "pbp-serialize: error: cannot read <stdin>: not text (a NUL byte at byte 29)\n"


def test_stdin_bom_and_crlf_like_a_file(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, b"\xef\xbb\xbfmyops::f(int x,) -> ()\r\n")
    code, out, _ = cli(capsys, "schema", "check", "-")
    assert code == 1
    assert out.splitlines()[0].startswith("<stdin>:1:16: error[syntax]: ")  # the BOM shifts no column


# ------------------------------------------------------------------------------------------------
# nameless schemas in plain text and on stdin


INFERRED = "(Tensor x, Tensor? y, *, float eps=1e-05) -> Tensor\n"


def test_nameless_and_named_lines_are_both_schemas(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, (INFERRED + "myops::f(Tensor x) -> Tensor\n((Tensor x) -> Tensor)\n").encode())
    assert cli(capsys, "schema", "check", "-") == (0, "checked 3 schemas: 0 errors, 0 warnings\n", "")


def test_require_name(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, (INFERRED + "myops::f(Tensor x) -> Tensor\n").encode())
    code, out, err = cli(capsys, "schema", "check", "--require-name", "-")
    assert (code, err) == (1, "")
    assert out == (
        "<stdin>:1:1: error[missing-name]: a schema needs an operator name before its argument list (--require-name is set), "
        "like 'myops::f(Tensor x) -> Tensor'\n"
        "  (Tensor x, Tensor? y, *, float eps=1e-05) -> Tensor\n"
        "  ^\n"
        "checked 2 schemas: 1 error, 0 warnings\n"
    )


@pytest.mark.parametrize(
    ("name", "source", "message"),
    [
        ("n.yaml", "- func: (Tensor self) -> Tensor\n- func: g(Tensor self) -> Tensor\n", "a 'func:' entry needs an operator name before its argument list, like 'f(Tensor self) -> Tensor'"),
        ("n.cpp", 'TORCH_LIBRARY(m, m) {\n  m.def("(Tensor x) -> Tensor");\n}\n', "TORCH_LIBRARY's def needs an operator name before the argument list, like 'f(Tensor x) -> Tensor'"),
        ("n.py", "import torch\ntorch._C.parse_schema('(Tensor x) -> Tensor')\n", "parse_schema needs an operator name before the argument list, like 'f(Tensor x) -> Tensor'"),
    ],
    ids=["yaml", "cpp", "parse_schema"],
)
def test_missing_name_where_torch_needs_one(folder, capsys, name, source, message):
    (folder / name).write_text(source, encoding="utf-8")
    code, out, _ = cli(capsys, "schema", "check", name)
    assert code == 1
    assert out.splitlines()[0].endswith(f": error[missing-name]: {message}")
    assert "allow_nameless" not in out  # a command-line user cannot pass a Python keyword


def test_format_takes_nameless_lines_too(folder, capsys, monkeypatch):
    stdin_bytes(monkeypatch, b"(Tensor  x)->Tensor\n")
    assert cli(capsys, "schema", "format") == (0, "(Tensor x) -> Tensor\n", "")
    stdin_bytes(monkeypatch, b"(Tensor  x)->Tensor\n")
    code, out, err = cli(capsys, "schema", "format", "--require-name")
    assert (code, out) == (1, "")
    assert "(--require-name is set)" in err.splitlines()[0]
