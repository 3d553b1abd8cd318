"""Fuzz harness: bytes -> text -> ``parse_schema``, differential against ``torch._C.parse_schema``.

Run: ``python fuzz/fuzz_schema.py [libFuzzer flags] [corpus dirs]``.

Properties, for ``text = data.decode("utf-8", "replace")``:

* ``parse_schema(text)`` returns a ``FunctionSchema`` or raises ``SchemaError`` (a ``ValueError`` with a
  position inside the text, line and column >= 1 and a caret line); nothing else escapes;
* the number of Python calls the parse makes is bounded by a linear function of the length;
* accepted text: ``parse_schema(str(s)) == s`` and ``str`` of that is ``str(s)`` again (canonical = fixed
  point), and ``extract_names_from_schema(text)`` gives the schema's argument names;
* differential (``_schema_rules.compare``): accept/reject agrees with torch; on accepted text the argument
  names and printed form agree with torch's, except the documented differences, checked by rule. The
  counters (inputs compared, agreements, hits per rule) are printed when the process exits.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _schema_rules  # noqa: E402
from _fuzzlib import CallCounter, Stats, decode_text, fail, over_budget, reporting, start  # noqa: E402

TARGET = "schema"
STATS = Stats(TARGET)

# Linear call budget of one parse: torch's 4,374 schemas need at most ~100 calls per character once warm.
CALLS_PER_CHAR = 60
CALLS_BASE = 20_000

_T: dict[str, object] = {}


def _targets() -> dict[str, object]:
    if not _T:
        import torch  # noqa: F401  (loaded before counting calls)

        from piece_by_piece_serialize import schema
        from piece_by_piece_serialize.errors import SchemaError

        schema.parse_schema("f(int x) -> ()")  # builds the parser outside the call budget
        _T.update(schema=schema, SchemaError=SchemaError)
    return _T


def check_error(data: object, text: str, err: BaseException) -> None:
    """A ``SchemaError`` is well formed: a ValueError positioned inside the text, with a caret line."""
    if not isinstance(err, ValueError):
        raise fail(data, f"{type(err).__name__} is not a ValueError")
    pos = getattr(err, "pos", None)
    if not isinstance(pos, int) or not 0 <= pos <= len(text):
        raise fail(data, f"error position {pos!r} outside the text (length {len(text)}): {err}")
    lineno, colno = getattr(err, "lineno", None), getattr(err, "colno", None)
    if not (isinstance(lineno, int) and lineno >= 1 and isinstance(colno, int) and colno >= 1):
        raise fail(data, f"bad line/column {lineno!r}/{colno!r}: {err}")
    if "^" not in str(err):
        raise fail(data, f"error message has no caret line: {err}")


def check_text(data: object, text: str, stats: Stats) -> object | None:
    """Every property of one schema text; returns our schema (or None if we reject it)."""
    t = _targets()
    schema, SchemaError = t["schema"], t["SchemaError"]
    counter = CallCounter()
    ours, our_error = None, None
    try:
        ours = counter.run(lambda: schema.parse_schema(text))  # type: ignore[attr-defined]
    except SchemaError as err:  # type: ignore[misc]
        our_error = err
        check_error(data, text, err)
    budget = CALLS_PER_CHAR * len(text) + CALLS_BASE
    if counter.calls > budget:
        calls = over_budget(lambda: schema.parse_schema(text), budget, SchemaError)  # type: ignore[attr-defined]
        if calls is not None:
            raise fail(data, f"parse_schema made {calls} calls for {len(text)} characters (budget {budget})")
        stats.add("call budget exceeded once only (lazy set-up on first use)")
    stats.add("parsed" if ours is not None else "rejected")
    if ours is not None:
        printed = str(ours)
        try:
            again = schema.parse_schema(printed)  # type: ignore[attr-defined]
        except SchemaError as err:  # type: ignore[misc]
            raise fail(data, f"our printed text does not parse back: {printed!r}\n  {err}") from err
        if again != ours:
            raise fail(data, f"printed text parses to a different schema:\n  {printed!r}\n  {ours!r}\n  {again!r}")
        if str(again) != printed:
            raise fail(data, f"printing is not a fixed point:\n  {printed!r}\n  {str(again)!r}")
        names = schema.extract_names_from_schema(text)  # type: ignore[attr-defined]
        if list(names) != list(ours.argument_names):  # type: ignore[attr-defined]
            raise fail(data, f"extract_names_from_schema {names!r} != argument names {ours.argument_names!r}")  # type: ignore[attr-defined]
    _schema_rules.compare(data, text, ours, our_error, stats)
    return ours


def check(data: bytes) -> None:
    """The properties for one input; raises Finding on failure."""
    with reporting(data):
        check_text(data, decode_text(data), STATS)


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()
    start(
        sys.argv,
        TestOneInput,
        ["piece_by_piece_serialize.schema", "piece_by_piece_serialize.schema._transform", "piece_by_piece_serialize.schema._ast"],
        warm_up=lambda: (_targets(), check(b"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")),
    )


if __name__ == "__main__":
    main()
