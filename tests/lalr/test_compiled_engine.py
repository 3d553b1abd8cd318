"""The optional compiled engine (``make accel``) gives what the pure-Python engine gives, and is never run stale.

The choice itself (``_lalr.choice.choose``) is tested on stand-in modules, and once through the package in a
fresh interpreter with a stale stand-in installed as ``_lalr._compiled``. The agreement test needs a real build:
it skips when none is there (``make test`` builds nothing) or when the one there is stale, and otherwise parses
(with the compiled schema callbacks too, ``schema/_transform_compiled``, under the same conditions),
in two fresh interpreters (``PBP_ENGINE=python`` and ``PBP_ENGINE=compiled``), every schema torch registers,
each of them cut in half (the error path: messages, offsets, expected tokens), the invalid schema corpus, and
the TreeSpec names of the whole TreeSpec corpus with the invalid name corpus, and compares every printed string,
AST repr and error, one by one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from piece_by_piece_serialize._lalr import choice as _engine_choice
from piece_by_piece_serialize._lalr import engine as _lalr
from piece_by_piece_serialize.schema import _transform

REPO = Path(__file__).resolve().parents[2]


def _stand_in(stamp: str) -> types.ModuleType:
    module = types.ModuleType("piece_by_piece_serialize._lalr._compiled")
    module.SOURCE_SHA256 = stamp  # type: ignore[attr-defined]
    return module


def test_current_stamp_chooses_the_compiled_engine() -> None:
    compiled = _stand_in(_engine_choice.source_sha256())
    assert _engine_choice.choose("", compiled) is compiled
    assert _engine_choice.choose("compiled", compiled) is compiled
    assert _engine_choice.choose("python", compiled) is _lalr


def test_stale_stamp_falls_back_to_the_pure_engine() -> None:
    stale = _stand_in("0" * 64)
    assert _engine_choice.choose("", stale) is _lalr
    assert _engine_choice.choose("auto", stale) is _lalr
    with pytest.raises(RuntimeError, match=r"built from another version of engine\.py \(run `make accel` again\)"):
        _engine_choice.choose("compiled", stale)


def test_no_build_falls_back_unless_compiled_is_asked_for() -> None:
    assert _engine_choice.choose("", None) is _lalr
    with pytest.raises(RuntimeError, match=r"^PBP_ENGINE=compiled, but no compiled engine is built \(run `make accel`\)$"):
        _engine_choice.choose("compiled", None)
    with pytest.raises(ValueError, match=r"^PBP_ENGINE must be one of auto, python, compiled, got 'fast'$"):
        _engine_choice.choose("fast", None)


# A stale build installed before the parsers load: the package must parse with the pure engine all the same.
_STALE_CHILD = """
import sys, types
stale = types.ModuleType("piece_by_piece_serialize._lalr._compiled")
stale.SOURCE_SHA256 = "0" * 64
sys.modules[stale.__name__] = stale
from piece_by_piece_serialize import parse_schema
from piece_by_piece_serialize._lalr import choice as _engine_choice, engine as _lalr
assert _engine_choice.NAME == "python" and _engine_choice.Engine is _lalr.Engine, _engine_choice.Engine
print(parse_schema("aten::f(Tensor x) -> Tensor"))
"""


def _child_env(engine: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PBP_ENGINE"}
    if engine is not None:
        env["PBP_ENGINE"] = engine
    return env


def test_stale_build_is_not_run_by_the_package() -> None:
    done = subprocess.run([sys.executable, "-c", _STALE_CHILD], capture_output=True, text=True, env=_child_env(None))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "aten::f(Tensor x) -> Tensor\n"
    forced = subprocess.run([sys.executable, "-c", _STALE_CHILD], capture_output=True, text=True, env=_child_env("compiled"))
    assert forced.returncode != 0
    assert "RuntimeError: PBP_ENGINE=compiled, but the compiled engine piece_by_piece_serialize._lalr._compiled was built " \
           "from another version of engine.py" in forced.stderr


# The schema callbacks' copy (schema/_transform_compiled) is chosen by the same function, with a stamp over schema/
def _choose_callbacks(choice: str, compiled: types.ModuleType | None) -> types.ModuleType:
    return _engine_choice.choose_copy(choice, compiled, _transform, lambda: _engine_choice.sources_sha256(_transform),
                                      "compiled copy of the schema callbacks", "schema/*.py or _lalr/engine.py")


def test_stale_stamp_falls_back_to_the_pure_callbacks() -> None:
    current = _stand_in(_engine_choice.sources_sha256(_transform))
    assert _choose_callbacks("", current) is current
    stale = _stand_in(_engine_choice.source_sha256())  # the engine's stamp is not the callbacks' one
    assert _choose_callbacks("", stale) is _transform
    assert _choose_callbacks("python", current) is _transform
    with pytest.raises(RuntimeError, match=r"^PBP_ENGINE=compiled, but the compiled copy of the schema callbacks "
                                           r".* was built from another version of schema/\*\.py or _lalr/engine\.py"):
        _choose_callbacks("compiled", stale)
    with pytest.raises(RuntimeError, match=r"^PBP_ENGINE=compiled, but no compiled copy of the schema callbacks is built"):
        _choose_callbacks("compiled", None)


_STALE_CALLBACKS_CHILD = """
import sys, types
stale = types.ModuleType("piece_by_piece_serialize.schema._transform_compiled")
stale.SOURCE_SHA256 = "0" * 64
sys.modules[stale.__name__] = stale
from piece_by_piece_serialize import parse_schema
from piece_by_piece_serialize.schema import _choice, _transform
assert _choice.NAME == "python" and _choice.parse is _transform.parse, _choice.parse
print(parse_schema("aten::f(Tensor x) -> Tensor"))
"""


def test_stale_callbacks_build_is_not_run_by_the_package() -> None:
    done = subprocess.run([sys.executable, "-c", _STALE_CALLBACKS_CHILD], capture_output=True, text=True,
                          env=_child_env(None))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "aten::f(Tensor x) -> Tensor\n"


# Everything both engines are compared on, printed as JSON by one fresh interpreter per engine.
_OUTCOMES_CHILD = """
import json, sys
from pathlib import Path
import torch
from piece_by_piece_serialize import parse_schema, pretty_name, tree_spec_as_name, tree_spec_from_name
from piece_by_piece_serialize._lalr import choice as _engine_choice
from piece_by_piece_serialize.schema import _choice as _callbacks_choice
from piece_by_piece_serialize import SchemaError, TreeSpecNameError

repo = Path(sys.argv[1])
sys.path.insert(0, str(repo / "tests" / "treespec_name"))
from corpus_inputs import build_corpus

def outcome(parse, text):
    try:
        value = parse(text)
    except (SchemaError, TreeSpecNameError) as e:
        return ["error", type(e).__name__, repr(e), str(e)]
    return ["ok", repr(value), str(value)]

out = {"engine": _engine_choice.NAME, "callbacks": _callbacks_choice.NAME, "schema": [], "treespec": []}
schemas = [str(s) for s in torch._C._jit_get_all_schemas()]
schemas += [s[: len(s) // 2] for s in schemas]
schemas += [p.read_text(encoding="utf-8") for p in sorted((repo / "tests/corpus/schema/invalid").glob("*.schema"))]
for text in schemas:
    out["schema"].append([text, outcome(parse_schema, text)])
names = []
for case, tree in build_corpus().items():
    spec = torch.utils._pytree.tree_structure(tree)
    names.append(tree_spec_as_name(spec, spec.num_leaves))
names += [name[: len(name) // 2] for name in names]
names += [p.read_text(encoding="utf-8") for p in sorted((repo / "tests/corpus/treespec/invalid").glob("*.name"))]
for name in names:
    out["treespec"].append([name, outcome(tree_spec_from_name, name), outcome(pretty_name, name)])
print(json.dumps(out))
"""


def _compiled_state() -> str | None:
    """Why the agreement test cannot run here, or None when a current compiled engine is built."""
    try:
        from piece_by_piece_serialize._lalr import _compiled  # type: ignore[attr-defined]
    except ImportError:
        return "no compiled engine built (make accel)"
    if getattr(_compiled, "SOURCE_SHA256", None) != _engine_choice.source_sha256():
        return "the compiled engine is stale (make accel)"
    try:
        from piece_by_piece_serialize.schema import _transform_compiled  # type: ignore[attr-defined]
    except ImportError:
        return "no compiled schema callbacks built (make accel)"
    if getattr(_transform_compiled, "SOURCE_SHA256", None) != _engine_choice.sources_sha256(_transform):
        return "the compiled schema callbacks are stale (make accel)"
    return None


def _outcomes(engine: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _OUTCOMES_CHILD, str(REPO)], capture_output=True, text=True,
                          env=_child_env(engine), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.slow
def test_compiled_engine_agrees_with_the_pure_one() -> None:
    why = _compiled_state()
    if why is not None:
        pytest.skip(why)
    pure, compiled = _outcomes("python"), _outcomes("compiled")
    assert (pure["engine"], compiled["engine"]) == ("python", "compiled")
    assert (pure["callbacks"], compiled["callbacks"]) == ("python", "compiled")
    for language in ("schema", "treespec"):
        ours, theirs = pure[language], compiled[language]
        assert isinstance(ours, list) and isinstance(theirs, list)
        assert len(ours) == len(theirs) > 90
        differ = [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b]
        assert not differ, differ[:3]
    # both the parses and the errors were exercised
    for language in ("schema", "treespec"):
        assert {entry[1][0] for entry in pure[language]} == {"ok", "error"}  # type: ignore[union-attr]
