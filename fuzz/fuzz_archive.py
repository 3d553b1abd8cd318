"""Fuzz harness: the artifact loader, ``load_piece_by_piece``, on structurally mutated real archives.

Run: ``python fuzz/fuzz_archive.py [libFuzzer flags] [corpus dirs]``.

The base archive is real: a small model (two ``Linear`` layers behind operators, a ``ReLU`` between them) exported
by ``export_piece_by_piece`` and saved by ``PieceByPieceExport.save`` when the harness starts, so it has a top
program, two piece programs, weights and a manifest. An input is a list of choices (:class:`ByteReader`) that
apply one to four mutations to it:

* **JSON**: in the manifest, a program document or a payload config, one value (found by walking the document
  with the choices) is replaced by a number at an edge (0, -1, 2**31, 2**63, ...), a string from a list of hostile
  names (code, a keyword, a full-width letter, a dotted path, a namespace of torch), null, a list or an object;
  or a key is removed, or an unknown key added, or a list element duplicated; after a program document is
  changed, the manifest's digests of the programs are mostly made to agree (an attacker keeps the archive
  consistent), so that the checks behind the digest's are reached;
* **tensor metadata**: one payload's sizes, strides, offset or dtype set to an edge value;
* **zip layout**: a member duplicated, removed, renamed, compressed, truncated or extended.

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


def _targets() -> dict[str, Any]:
    if not _T:
        import torch

        from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
        batch = torch.export.Dim("batch", min=1, max=64)
        result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},), classes=torch.nn.Linear)
        folder = Path(tempfile.mkdtemp(prefix="pbp-fuzz-archive-"))
        base = folder / "base.pt2"
        result.save(base)
        result.close()
        with zipfile.ZipFile(base) as archive:
            members = [(info, archive.read(info)) for info in archive.infolist()]
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
        loaded = load_piece_by_piece(base)
        want = loaded(x)
        code = _codes(loaded)
        loaded.close()
        _T.update(torch=torch, Error=ArtifactError, load=load_piece_by_piece, members=members, folder=folder, x=x, want=want, code=code)
    return _T


def _codes(loaded: Any) -> tuple[str, ...]:
    """The generated code of the loaded program and of its operators' programs: what "the same program" means."""
    return (loaded.program.code, *sorted(op.runner.code for op in loaded._finalizer.peek()[2][0] if op.runner is not None))


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


def _mutate(r: ByteReader, members: list[tuple[zipfile.ZipInfo, bytes]], prefix: str) -> list[str]:
    done = []
    for _ in range(1 + r.below(4)):
        kind = r.below(3)
        names = [info.filename[len(prefix) :] for info, _ in members]
        if kind < 2:
            want = _JSON_MEMBERS[r.below(len(_JSON_MEMBERS))] if kind == 0 else "data/weights/model_weights_config.json"
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
        members = [(zipfile.ZipInfo(info.filename, info.date_time), body) for info, body in t["members"]]
        prefix = members[0][0].filename.split("/", 1)[0] + "/"
        r = ByteReader(data)
        done = _mutate(r, members, prefix)
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
                STATS.add("loaded, same program" if _codes(loaded) == t["code"] else "loaded, another program")
                try:
                    got = loaded(t["x"])
                except (RuntimeError, ValueError):
                    STATS.add("loaded, call refused")
                else:
                    STATS.add("loaded, same output" if torch.equal(got, t["want"]) else "loaded, other values")
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

    start(sys.argv, TestOneInput, ["piece_by_piece_serialize.artifact"], warm_up)


if __name__ == "__main__":
    main()
