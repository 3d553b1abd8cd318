"""Hostile archives of a piece by size (Note [programs by size]), each built from a real archive of ``toy.Chunked``
whose ``PadToFour`` gets programs by size: a bad ``by_size`` entry of the manifest, a by-size program whose guards
are code or a form the domain reader does not read, a load that fails after its operators are registered.

Each is refused with an ``ArtifactError`` whose ``path`` is the file and whose message says what is wrong, leaves no
operator of a load's namespace registered, and runs nothing: where a payload would run code it creates a marker
file, and ``eval``/``exec`` are watched for its text.
"""

from __future__ import annotations

import builtins
import json
import re
import types
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from _archive_edit import MANIFEST, redigest  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import _ops, _rules, _runnable  # noqa: E402
from piece_by_piece_serialize.domains import DomainError, domain_of  # noqa: E402

SIZED = "models/piece_1.json"  # the second of Chunked's five programs by size


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = toy.Chunked().eval()
    named = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
    result = export_piece_by_piece(model, (torch.randn(2, 3, 8),), dynamic_shapes=named)
    path = tmp_path_factory.mktemp("chunked") / "chunked.pt2"
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        (operator,) = json.loads(archive.read(f"chunked/{MANIFEST}"))["operators"]
    assert operator["program"] is None and [e["program"] for e in operator["by_size"]] == [f"piece_{i}" for i in range(5)]
    load_piece_by_piece(path).close()  # the control: the untouched archive loads
    return path


def _rewrite(src: Path, dst: Path, member: str, change: Callable[[Any], None]) -> Path:
    """A copy of ``src`` with the JSON ``member`` (a path inside its folder) changed in place by ``change``; after a
    program document is changed, the manifest's digests are the new documents' (an attacker keeps them consistent)."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        members = {info.filename.split("/", 1)[1]: old.read(info) for info in old.infolist()}
        parsed = json.loads(members[member])
        change(parsed)
        members[member] = json.dumps(parsed).encode()
        if member.startswith("models/"):
            redigest(members)
        for info in old.infolist():
            new.writestr(info, members[info.filename.split("/", 1)[1]])
    return dst


def _own_operators() -> set[str]:
    """The operators of the namespaces a load registers (``pbp_`` and the archive's digest, Note [safe loading]):
    torch registers operators of its own lazily, the first time a path needs them, which a load may be."""
    return {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("pbp_")}


def _refused(path: Path, message: str) -> ArtifactError:
    """The load of ``path`` refused with an ``ArtifactError`` naming the file and saying ``message``, no operator
    of a load's namespace left registered."""
    before = _own_operators()
    with pytest.raises(ArtifactError) as info:
        load_piece_by_piece(path)
    error = info.value
    assert type(error) is ArtifactError and error.path == str(path) and str(error).startswith(f"{path}: ")
    assert message in error.reason, error.reason
    assert not _own_operators() - before, "a refused load left operators registered"
    return error


def _sized(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    """A change of the manifest's one operator, the piece by size."""
    return lambda manifest: change(manifest["operators"][0])


def _both(op: dict[str, Any]) -> None:
    op.update(program=op["by_size"][0]["program"], program_digest=op["by_size"][0]["program_digest"])


_COUNT = "manifest operators[0].by_size: programs by size are 1 to 64, only of an operator without a program of its own"
_BAD_ENTRIES = {
    "own_and_by_size": (_sized(_both), _COUNT),
    "empty": (_sized(lambda op: op.update(by_size=[])), _COUNT),
    "more_than_64": (_sized(lambda op: op.update(by_size=[dict(op["by_size"][0], program=f"p{i}") for i in range(65)])), _COUNT),
    "not_a_list": (_sized(lambda op: op.update(by_size=op["by_size"][0])), "manifest operators[0].by_size: expected a list, got an object"),
    "extra_key": (_sized(lambda op: op["by_size"][1].update(x=1)), "manifest operators[0].by_size[1]: expected the keys ['program', 'program_digest']; unknown ['x']"),
    "missing_key": (_sized(lambda op: op["by_size"][1].pop("program_digest")), "manifest operators[0].by_size[1]: expected the keys ['program', 'program_digest']; missing ['program_digest']"),
    "duplicate": (_sized(lambda op: op["by_size"].append(op["by_size"][0])), "manifest operators[0].by_size: a program is named twice among the programs by size"),
    "wrong_digest": (_sized(lambda op: op["by_size"][1].update(program_digest="0" * 64)), "models/piece_1.json is not the program the operator chunks (chunks) was saved with"),
    "bad_digest": (_sized(lambda op: op["by_size"][1].update(program_digest="x")), "manifest operators[0].by_size[1].program_digest: \"x\" is not a SHA-256 digest"),
    "missing_member": (_sized(lambda op: op["by_size"][2].update(program="piece_9")), "the archive has no models/piece_9.json"),
    "a_path": (_sized(lambda op: op["by_size"][2].update(program="../model")), "manifest operators[0].by_size[2].program: '../model' is not an ASCII identifier"),
    # the top program, read as a piece's: it calls the operators of the file's namespace, which no piece may call
    "the_top_program": (_sized(lambda op: op["by_size"][0].update(program="model")), "models/model.json at .graph_module.graph.nodes[1].target calls"),
}  # fmt: skip


@pytest.mark.parametrize(("change", "message"), _BAD_ENTRIES.values(), ids=_BAD_ENTRIES.keys())
def test_a_bad_by_size_entry_is_refused_naming_the_file(chunked: Path, tmp_path: Path, change: Callable[[Any], None], message: str) -> None:
    path = _rewrite(chunked, tmp_path / "entry.pt2", MANIFEST, change)
    assert _refused(path, message).reason.startswith(message)  # the first thing wrong, said as it is
    load_piece_by_piece(chunked).close()  # and the genuine archive still loads: nothing of the refused one is left


def test_a_by_size_load_that_fails_late_closes_the_operators_it_registered(chunked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []
    close = _ops.LoadedOperator.close

    def watched(self: Any) -> None:
        closed.append(self.qualname.split("::")[1])
        close(self)

    monkeypatch.setattr(_ops.LoadedOperator, "close", watched)
    # a program by size that returns another dtype than its operator's call records: refused once registered
    path = _rewrite(chunked, tmp_path / "dtype.pt2", MANIFEST, _sized(lambda op: op["calls"][0].update(out_dtypes=["float64"])))
    _refused(path, "the program piece_0 of chunks returns [('float32', 'cpu')] where its operator's call records [('float64', 'cpu')]")
    assert closed == ["chunks"]

    def broken(self: Any, *args: Any) -> None:
        raise RuntimeError("compiling the program failed")

    with monkeypatch.context() as patch:
        patch.setattr(_runnable.FlatProgramModule, "__init__", broken)
        _refused(chunked, "the program model cannot be made runnable: RuntimeError: compiling the program failed")
    assert closed == ["chunks", "chunks"]
    load_piece_by_piece(chunked).close()


@pytest.fixture
def watched_eval(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts ``eval`` and ``exec`` were given during the test (FX's generated code is a code object: not text)."""
    seen: list[str] = []
    for name in ("eval", "exec"):
        real = getattr(builtins, name)

        def spy(source: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if isinstance(source, (str, bytes)):
                seen.append(source if isinstance(source, str) else source.decode(errors="replace"))
            return _real(source, *args, **kwargs)

        monkeypatch.setattr(builtins, name, spy)
    yield seen


def _hostile_guards(marker: Path) -> dict[str, str]:
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    return {
        "import_call": f"L['tensors'][0].size()[1] >= 1 or {touch}",
        "os_system": f"__import__('os').system('touch {marker}') == 0",
        "lambda": f"(lambda: {touch})() is None",
        "dunder_attribute": f"L['tensors'][0].__class__.__init__.__globals__['__builtins__']['exec']({touch!r}) is None",
        "comprehension": f"[{touch} for _ in (0,)] != []",
    }


@pytest.mark.parametrize("kind", ["import_call", "os_system", "lambda", "dunder_attribute", "comprehension"])
def test_a_by_size_guard_that_is_code_is_refused_and_never_runs(chunked: Path, tmp_path: Path, watched_eval: list[str], kind: str) -> None:
    marker = tmp_path / "ran"
    guard = _hostile_guards(marker)[kind]
    assert not _rules.guard_ok(guard)
    path = _rewrite(chunked, tmp_path / "guard.pt2", SIZED, lambda program: program["guards_code"].append(guard))
    error = _refused(path, f"{SIZED} at .guards_code: has the guard ")
    assert error.reason.endswith("which is not a comparison of sizes")
    assert not marker.exists()
    assert not [s for s in watched_eval if str(marker) in s or "__import__" in s]


@pytest.mark.parametrize("kind", ["import_call", "os_system", "lambda", "dunder_attribute", "comprehension"])
def test_the_domain_reader_reads_a_guard_that_is_code_without_running_it(tmp_path: Path, watched_eval: list[str], kind: str) -> None:
    # behind the strict reader's guard_ok (above), the domain reader alone: it parses with ast, never evaluates
    marker = tmp_path / "ran"
    program = types.SimpleNamespace(
        graph_signature=types.SimpleNamespace(input_specs=[]), graph=types.SimpleNamespace(nodes=[]), range_constraints={},
        _guards_code=[_hostile_guards(marker)[kind]],
    )  # fmt: skip
    with pytest.raises(DomainError, match=r"^a guard (of a form this reader does not know|on .*)"):
        domain_of(program)
    assert not marker.exists() and not watched_eval


# Guards the strict reader admits (sizes, strides and numbers of inputs: Note [guard cost]) in a form the domain
# reader does not read: a piece by size cannot dispatch without its domains, so the load is refused.
_UNREAD_GUARDS = {
    "stride": ("L['tensors'][0].stride()[0] >= 1", "a guard on something other than a size"),
    "numel": ("L['tensors'][0].numel() >= 0", "a guard of a form this reader does not know (Call)"),
    "abs": ("abs(L['tensors'][0].size()[1]) >= 1", "a guard of a form this reader does not know (Call)"),
    "sqrt": ("math.sqrt(L['tensors'][0].size()[1]) >= 1", "a guard of a form this reader does not know (Call)"),
    "float": ("L['tensors'][0].size()[1] >= 0.5", "a guard of a form this reader does not know (Constant)"),
    "named_input": ("L['x'].size()[1] >= 1", "a guard on an input this reader cannot place"),
}


@pytest.mark.parametrize(("guard", "why"), _UNREAD_GUARDS.values(), ids=_UNREAD_GUARDS.keys())
def test_a_by_size_guard_the_domain_reader_cannot_read_is_refused_naming_the_piece(chunked: Path, tmp_path: Path, guard: str, why: str) -> None:
    assert _rules.guard_ok(guard)  # past the strict reader: the refusal is the domain reader's (DomainError)
    path = _rewrite(chunked, tmp_path / "unread.pt2", SIZED, lambda program: program["guards_code"].append(guard))
    error = _refused(path, "a program by size of chunks has a domain this library does not read: ")
    assert re.search(re.escape(why), error.reason) and repr(guard) in error.reason
