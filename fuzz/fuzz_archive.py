"""Fuzz harness: the artifact loader, ``load_piece_by_piece``, on structurally mutated real archives.

Run: ``python fuzz/fuzz_archive.py [libFuzzer flags] [corpus dirs]``.

The base archive is real: a small model (two ``Linear`` layers behind operators, a ``ReLU`` between them) exported
by ``export_piece_by_piece`` and saved by ``PieceByPieceExport.save`` when the harness starts, so it has a top
program, two piece programs, weights and a manifest. An input starting with ``BY_SIZE_MARKER`` mutates another
real archive instead, made on the first such input (its export takes seconds): ``Chunked`` of tests/_toy_models.py,
whose ``PadToFour`` is a piece by size (Note [programs by size]): no program of its own, five programs by size in
the manifest's ``by_size``, each read for its domain at load. An input is a list of choices (:class:`ByteReader`)
that apply one to four mutations to it:

* **JSON**: in the manifest, a program document or a payload config, one value (found by walking the document
  with the choices) is replaced by a number at an edge (0, -1, 2**31, 2**63, ...), a string from a list of hostile
  names (code, a keyword, a full-width letter, a dotted path, a namespace of torch), null, a list or an object;
  or a key is removed, or an unknown key added, or a list element duplicated; after a program document is
  changed, the manifest's digests of the programs are mostly made to agree (an attacker keeps the archive
  consistent), so that the checks behind the digest's are reached;
* **tensor metadata**: one payload's sizes, strides, offset or dtype set to an edge value;
* **zip layout**: a member duplicated, removed, renamed, compressed, truncated or extended;
* **by size** (the archive of a piece by size only): an entry of ``by_size`` removed, duplicated, swapped with
  another, renamed (to the top program, a missing member, a path), given another digest, or the list emptied,
  made an object, grown past 64, or given beside a program of the operator's own; or a guard of a program by
  size replaced or added: code, a form the domain reader does not read (a stride, ``abs``, a float), one that
  never or always holds.

The loader's contract, checked on every input: it raises ``ArtifactError`` (or ``OSError``), or it returns a
module whose program is the original's, or one with only values changed that the allowlist admits (a weight
or an operator argument changed: no signature protects an archive); a loaded module's call may raise
``RuntimeError``/``ValueError`` but never crashes. Never: another exception (a finding, with the input's
repr), code run (every hostile string would create a marker file, checked after each input), operators left
registered by a refused load, a crash, a hang or memory out of bounds (libFuzzer's ``-timeout`` and
``-rss_limit_mb``).
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import ByteReader, Stats, fail, reporting, start

TARGET = "archive"
STATS = Stats(TARGET)

_T: dict[str, Any] = {}
_MARKER = Path(tempfile.gettempdir()) / f"pbp-fuzz-archive-ran-{os.getpid()}"
_CODE = f"__import__('pathlib').Path({str(_MARKER)!r}).touch()"
_STRINGS = (
    f"x=({_CODE})", f"a': ({_CODE}), 'b", _CODE, "if", "\uff4eorm", "layers.0.weight", "tensors_0", "quantized_decomposed",
    "torch.ops.aten.from_file.default", "torch.ops.aten._reshape_alias.default", "torch.ops.aten.add.Tensor", "builtins.exec",
    "s0", "s0 + 1", "", "x" * 300, "weight_0", "\n", "a\rb",
)  # fmt: skip
_NUMBERS = (0, 1, -1, 2, 7, 31, 2**31, 2**47, 2**62, 2**63, -(2**63), 10**30)
_JSON_MEMBERS = ("extra/pbp_manifest.json", "models/model.json", "models/piece_0.json", "models/piece_1.json", "data/weights/model_weights_config.json")
BY_SIZE_MARKER = 0xB5  # the first byte of an input that mutates the archive of a piece by size
_SIZED = tuple(f"models/piece_{i}.json" for i in range(5))  # Chunked's programs by size
_BY_SIZE_JSON_MEMBERS = ("extra/pbp_manifest.json", "models/model.json", *_SIZED, "data/weights/model_weights_config.json")
_GUARDS = (
    f"L['tensors'][0].size()[1] >= 1 or {_CODE}", f"(lambda: {_CODE})() is None", "L['tensors'][0].stride()[0] >= 1",
    "abs(L['tensors'][0].size()[1]) >= 1", "L['tensors'][0].size()[1] >= 0.5", "L['tensors'][0].numel() >= 0",
    "L['x'].size()[1] >= 1", "L['tensors'][0].size()[1] < 0", "L['tensors'][0].size()[1] >= 1",
    "L['tensors'][0].size()[1] ** 100000000 > 0", "L['tensors'][5].size()[9] == 1", "",
)  # fmt: skip


def _targets() -> dict[str, Any]:
    if not _T:
        import torch

        from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
        batch = torch.export.Dim("batch", min=1, max=64)
        result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},), classes=torch.nn.Linear)
        folder = Path(tempfile.mkdtemp(prefix="pbp-fuzz-archive-"))
        _T.update(torch=torch, Error=ArtifactError, load=load_piece_by_piece, folder=folder)
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
        _T["base"] = _base(_T, "base", result, x, _JSON_MEMBERS)
    return _T


def _by_size_base() -> dict[str, Any]:
    """The archive of a piece by size, made once, on the first input that asks for it (under libFuzzer, the
    warm-up's): its five programs by size take seconds to export, which the other archive's inputs never wait for."""
    t = _targets()
    if "by_size" not in t:
        torch = t["torch"]
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        import _toy_models as toy
        from piece_by_piece_serialize import export_piece_by_piece

        torch.manual_seed(0)
        named = {"x": {0: torch.export.Dim("batch", max=16), 1: torch.export.Dim("seq", max=32)}}
        result = export_piece_by_piece(toy.Chunked().eval(), (torch.randn(2, 3, 8),), dynamic_shapes=named)
        x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(1))  # 6 tokens: a program by size pads them
        t["by_size"] = _base(t, "by_size", result, x, _BY_SIZE_JSON_MEMBERS)
    return t["by_size"]


def _base(t: dict[str, Any], name: str, result: Any, x: Any, json_members: tuple[str, ...]) -> dict[str, Any]:
    """A base archive: ``result`` saved, its members, and what its untouched load computes on ``x``."""
    path = t["folder"] / f"{name}.pt2"
    result.save(path)
    result.close()
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    loaded = t["load"](path)
    want = loaded(x)
    code = _codes(loaded)
    loaded.close()
    return {"members": members, "x": x, "want": want, "code": code, "json": json_members}


def _codes(loaded: Any) -> tuple[str, ...]:
    """The generated code of the loaded program and of its operators' programs (their own, and their programs by
    size in order: the first whose domain holds runs): what "the same program" means."""
    operators = loaded._finalizer.peek()[2][0]
    own = sorted(_code(op.runner) for op in operators if op.runner is not None)
    return (loaded.program.code, *own, *(_code(runner) for op in operators for _, runner in op.by_size))


def _code(runner: Any) -> str:
    """The code a runner runs: a program's module, or its flat graph's bound ``forward`` (Note [flat graphs] in
    artifact/_runnable.py)."""
    return str(getattr(runner, "__self__", runner).code)


# --------------------------------------------------------------------------------------------------
# mutations


def _pick_value(r: ByteReader, doc: Any) -> tuple[Any, Any] | None:
    """A (container, key) inside ``doc``, found by walking it with the choices; None for an empty document."""
    owner, key = None, None
    node = doc
    for _ in range(24):
        if isinstance(node, dict) and node:
            keys = list(node)
            owner, key = node, keys[r.below(len(keys))]
        elif isinstance(node, list) and node:
            owner, key = node, r.below(len(node))
        else:
            break
        node = owner[key]
        if r.below(4) == 0:
            break
    return None if owner is None else (owner, key)


def _value(r: ByteReader) -> Any:
    kind = r.below(7)
    if kind == 0:
        return _NUMBERS[r.below(len(_NUMBERS))]
    if kind == 1:
        return r.signed()
    if kind in (2, 3):
        return _STRINGS[r.below(len(_STRINGS))]
    if kind == 4:
        return None
    if kind == 5:
        return [_NUMBERS[r.below(len(_NUMBERS))]]
    return {"as_int": _NUMBERS[r.below(len(_NUMBERS))]}


def _mutate_json(r: ByteReader, doc: Any) -> str:
    found = _pick_value(r, doc)
    if found is None:
        return "json: empty"
    owner, key = found
    op = r.below(6)
    if op <= 2:
        owner[key] = _value(r)
        return "json: value replaced"
    if op == 3 and isinstance(owner, dict):
        del owner[key]
        return "json: key removed"
    if op == 4 and isinstance(owner, dict):
        owner[_STRINGS[r.below(len(_STRINGS))]] = _value(r)
        return "json: key added"
    if isinstance(owner, list):
        owner.insert(key, owner[key])
        return "json: element duplicated"
    owner[key] = _STRINGS[r.below(len(_STRINGS))]
    return "json: name replaced"


def _mutate_meta(r: ByteReader, doc: Any) -> str:
    config = doc.get("config") if isinstance(doc, dict) else None
    entries = [e for e in config.values() if isinstance(e, dict)] if isinstance(config, dict) else []
    if not entries:
        return "meta: none"
    meta = entries[r.below(len(entries))].get("tensor_meta")
    if not isinstance(meta, dict):
        return "meta: none"
    field = ("sizes", "strides", "storage_offset", "dtype")[r.below(4)]
    if field == "dtype":
        meta["dtype"] = r.below(40)
    elif field == "storage_offset":
        meta["storage_offset"] = {"as_int": _NUMBERS[r.below(len(_NUMBERS))]}
    elif isinstance(meta.get(field), list) and meta[field]:
        meta[field][r.below(len(meta[field]))] = {"as_int": _NUMBERS[r.below(len(_NUMBERS))]}
        if r.flag():
            meta[field].append({"as_int": _NUMBERS[r.below(len(_NUMBERS))]})
    return f"meta: {field}"


def _mutate_by_size(r: ByteReader, manifest: Any) -> str:
    """One change of the first operator's ``by_size`` (the archive of a piece by size)."""
    operators = manifest.get("operators") if isinstance(manifest, dict) else None
    sized = [o for o in operators if isinstance(o, dict) and isinstance(o.get("by_size"), list)] if isinstance(operators, list) else []
    op = next((o for o in sized if o["by_size"]), None)
    if op is None:
        return "by size: none"
    entries = op["by_size"]
    i, j = r.below(len(entries)), r.below(len(entries))
    entry = entries[i] if isinstance(entries[i], dict) else {}
    what = r.below(8)
    if what == 0:
        del entries[i]
    elif what == 1:
        entries.insert(j, entries[i])
    elif what == 2:
        entries[i], entries[j] = entries[j], entries[i]
    elif what == 3:
        entry["program"] = ("model", "piece_9", "piece_0", "piece_3", "../model", "state", _CODE)[r.below(7)]
    elif what == 4:
        other = entries[j] if isinstance(entries[j], dict) else {}
        entry["program_digest"] = ("0" * 64, other.get("program_digest"), "", None)[r.below(4)]
    elif what == 5:
        op.update(program=entry.get("program"), program_digest=entry.get("program_digest"))
    elif what == 6:
        op["by_size"] = [dict(entry, program=f"piece_{n}") for n in range(65)] if r.flag() else [*entries] * 17
    else:
        op["by_size"] = [] if r.flag() else entry
    return f"by size: {('removed', 'duplicated', 'swapped', 'renamed', 'digest', 'also own', 'over 64', 'emptied or not a list')[what]}"


def _mutate_guards(r: ByteReader, program: Any) -> str:
    """A guard of a program by size replaced or added (the archive of a piece by size)."""
    guards = program.get("guards_code") if isinstance(program, dict) else None
    if not isinstance(guards, list):
        return "by size: no guards"
    guard = _GUARDS[r.below(len(_GUARDS))]
    if guards and r.flag():
        guards[r.below(len(guards))] = guard
        return "by size: guard replaced"
    guards.append(guard)
    return "by size: guard added"


def _mutate(r: ByteReader, members: list[tuple[zipfile.ZipInfo, bytes]], prefix: str, json_members: tuple[str, ...], by_size: bool) -> list[str]:
    done = []
    for _ in range(1 + r.below(4)):
        kind = r.below(4 if by_size else 3)  # the archive of a piece by size has mutations of its own (kind 3)
        names = [info.filename[len(prefix) :] for info, _ in members]
        if kind == 3:
            guards = r.flag()
            want = _SIZED[r.below(len(_SIZED))] if guards else "extra/pbp_manifest.json"
            if want not in names:
                continue
            i = names.index(want)
            try:
                doc = json.loads(members[i][1])
            except ValueError:  # an earlier mutation cut it: no longer JSON to walk
                continue
            done.append(_mutate_guards(r, doc) if guards else _mutate_by_size(r, doc))
            members[i] = (members[i][0], json.dumps(doc).encode())
            if guards and not r.flag():  # mostly as an attacker would: the digests made to agree
                _redigest(members, prefix)
            continue
        if kind < 2:
            want = json_members[r.below(len(json_members))] if kind == 0 else "data/weights/model_weights_config.json"
            if want not in names:
                continue
            i = names.index(want)
            info, data = members[i]
            try:
                doc = json.loads(data)
            except ValueError:  # an earlier mutation cut it: no longer JSON to walk
                continue
            done.append(_mutate_json(r, doc) if kind == 0 else _mutate_meta(r, doc))
            members[i] = (info, json.dumps(doc).encode())
            if want.startswith("models/") and not r.flag():  # mostly as an attacker would: the digests made to agree
                _redigest(members, prefix)
            continue
        i = r.below(len(members))
        info, data = members[i]
        op = r.below(6)
        if op == 0:
            members.append((info, data))
        elif op == 1:
            del members[i]
        elif op == 2:
            copy = zipfile.ZipInfo(prefix + names[r.below(len(names))], info.date_time)
            members[i] = (copy, data)
        elif op == 3:
            info.compress_type = zipfile.ZIP_DEFLATED
        elif op == 4:
            members[i] = (info, data[: r.below(len(data) + 1)])
        else:
            members[i] = (info, data + bytes(r.below(1 << 16)))
        done.append(f"zip: {('duplicated', 'removed', 'renamed', 'compressed', 'truncated', 'extended')[op]}")
    return done


def _redigest(members: list[tuple[zipfile.ZipInfo, bytes]], prefix: str) -> None:
    """The manifest's program digests (Note [program digests]) set to those of the documents as they now are."""
    import hashlib

    names = [info.filename[len(prefix) :] for info, _ in members]
    if "extra/pbp_manifest.json" not in names:
        return
    i = names.index("extra/pbp_manifest.json")
    try:
        manifest = json.loads(members[i][1])
        entries = [manifest, *manifest["operators"]]
        entries += [e for op in manifest["operators"] if isinstance(op, dict) and isinstance(op.get("by_size"), list) for e in op["by_size"]]
    except (ValueError, KeyError, TypeError):
        return
    for entry in entries:
        member = f"models/{entry.get('program')}.json" if isinstance(entry, dict) else None
        if member in names and isinstance(entry.get("program_digest"), str):
            entry["program_digest"] = hashlib.sha256(members[names.index(member)][1]).hexdigest()
    members[i] = (members[i][0], json.dumps(manifest).encode())


def _archive(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info, data in members:
            z.writestr(zipfile.ZipInfo(info.filename, info.date_time) if info.compress_type == zipfile.ZIP_STORED else info, data)
    return out.getvalue()


# --------------------------------------------------------------------------------------------------
# the property


def check(data: bytes) -> None:
    import warnings

    with reporting(data):
        t = _targets()
        torch = t["torch"]
        by_size = data[:1] == bytes([BY_SIZE_MARKER])
        base = _by_size_base() if by_size else t["base"]
        STATS.add("base: a piece by size" if by_size else "base: two pieces")
        members = [(zipfile.ZipInfo(info.filename, info.date_time), body) for info, body in base["members"]]
        prefix = members[0][0].filename.split("/", 1)[0] + "/"
        r = ByteReader(data[1:] if by_size else data)
        done = _mutate(r, members, prefix, base["json"], by_size)
        for what in done:
            STATS.add(what)
        path = t["folder"] / "mutated.pt2"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate names the mutations make on purpose
            path.write_bytes(_archive(members))
        before = _loaded_operators(torch)
        try:
            loaded = t["load"](path)
        except (t["Error"], OSError) as exc:
            STATS.add("refused")
            if isinstance(exc, t["Error"]) and exc.path != str(path):
                raise fail(data, f"the error names {exc.path!r}, not the file") from None
            if _loaded_operators(torch) - before:  # only what this load added: an earlier export may be collected meanwhile
                raise fail(data, "a refused load left operators registered") from None
        else:
            try:
                STATS.add("loaded, same program" if _codes(loaded) == base["code"] else "loaded, another program")
                try:
                    got = loaded(base["x"])
                except (RuntimeError, ValueError):
                    STATS.add("loaded, call refused")
                else:
                    STATS.add("loaded, same output" if torch.equal(got, base["want"]) else "loaded, other values")
            finally:
                loaded.close()
        if _MARKER.exists():
            _MARKER.unlink()
            raise fail(data, f"code from the archive ran (mutations: {done})")


def _loaded_operators(torch: Any) -> set[str]:
    """The operators of the namespaces a load registers (``pbp_`` and the archive's digest): torch registers others
    of its own lazily, the first time a path needs them, which a load may be (seen after the whole test suite)."""
    return {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("pbp_")}


def TestOneInput(data: bytes) -> None:
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()

    def warm_up() -> None:
        check(b"")
        check(b"\x00\x01\x02\x03")
        check(bytes([BY_SIZE_MARKER]))  # the archive of a piece by size, made here: not in an input's time limit

    start(sys.argv, TestOneInput, ["piece_by_piece_serialize.artifact"], warm_up)


if __name__ == "__main__":
    main()
