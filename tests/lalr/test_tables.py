"""The generated LALR tables and the engine that runs them agree with the grammars and with lark.

``piece_by_piece_serialize/_lalr/_generated/*.py`` are exported from ``grammars/*.lark`` by ``_lalr.build`` (``make
tables``) and run by ``_lalr.Engine``. Lark stays the reference: here it parses the same inputs into plain trees
(no transformer), and the engine, driven by a transformer that builds the same plain trees, must give equal trees
on every accepted input and fail at the same position, on the same token, expecting the same terminals, on every
rejected one. Inputs: all schemas torch registers, the test corpora, the fuzzing seeds, and deterministic
one-character mutations of them, which exercise the error paths.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from piece_by_piece_serialize._lalr import build as _lalr_build
from piece_by_piece_serialize._lalr import tables as _lalr_tables

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = 4000  # per grammar; each is one character deleted, duplicated or replaced in a real input


@pytest.mark.parametrize("name", sorted(_lalr_build.GRAMMARS))
def test_generated_tables_are_current(name: str) -> None:
    path = _lalr_build.module_path(name)
    assert path.read_text(encoding="utf-8") == _lalr_build.render(name, _lalr_build.build_tables(name)), (
        f"{path.name} is stale: run `make tables` after editing grammars/{name}.lark"
    )


def test_stale_tables_are_rebuilt_from_the_grammar(monkeypatch: pytest.MonkeyPatch) -> None:
    current = _lalr_tables.load("schema")
    # both sides of the stamp: the check at load time and the stamp the build writes into the tables
    monkeypatch.setattr(_lalr_tables, "grammar_sha256", lambda name: "edited")
    monkeypatch.setattr(_lalr_build, "grammar_sha256", lambda name: "edited")
    rebuilt = _lalr_tables.load("schema")
    assert rebuilt is not current and rebuilt["grammar_sha256"] == "edited"
    assert {k: v for k, v in rebuilt.items() if k != "grammar_sha256"} == {
        k: v for k, v in current.items() if k != "grammar_sha256"
    }


# --------------------------------------------------------------------------------------------------------------
# Engine == lark (the comparison is the one of the differential fuzz harness, fuzz/fuzz_engine.py)


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def _harness() -> ModuleType:
    return _load_module("fuzz_engine", ROOT / "fuzz" / "fuzz_engine.py")


def _mutants(texts: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = [t for t in texts if 0 < len(t) <= 2000]  # lark's accepts() copies its stacks for every terminal
    alphabet = [*sorted(set("".join(texts))), "\n", "\\", "'", "\x00", "é"]
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        i = rng.randrange(len(text))
        kind = rng.randrange(3)
        if kind == 0:
            out.append(text[:i] + text[i + 1 :])
        elif kind == 1:
            out.append(text[:i] + text[i] + text[i:])
        else:
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1 :])
    return out


def _read_texts(folder: Path, suffixes: tuple[str, ...]) -> list[str]:
    texts = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (not suffixes or path.suffix in suffixes):
            try:
                texts.append(path.read_bytes().decode("utf-8"))
            except UnicodeDecodeError:
                continue
    return texts


def _compare(name: str, texts: list[str]) -> dict[str, int]:
    harness = _harness()
    tally = {"tree": 0, "token": 0, "char": 0}
    mismatches = []
    for text in texts:
        expected, got = harness.outcomes(name, text)
        if got != expected:
            mismatches.append((text, expected, got))
        tally[got[0]] += 1
    assert not mismatches, f"{len(mismatches)} of {len(texts)} differ; first: {mismatches[0]}"
    return tally


@pytest.fixture(scope="module")
def schema_texts() -> list[str]:
    from _torch_registry import shipped_schemas

    registered = list(shipped_schemas())
    assert len(registered) == 4374
    corpus = _read_texts(ROOT / "tests" / "corpus" / "schema", (".schema",))
    seeds = _read_texts(ROOT / "fuzz" / "corpus" / "schema", ())
    return registered + corpus + seeds


def test_schema_engine_agrees_with_lark_on_one_line_text(schema_texts: list[str]) -> None:
    texts = [t for t in schema_texts if "\n" not in t]
    texts += [t for t in _mutants(texts, MUTANTS, seed=1) if "\n" not in t]
    tally = _compare("schema", texts)
    assert tally["tree"] >= 4374 and tally["token"] > 500 and tally["char"] > 50, tally


def test_schema_engine_agrees_with_lark_on_multi_line_text(schema_texts: list[str]) -> None:
    texts = [t for t in schema_texts if "\n" in t]
    texts += [t.replace(", ", ",\n ", 1) for t in schema_texts[:2000]]
    texts += [t for t in _mutants(texts, MUTANTS, seed=2) if "\n" in t]
    tally = _compare("schema", texts)
    assert tally["tree"] > 1000 and tally["token"] > 200, tally


def test_treespec_engine_agrees_with_lark() -> None:
    import torch.utils._pytree as pytree

    # Imported under the name the TreeSpec tests use: a second copy of the module would register its types twice.
    if str(ROOT / "tests" / "treespec_name") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests" / "treespec_name"))
    from corpus_inputs import build_corpus  # type: ignore[import-not-found]  # realistic inputs of the TreeSpec tests

    from piece_by_piece_serialize import tree_spec_as_name

    specs = [pytree.tree_flatten(value)[1] for value in build_corpus().values()]
    texts = [tree_spec_as_name(spec, spec.num_leaves) for spec in specs]
    assert len(texts) == 48
    texts += _read_texts(ROOT / "tests" / "corpus" / "treespec", (".name",))
    texts += _read_texts(ROOT / "fuzz" / "corpus" / "treespec_name", ())
    texts += _mutants(texts, MUTANTS, seed=3)
    tally = _compare("treespec_name", texts)
    assert tally["tree"] > 300 and tally["token"] > 500 and tally["char"] > 100, tally


def _type_info_texts() -> list[str]:
    texts = _read_texts(ROOT / "tests" / "corpus" / "type_info", (".ti",))
    texts += _read_texts(ROOT / "tests" / "corpus" / "regressions" / "type_info", ())
    texts += _read_texts(ROOT / "fuzz" / "corpus" / "type_info", ())
    return sorted({t.rstrip("\n") for t in texts})


def test_type_info_engine_agrees_with_lark() -> None:
    texts = _type_info_texts()
    assert len(texts) > 100
    texts += _mutants(texts, MUTANTS, seed=4)
    tally = _compare("type_info", texts)
    assert tally["tree"] > 1000 and tally["token"] > 1000 and tally["char"] > 5, tally


# Structure descriptions (the input of `pbp-serialize name encode`): every rule, key kind and separator, with
# whitespace, and the valid and invalid cases of tests/cli/test_structure.py.
STRUCTURES = [
    "*", "(*)", "()", "(*,)", "(*, *)", "(*, *,)", "[]", "[*]", "[*, [*],]", "{}", "{'a': *}", '{"a": *, }',
    "((*, *), {'a': *})", '{"x y": *, 0: *, -7: [*], None: (), True: {}, False: [*, *]}',
    "{'it\\'s': *, '\\u00e9': *, '\\n': *}", "OrderedDict({'b': *, 'a': *})", "OrderedDict()", "OrderedDict({})",
    " [ *\n, * ] ", "\t(\r\n*\n,\n)\n", "[[[[*]]]]", "((((*))))", "{1: {2: {3: (*, [*, {'k': *}])}}}",
    "{'a': *, 'a': *}", "{True: *, 1: *}", "(*, *", "[*, *,,]", "{'a' *}", "{a: *}", "OrderedDict(*)", "{-'a': *}",
    "(* *)", "*,", "'a'", "01", "{01: *}", "{'a\n': *}", "x", "#", "[*]]", "",
]


def _structure_texts() -> list[str]:
    module = _load_module("_structure_cases", ROOT / "tests" / "cli" / "test_structure.py")
    texts = STRUCTURES + [case[0] for case in module.VALID] + [case[0] for case in module.INVALID]
    return sorted(set(texts))


def test_structure_engine_agrees_with_lark() -> None:
    # The one grammar with %ignore under a contextual lexer: ignored text between tokens, before a token the state
    # does not take and before the end must give lark's tokens, positions and expected sets.
    texts = _structure_texts()
    texts += _mutants(texts, MUTANTS, seed=5)
    tally = _compare("structure", texts)
    assert tally["tree"] > 300 and tally["token"] > 1000 and tally["char"] > 500, tally


def test_sym_expr_engine_agrees_with_lark() -> None:
    # The symbolic expressions: %ignore'd spaces under a contextual lexer, and keywords of a regex terminal (NAME)
    texts = sorted({t.rstrip("\n") for t in _read_texts(ROOT / "tests" / "corpus" / "sym_expr", (".expr",))})
    assert len(texts) > 80
    texts += _mutants(texts, MUTANTS, seed=6)
    tally = _compare("sym_expr", texts)
    assert tally["tree"] > 80 and tally["token"] > 500 and tally["char"] > 50, tally
