"""The documentation site builds strictly, and every code example in docs/ runs somewhere in the test suite.

* ``mkdocs build --strict`` (what ``make docs`` runs) succeeds: no broken link or anchor within or across
  pages, no page missing from the nav, the API reference read from the docstrings. Skipped when the ``docs``
  extra is not installed (``make test`` installs it).
* Each page's examples have one runner. The pages with a test module of their own are listed in
  ``RUNNERS``; the rest run here: the ``>>>`` sessions of ``python`` blocks (an exception is shown as
  ``Name: message``, as the pages print it), the plain ``python`` blocks, and the ``$ pbp-serialize`` shell
  sessions (``$ cat FILE`` writes the file shown). A new page or a new kind of example without a runner fails
  ``test_every_example_has_a_runner``.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import re
import shlex
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Pages whose examples are run by a test module of their own (it names the page).
RUNNERS = {
    "index.md": "tests/test_readme.py",  # the README's examples, by doctest
    "custom_op.md": "tests/custom_op/test_custom_op_docs.py",
    "export.md": "tests/export/test_export_docs.py",
    "onnx.md": "tests/onnx_export/test_onnx_docs.py",
    "serialization.md": "tests/serialize/test_docs.py",
    "cli.md": "tests/cli/test_cli_docs.py",  # python blocks, `schema check` over the fixtures, TOML/C++/YAML
}

# Shell sessions not run anywhere, and why.
NOT_RUN = {
    "$ pbp-serialize schema check | tail -7": "counts the schemas of the installed torch's registry",
    "$ pbp-serialize demo": "make demo itself; tests/cli/test_cli.py runs its steps",
}

_FENCE = re.compile(r"^( *)```([a-z]*)\n(.*?)^\1```$", re.M | re.S)


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _blocks(page: Path) -> list[tuple[str, str]]:
    """(language, body) of each fenced block of ``page``, indentation removed."""
    out = []
    for indent, lang, body in _FENCE.findall(page.read_text(encoding="utf-8")):
        out.append((lang, "\n".join(line[len(indent) :] for line in body.splitlines()) + "\n"))
    return out


def _is_session(body: str) -> bool:
    return body.lstrip().startswith(">>> ")


def _is_shell(body: str) -> bool:
    return any(line.startswith("$ pbp-serialize ") for line in body.splitlines())


def _sessions() -> list[tuple[str, str]]:
    """(page, sessions) for each page without a runner of its own: its ``>>>`` blocks in order, one namespace."""
    found = []
    for page, _, body in _examples("session"):
        if found and found[-1][0] == page:
            found[-1] = (page, found[-1][1] + body)
        else:
            found.append((page, body))
    return found


def _examples(kind: str) -> list[tuple[str, int, str]]:
    """(page, index, body) of every example of ``kind`` on pages without a runner of their own."""
    found = []
    for page in _pages():
        name = page.relative_to(DOCS).as_posix()
        for index, (lang, body) in enumerate(_blocks(page)):
            if kind == "session" and lang == "python" and _is_session(body) and name not in RUNNERS:
                found.append((name, index, body))
            elif kind == "python" and lang == "python" and not _is_session(body) and name not in RUNNERS:
                found.append((name, index, body))
            elif kind == "shell" and _is_shell(body) and not body.startswith("$ pbp-serialize schema check "):
                first = body.splitlines()[0]
                if first not in NOT_RUN and "|" not in first:
                    found.append((name, index, body))
    return found


def _ids(examples: list[tuple[str, int, str]]) -> list[str]:
    return [f"{page}[{index}]" for page, index, _ in examples]


# -- the site --------------------------------------------------------------------------------------------------


def test_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None:
        pytest.skip("the docs extra is not installed (pip install -e '.[docs]')")
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, out.stderr[-5000:]
    assert time.perf_counter() - start < 60
    site = tmp_path / "site"
    for page in _pages():
        if page.name != "index.md" or page.parent != DOCS:
            rel = page.relative_to(DOCS).with_suffix("")
            rel = rel.parent if rel.name == "index" else rel
            assert (site / rel / "index.html").is_file(), rel
    # The API reference is read from the docstrings, and the repository files the pages link to are published.
    api = (site / "api" / "serialize" / "index.html").read_text(encoding="utf-8")
    assert 'id="piece_by_piece_serialize.serialize.deserialize_args"' in api
    assert (site / "grammars" / "treespec_name.lark").read_text() == (ROOT / "grammars" / "treespec_name.lark").read_text()
    assert (site / "bench" / "ratios.svg").is_file()


def test_nav_lists_every_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w/]+\.md)\s*$", nav, flags=re.M))
    assert listed == {p.relative_to(DOCS).as_posix() for p in _pages()}


def test_api_pages_name_the_public_modules() -> None:
    for module in ("serialize", "export", "artifact", "onnx_export", "custom_op", "caches", "schema", "treespec_name", "type_info", "errors", "cli"):
        text = (DOCS / "api" / f"{module}.md").read_text(encoding="utf-8")
        assert f"::: piece_by_piece_serialize.{module}\n" in text
        assert importlib.util.find_spec(f"piece_by_piece_serialize.{module}") is not None


def test_the_rst_to_markdown_extension() -> None:
    spec = importlib.util.spec_from_file_location("griffe_rst", DOCS / "griffe_rst.py")
    if importlib.util.find_spec("griffe") is None:
        pytest.skip("the docs extra is not installed")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "Calls :func:`serialize_args` and :class:`~a.B`.\n\nNote [flat order]\n~~~~~~~~~~~~~~~~~\nBody\n"
    assert module.rst_to_markdown(text) == "Calls `serialize_args` and `a.B`.\n\n**Note [flat order]**\nBody\n"


# -- every example has a runner ------------------------------------------------------------------------------


def test_every_example_has_a_runner() -> None:
    for name, runner in RUNNERS.items():
        assert f"docs/{name}" in (ROOT / runner).read_text(encoding="utf-8"), (name, runner)
    run_here = {(p, i) for kind in ("session", "python", "shell") for p, i, _ in _examples(kind)}
    for page in _pages():
        name = page.relative_to(DOCS).as_posix()
        for index, (lang, body) in enumerate(_blocks(page)):
            example = lang == "python" or _is_shell(body) or _is_session(body)
            if not example or (name, index) in run_here:
                continue
            shell_elsewhere = _is_shell(body) and (
                body.startswith("$ pbp-serialize schema check ") or body.splitlines()[0] in NOT_RUN
            )
            assert name in RUNNERS or shell_elsewhere or lang == "text", f"{name} block {index} is run nowhere"
    assert len(run_here) >= 8


# -- the examples run here -------------------------------------------------------------------------------------


def _run_session(body: str) -> None:
    """Run a ``>>>`` session; each output must be the one shown (an exception as ``Name: message``)."""
    namespace: dict = {"__name__": "__doc_example__"}
    checker = doctest.OutputChecker()
    for example in doctest.DocTestParser().get_examples(body):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(example.source, "<docs example>", "single"), namespace)
            except Exception as err:  # an error shown as the page shows it; compared below
                print(f"{type(err).__name__}: {err}")
                if not example.want:
                    raise AssertionError(f"{example.source!r} raised:\n{traceback.format_exc()}") from err
        got = out.getvalue()
        assert checker.check_output(example.want, got, doctest.ELLIPSIS), (
            f"\n{example.source}expected:\n{example.want}got:\n{got}"
        )


@pytest.mark.parametrize(("page", "body"), _sessions(), ids=[page for page, _ in _sessions()])
def test_sessions_run_as_shown(page: str, body: str) -> None:
    _run_session(body)  # a page's sessions share one namespace, as a reader's interpreter would


@pytest.mark.parametrize(("page", "index", "body"), _examples("python"), ids=_ids(_examples("python")))
def test_python_block_runs_on_its_own(page: str, index: int, body: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__doc_example__"}
    exec(compile(body, f"docs/{page} block {index}", "exec"), namespace)
    # A comment that shows a value ("# 'text'") after an assignment shows that variable's value.
    for target, shown in re.findall(r"^(\w+) = .*\n# ('.*')$", body, flags=re.M):
        assert repr(namespace[target]) == shown, (target, namespace[target])


@pytest.mark.parametrize(("page", "index", "body"), _examples("shell"), ids=_ids(_examples("shell")))
def test_shell_session_prints_what_is_shown(page: str, index: int, body: str, tmp_path, monkeypatch, capsys) -> None:
    from piece_by_piece_serialize.cli import run

    monkeypatch.chdir(tmp_path)
    commands = re.split(r"^\$ ", body, flags=re.M)[1:]
    assert commands
    for command in commands:
        line, _, shown = command.partition("\n")
        argv = shlex.split(line)
        if argv[0] == "cat":
            (tmp_path / argv[1]).write_text(shown, encoding="utf-8")
            continue
        assert argv[0] == "pbp-serialize", line
        run(argv[1:])
        out, err = capsys.readouterr()
        assert out + err == shown, f"$ {line}\nexpected:\n{shown}got:\n{out + err}"
