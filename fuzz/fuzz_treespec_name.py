"""Fuzz harness: bytes -> text -> ``tree_spec_from_name``: safe, canonical, proportional decoding.

Run: ``python fuzz/fuzz_treespec_name.py [libFuzzer flags] [corpus dirs]``.

Properties, for ``name = data.decode("utf-8", "replace")``:

* ``tree_spec_from_name(name)`` returns ``(n, spec)`` or raises ``TreeSpecNameError`` (a ``ValueError``
  positioned inside the text, with a caret line); nothing else escapes;
* an accepted name is canonical: ``tree_spec_as_name(spec, n) == name``, ``spec.num_leaves == n``, and
  ``pretty_name(name)`` shows it; a name ``pretty_name`` refuses is refused by the decoder too;
* time and memory stay proportional to the input and to the documented limits (``NameLimits``): the
  number of Python calls is bounded by a linear function of the length and of the decoded node count,
  and the peak traced allocation by a linear function of the same (no clock, no quadratic blow-up, no
  huge allocation from a count such as ``X999999999``).
"""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzlib import CallCounter, Stats, decode_text, fail, over_budget, reporting, start  # noqa: E402

TARGET = "treespec_name"
STATS = Stats(TARGET)

# Budgets: per character of the name, per node of the decoded spec (a run "X<k>" is k leaves for a
# few characters, which the limits bound), plus a constant.
CALLS_PER_CHAR = 80
CALLS_PER_NODE = 40
CALLS_BASE = 20_000
BYTES_PER_CHAR = 4_096
BYTES_PER_NODE = 1_024
BYTES_BASE = 4 * 1024 * 1024

_T: dict[str, object] = {}


def _targets() -> dict[str, object]:
    if not _T:
        import torch.utils._pytree  # noqa: F401  (loaded before anything is counted)

        from piece_by_piece_serialize import treespec_name
        from piece_by_piece_serialize.errors import TreeSpecNameError

        import fuzz_pytree_roundtrip  # its classes and registered nodes appear in the seed names

        fuzz_pytree_roundtrip._targets()

        treespec_name.tree_spec_from_name("___v1_T_X2_E")  # builds the parser outside the budgets
        _T.update(tn=treespec_name, Error=TreeSpecNameError)
    return _T


def _check_error(data: bytes, text: str, err: BaseException) -> None:
    pos, lineno, colno = getattr(err, "pos", None), getattr(err, "lineno", None), getattr(err, "colno", None)
    if not isinstance(err, ValueError):
        raise fail(data, f"{type(err).__name__} is not a ValueError")
    if not isinstance(pos, int) or not 0 <= pos <= len(getattr(err, "text", text)):
        raise fail(data, f"error position {pos!r} outside the text: {err}")
    if not (isinstance(lineno, int) and lineno >= 1 and isinstance(colno, int) and colno >= 1):
        raise fail(data, f"bad line/column {lineno!r}/{colno!r}: {err}")
    if "^" not in str(err):
        raise fail(data, f"error message has no caret line: {err}")


def check(data: bytes) -> None:
    """The properties for one input; raises Finding on failure."""
    with reporting(data):
        t = _targets()
        tn, Error = t["tn"], t["Error"]
        text = decode_text(data)
        counter = CallCounter()
        result, error = None, None
        tn.clear_name_cache()  # type: ignore[attr-defined]  (measure a real decode, not a cache hit)
        tracemalloc.start()
        try:
            result = counter.run(lambda: tn.tree_spec_from_name(text))  # type: ignore[attr-defined]
        except Error as err:  # type: ignore[misc]
            error = err
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        nodes = result[1].num_nodes if result is not None else 0  # type: ignore[index]
        calls_budget = CALLS_PER_CHAR * len(text) + CALLS_PER_NODE * nodes + CALLS_BASE
        if counter.calls > calls_budget:
            tn.clear_name_cache()  # type: ignore[attr-defined]
            calls = over_budget(lambda: tn.tree_spec_from_name(text), calls_budget, Error)  # type: ignore[attr-defined]
            if calls is not None:
                raise fail(data, f"decoding made {calls} calls for {len(text)} characters, {nodes} nodes")
            STATS.add("call budget exceeded once only (lazy set-up on first use)")
        bytes_budget = BYTES_PER_CHAR * len(text) + BYTES_PER_NODE * nodes + BYTES_BASE
        if peak > bytes_budget:
            raise fail(data, f"decoding allocated {peak} bytes at peak for {len(text)} characters, {nodes} nodes")
        try:
            pretty = tn.pretty_name(text)  # type: ignore[attr-defined]
        except Error as err:  # type: ignore[misc]
            _check_error(data, text, err)
            if result is not None:
                raise fail(data, f"pretty_name refuses a name the decoder accepts: {err}") from err
            pretty = None
        if error is not None:
            _check_error(data, text, error)
            STATS.add("rejected")
            return
        n, spec = result  # type: ignore[misc]
        STATS.add("accepted")
        if spec.num_leaves != n:
            raise fail(data, f"decoded leaf count {n} != spec.num_leaves {spec.num_leaves}")
        again = tn.tree_spec_as_name(spec, n)  # type: ignore[attr-defined]
        if again != text:
            raise fail(data, f"accepted a non-canonical name; the canonical spelling is {again!r}")
        if not isinstance(pretty, str) or not pretty:
            raise fail(data, f"pretty_name returned {pretty!r}")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (libFuzzer's name)
    check(data)
    STATS.input_done()


def main() -> None:
    STATS.print_at_exit()
    start(
        sys.argv,
        TestOneInput,
        [
            "piece_by_piece_serialize.treespec_name",
            "piece_by_piece_serialize.treespec_name._transform",
            "piece_by_piece_serialize.treespec_name._ast",
            "piece_by_piece_serialize.treespec_name._resolve",
        ],
        warm_up=lambda: (_targets(), check(b"___v1_T_X_D_a_X2_E_E")),
    )


if __name__ == "__main__":
    main()
