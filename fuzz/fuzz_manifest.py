"""Fuzz harness: the artifact manifest reader, ``read_manifest``.

Run: ``python fuzz/fuzz_manifest.py [libFuzzer flags] [corpus dirs]``.

An input is one of two kinds, told apart by its first byte:

* **text** (any input not starting with ``0xff``): the bytes are a manifest file. ``read_manifest`` either
  raises ``ArtifactError`` (naming the source) or returns a manifest whose text is a fixed point:
  ``write(read(write(m))) == write(m)``. It never raises anything else, never recurses past its bounds, and does
  work linear in the input (a call budget).
* **structured** (``0xff`` + choices): the remaining bytes build a valid manifest (operators, call structures
  with constants of every scalar kind, float spellings, aliases, shape rules, module states), which must
  round-trip; then one JSON value of its text is replaced by another drawn from the bytes (a wrong type, a
  count off, an index out of range, a key renamed): the reader must refuse it with ``ArtifactError`` or read
  a manifest that round-trips, never crash or accept a value of the wrong type.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import ByteReader, Stats, fail, over_budget, reporting, start

TARGET = "manifest"
STATS = Stats(TARGET)
STRUCTURED_MARKER = 0xFF
CALLS_PER_BYTE = 200
CALLS_BASE = 50_000

_T: dict[str, Any] = {}


def _targets() -> dict[str, Any]:
    if not _T:
        from piece_by_piece_serialize.artifact import ArtifactError, _manifest

        _T.update(m=_manifest, Error=ArtifactError)
        _manifest.read_manifest(_manifest.write_manifest(sample(ByteReader(b""))).encode(), "warm")
    return _T


# --------------------------------------------------------------------------------------------------
# valid manifests from choices


_KINDS = ("Tensor", "None", "bool", "int", "float", "list__2", "DynamicCache_2D", "DynamicCache_On_2S5")
_FLOATS = (0.5, 1e-05, -0.0, float("inf"), float("-inf"), 3.0, 1e300)


def _scalar(r: ByteReader) -> Any:
    pick = r.below(6 + 1)
    return [None, True, r.below(1000 + 1) - 500, _FLOATS[r.below(len(_FLOATS) - 1 + 1)], "key" + str(r.below(9 + 1)), False, 7][pick]


def _call(r: ByteReader, m: Any) -> Any:
    n_pos, n_kw = r.below(3 + 1), r.below(2 + 1)
    kinds = tuple(_KINDS[r.below(len(_KINDS) - 1 + 1)] for _ in range(n_pos + n_kw))
    keywords = tuple(f"kw{i}" for i in range(n_kw))
    n_flat = r.below(6 + 1) + len(kinds)
    constants = tuple(sorted({r.below(n_flat): _scalar(r) for _ in range(r.below(3 + 1) if n_flat else 0)}.items()))
    caches = (0,) if kinds and r.below(1 + 1) else ()
    out_n_flat = r.below(5 + 1) + 1
    out_constants = tuple(sorted({r.below(out_n_flat - 1 + 1): _scalar(r) for _ in range(r.below(2 + 1))}.items()))
    n_out = out_n_flat - len(out_constants)
    aliases = ((None, 0),) if caches and r.below(1 + 1) else ((("cache",), 0),) if caches else ()
    rules = None
    if r.below(1 + 1) and n_out:
        pool = (("dim", ((0, 0), (1, 2))), ("const", (4,)), ("sum", (((0, 1), (1, 1)),)), ("plus", (((0, 0), -2),)), ("min", (((0, 1), (1, 1), 15), ((0, 0), None, 4))), ("none", ()))
        # the inputs a rule names are the call's: tensors 0 and 1 only when it has them (the reader refuses others)
        n_in = n_flat - len(constants)
        pool = tuple(rule for rule, highest in zip(pool, (1, -1, 1, 0, 1, -1), strict=True) if highest < n_in)
        rules = tuple(tuple(pool[r.below(len(pool) - 1 + 1)] for _ in range(r.below(3 + 1))) for _ in range(n_out))
    return m.CallRecord(
        m.call_key(kinds, keywords, constants), kinds, n_pos, keywords, constants, n_flat, caches,
        ("Tensor",) * (1 + len(caches)), out_constants, out_n_flat, aliases, ("float32",) * n_out, ("cpu",) * n_out, rules,
    )  # fmt: skip


def _state(r: ByteReader, m: Any, depth: int = 0) -> Any:
    children = tuple((f"c{i}", _state(r, m, depth + 1)) for i in range(r.below(2 + 1) if depth < 2 else 0))
    attributes = tuple((f"a{i}", (_scalar(r), [_scalar(r)], {"k": _scalar(r)})[r.below(2 + 1)]) for i in range(r.below(3 + 1)))
    unstorable = (("fn", "builtins.function"),) if r.below(1 + 1) else ()
    return m.ModuleState("pkg.Mod", attributes, ("weight",) if r.below(1 + 1) else (), (), (), ("bias",) if r.below(2) else (), children, unstorable)


def sample(r: ByteReader) -> Any:
    """A valid manifest built from the choices in ``r`` (fuzz/make_corpus.py writes some as seeds)."""
    m = _T["m"] if _T else __import__("piece_by_piece_serialize.artifact._manifest", fromlist=["x"])
    operators = []
    for i in range(r.below(3 + 1)):
        calls = tuple({c.key: c for c in (_call(r, m) for _ in range(r.below(2 + 1) + 1))}.values())
        program = f"piece_{i}" if r.below(1 + 1) else None
        operators.append(
            m.OperatorRecord(f"op{i}", f"layers.{i}", "pkg.Layer", ("w",) * r.below(3 + 1), program,
                             calls[0].key if program else None, calls, None if program else _state(r, m),
                             f"{i:x}" * 64 if program else None)
        )  # fmt: skip
    return m.Manifest("pbp_0a1b2c", "pkg.Model", "model", _call(r, m), tuple(operators), "2.13.0", "f" * 64)


# --------------------------------------------------------------------------------------------------
# the properties


def _read(data: bytes) -> Any:
    t = _targets()
    try:
        manifest = t["m"].read_manifest(data, "fuzz.pt2")
    except t["Error"] as exc:
        if exc.path != "fuzz.pt2" or not exc.reason:
            raise fail(data, f"an ArtifactError without the source or a reason: {exc!r}") from None
        STATS.add("refused")
        manifest = None
    calls = over_budget(lambda: t["m"].read_manifest(data, "fuzz.pt2"), CALLS_BASE + CALLS_PER_BYTE * len(data), t["Error"])
    if calls is not None:
        raise fail(data, f"read_manifest made {calls} calls for {len(data)} bytes")
    return manifest


def _round_trip(data: bytes, manifest: Any) -> None:
    """The manifest's text is a fixed point: read back, it writes the same text (texts, not objects, are compared:
    a NaN constant is not equal to itself)."""
    text = _T["m"].write_manifest(manifest)
    if _T["m"].write_manifest(_T["m"].read_manifest(text.encode(), "fuzz.pt2")) != text:
        raise fail(data, "a manifest read back from its own text writes another text")
    STATS.add("round-tripped")


def _mutate(parsed: Any, r: ByteReader) -> None:
    """Replace one value somewhere in ``parsed`` by one drawn from ``r``."""
    containers: list[tuple[Any, Any]] = []
    stack = [parsed]
    while stack:
        item = stack.pop()
        keys = list(item) if isinstance(item, dict) else range(len(item)) if isinstance(item, list) else []
        for k in keys:
            containers.append((item, k))
            stack.append(item[k])
    if not containers:
        return
    owner, key = containers[r.below(len(containers) - 1 + 1)]
    owner[key] = [None, -1, 2**40, "x", [], {}, {"float": "nan"}, {"tuple": [1]}, 1.5, True, "Tensor", [[0, 0]]][r.below(11 + 1)]


def check(data: bytes) -> None:
    with reporting(data):
        if not data or data[0] != STRUCTURED_MARKER:
            manifest = _read(data)
            if manifest is not None:
                _round_trip(data, manifest)
            return
        _targets()
        r = ByteReader(data[1:])
        manifest = sample(r)
        text = _T["m"].write_manifest(manifest)
        _round_trip(data, manifest)
        parsed = json.loads(text)
        _mutate(parsed, r)
        mutated = json.dumps(parsed).encode()
        read = _read(mutated)
        if read is not None:
            _round_trip(mutated, read)


def TestOneInput(data: bytes) -> None:
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()

    def warm_up() -> None:
        check(b"{}")
        check(bytes([STRUCTURED_MARKER]) + b"\x03\x01\x02\x00\x03\x02\x04")

    start(sys.argv, TestOneInput, ["piece_by_piece_serialize.artifact._manifest"], warm_up)


if __name__ == "__main__":
    main()
