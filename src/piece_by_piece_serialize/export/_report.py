"""The report of a piece-by-piece export: a line per submodule on the path to each cut, and the attempts.

Note [report lines]
~~~~~~~~~~~~~~~~~~~
The tree shows the model, every submodule on the path from it to a piece behind an operator ("children behind
operators"), those pieces ("behind an operator", with why), and the other called children of the modules on
the path ("in the graph"), in the order of their first call. Consecutive siblings whose lines and subtrees
are the same (a class, a status, a reason) are folded into one line with a count, ``layers.0-2 (x3)``, so a
32-layer model reads in a screen; their times add up and their differences give the largest. Columns: the
name relative to the parent, the class, the status, the largest absolute difference against eager on the
piece's recorded inputs, the time, and for a cut the kind of failure with the first line of torch's message.

Note [the Markdown report]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``to_markdown`` writes what torch.onnx's own report (``report=True``) gives for one export, for each piece: a
summary table, the attempts with the failure each met and what it put behind operators next, the examples, the
tree of Note [report lines] as a table (no-break spaces indent it, as Markdown drops leading spaces), then a
section per piece behind an operator, consecutive identical siblings in one: its class and operator, why it was
cut (the kind, the guard and where it is false, the file and line of the model's code torch failed in, torch's
suggested fix, torch's whole message), the check against its module, and
which program it runs (exported alone, or the one exported from an identical piece, Note [shared programs]).
Table cells are one line with their pipes escaped; torch's messages go in fenced blocks.

Imports: :mod:`._blame` (the failure record); torch only through the objects it is given.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._blame import Failure
from ._verdict import OutputCheck


class PieceStatus(str, enum.Enum):
    """Where a submodule of an exported model ended up."""

    IN_GRAPH = "in the graph"
    BEHIND_OPERATOR = "behind an operator"
    CHILDREN_BEHIND_OPERATORS = "children behind operators"


@dataclass(frozen=True)
class Piece:
    """One submodule of the report (Note [report lines]).

    ``path`` is the dotted path relative to the model; ``module_class`` its class; ``status`` a
    :class:`PieceStatus`; ``operator`` the qualified name of its operator when it is behind one; ``program`` its
    own exported program when it has one (each piece is also exported alone, from its recorded calls, or takes
    the program of an identical piece); ``failure`` why it was cut (the export attempt that failed in it);
    ``own_export_failure`` why it has no program of its own (its export alone failed, or its program refuses
    another of its recorded calls); ``seconds`` the time spent on it (its share of the failed attempt that cut
    it, plus its own export); ``max_abs_diff`` the largest absolute
    difference between its output through the operator (or its own program) and eager on its recorded inputs,
    over ``checked_calls`` calls; ``weights`` the names of its parameters and buffers in the order its operator
    takes them (what a translation of it receives, docs/onnx.md).
    """

    path: str
    module_class: type
    status: PieceStatus
    operator: str | None = None
    program: Any = None
    failure: Failure | None = None
    own_export_failure: Failure | None = None
    seconds: float | None = None
    max_abs_diff: float | None = None
    checked_calls: int = 0
    onnx_max_abs_diff: float | None = None  # its ONNX function in onnxruntime against eager, once to_onnx ran
    outputs: tuple[OutputCheck, ...] = ()  # each output tensor against eager (Note [the verdict])
    passed: bool | None = None  # every output within its tolerance; None: nothing compared
    # why the checks ran and this piece's did not ("no call of it was recorded"): never a difference of 0 on nothing
    not_checked: str | None = None
    # for a piece without a program of its own for a guard on its sizes: its programs by size, or why it has none
    # (Note [programs by size] in ._by_size), which ONNX and the archive carry
    by_size: str | None = None
    # the names of its parameters and buffers in the order its operator takes them: module by module, each one's
    # parameters then its buffers, a tied tensor once (the ``weights`` of a translation, docs/onnx.md)
    weights: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """``"pass"``, ``"FAIL"``, or ``""`` when nothing was compared."""
        return "" if self.passed is None else ("pass" if self.passed else "FAIL")

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "class": f"{self.module_class.__module__}.{self.module_class.__qualname__}",
            "status": self.status.value,
            "operator": self.operator,
            "has_program": self.program is not None,
            "failure": _failure(self.failure),
            "own_export_failure": _failure(self.own_export_failure),
            "seconds": _rounded(self.seconds),
            "max_abs_diff": _finite(self.max_abs_diff),
            "checked_calls": self.checked_calls,
            "not_checked": self.not_checked,
            "by_size": self.by_size,
            "weights": list(self.weights),
            "onnx_max_abs_diff": _finite(self.onnx_max_abs_diff),
            "passed": self.passed,
            "outputs": [o.to_dict() for o in self.outputs],
        }


@dataclass(frozen=True)
class Attempt:
    """One try of ``torch.export`` on the whole model with the pieces cut so far."""

    number: int
    seconds: float
    failure: Failure | None  # None: it exported
    cut: tuple[str, ...] = ()  # the modules it put behind operators next

    def line(self) -> str:
        if self.failure is None:
            return f"attempt {self.number}: exported in {self.seconds:.1f} s"
        what = f"{self.failure.kind} ({_clip(self.failure.message, 110)})"
        after = f"; now behind operators: {', '.join(self.cut)}" if self.cut else ""
        return f"attempt {self.number}: failed in {self.seconds:.1f} s, {what}{after}"


@dataclass
class ExportReport:
    """What :func:`export_piece_by_piece` did: ``str()`` prints it as a tree (Note [report lines]),
    :meth:`to_dict` gives the same as JSON-ready data."""

    model_class: type
    mode: str  # "automatic" or "classes"
    root: Piece
    pieces: dict[str, Piece]
    children: dict[str, list[str]]  # path -> the paths of its children shown, in call order
    attempts: list[Attempt] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # one line per example used
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    onnx: Any = None  # what to_onnx wrote (an OnnxExport), once it ran
    # why no value was compared with eager (a model without values, Note [exports without values]): the checks
    # then compare shapes and dtypes only, and every line says "not run"
    values_not_compared: str | None = None
    refused: list[str] = field(default_factory=list)  # sizes of the declared ranges the program refuses and eager takes

    def attach_onnx(self, written: Any) -> None:
        """Add what ``to_onnx`` measured: each piece's and the model's onnxruntime difference against eager."""
        self.onnx = written
        for path, diff in written.piece_diffs.items():
            self.pieces[path] = dataclasses.replace(self.pieces[path], onnx_max_abs_diff=diff)
        self.root = dataclasses.replace(self.root, onnx_max_abs_diff=written.model_diff)
        if written.not_checked is not None:  # its column says "not run"; the note says why
            self.notes.append(f"onnxruntime's checks of {os.path.basename(written.path)} not run: {written.not_checked}")
        if written.differs:  # Note [onnxruntime's verdict] in ..onnx_export
            self.notes.append(f"onnxruntime's results of {os.path.basename(written.path)} outside the tolerances against eager: {'; '.join(written.differs)}")

    @property
    def passed(self) -> bool | None:
        """True when the program matched eager and every piece its module, within the tolerances (Note [the
        verdict]); None when nothing was compared (a report of a failed export)."""
        verdicts = [self.root.passed, *(p.passed for p in self.pieces.values())]
        if self.root.passed is None:
            return None
        return all(v is not False for v in verdicts)

    @property
    def failed(self) -> list[str]:
        """What did not match eager: ``"(model)"`` and the paths of the pieces that failed their checks."""
        return (["(model)"] if self.root.passed is False else []) + [p for p, piece in self.pieces.items() if piece.passed is False]

    @property
    def behind_operators(self) -> list[str]:
        """The paths of the pieces behind operators."""
        return [p for p, piece in self.pieces.items() if piece.status is PieceStatus.BEHIND_OPERATOR]

    def __str__(self) -> str:
        cut = self.behind_operators
        diff = "" if self.root.max_abs_diff is None else f"; max |diff| against eager {_number(self.root.max_abs_diff)}"
        if self.values_not_compared is not None:
            diff = "; max |diff| against eager not run (shapes and dtypes checked)"
        head = (
            f"{self.model_class.__name__} exported piece by piece in {self.seconds:.1f} s ({self.mode}): "
            f"{len(cut)} piece{'s' if len(cut) != 1 else ''} behind operators{diff} on {len(self.examples)} example"
            f"{'s' if len(self.examples) != 1 else ''}"
        )
        if self.passed is not None:
            head += f": {'PASS' if self.passed else 'FAIL'}"
        lines = [head, *(f"  {a.line()}" for a in self.attempts), *(f"  example: {e}" for e in self.examples)]
        lines += [f"  output {o.line()}" for o in self.root.outputs if not o.passed]
        lines += [f"  FAIL {r}" for r in self.refused]
        lines += [f"  note: {n}" for n in self.notes]
        if self.values_not_compared is not None:
            lines.append(f"  not run: every comparison of values with eager; {self.values_not_compared}")
        if self.onnx is not None:
            functions = self.onnx.functions
            lines.append(
                f"  onnx: {self.onnx.path}, {self.onnx.size:,} bytes, {len(functions)} function{'s' if len(functions) != 1 else ''} "
                f"for {sum(map(len, functions.values()))} pieces ({', '.join(f'{k} x{len(v)}' for k, v in functions.items())}), "
                f"max |diff| of onnxruntime against eager {_number(self.onnx.model_diff)}, {self.onnx.seconds:.1f} s"
            )
        rows = [self._row("(model)", self.root, 0, 1)]
        rows += list(self._rows("", 1))
        width = max(len(r[0]) for r in rows)
        cls_width = max(len(r[1]) for r in rows)
        for name, cls, status, diff_, seconds, reason, onnx in rows:
            line = f"{name:<{width}}  {cls:<{cls_width}}  {status:<25}  {diff_:>10}  {seconds:>7}" + (f"  {onnx:>15}" if self.onnx is not None else "")
            lines.append((f"{line}  {reason}" if reason else line).rstrip())
        return "\n".join(lines)

    def _rows(self, parent: str, depth: int) -> Iterator[tuple[str, str, str, str, str, str, str]]:
        for group in _fold(self, self.children.get(parent, [])):
            label = _label([_relative(parent, p) for p in group])
            merged = _merge([self.pieces[p] for p in group])
            yield self._row(label, merged, depth, len(group))
            yield from self._rows(group[0], depth + 1)

    def _row(self, label: str, piece: Piece, depth: int, count: int) -> tuple[str, str, str, str, str, str, str]:
        reason = "" if piece.failure is None else f"{piece.failure.kind}: {_clip(piece.failure.detail or piece.failure.message, 100)}" + (
            f" (at {_short(piece.failure.where)})" if piece.failure.where else ""
        ) + (f"; torch suggests: {piece.failure.fix}" if piece.failure.fix else "")
        own = piece.own_export_failure
        if own is not None and _same(own, piece.failure):  # exported alone, it fails as it did in the model
            reason = (reason + "; " if reason else "") + "no own program: the same failure alone"
        elif own is not None:
            reason = (reason + "; " if reason else "") + f"no own program: {own.kind}: {_clip(own.detail or own.message, 80)}"
        elif piece.program is not None:
            reason = (reason + "; " if reason else "") + "own program"
        if piece.by_size is not None:
            reason = (reason + "; " if reason else "") + _clip(piece.by_size, 100)
        return (
            "  " * depth + label,
            piece.module_class.__name__,
            piece.status.value,
            _diff_cell(piece, self.values_not_compared, "|d| ") + (" FAIL" if piece.passed is False else ""),
            "" if piece.seconds is None else f"{piece.seconds:.2f} s",
            reason,
            "" if piece.onnx_max_abs_diff is None else f"onnx |d| {_number(piece.onnx_max_abs_diff)}",
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: the model, the attempts, the examples, notes, and every piece."""

        def tree(path: str) -> dict[str, Any]:
            piece = self.root if path == "" else self.pieces[path]
            return {**piece.to_dict(), "children": [tree(c) for c in self.children.get(path, [])]}

        return {
            "model": f"{self.model_class.__module__}.{self.model_class.__qualname__}",
            "mode": self.mode,
            "seconds": _rounded(self.seconds),
            "max_abs_diff": _finite(self.root.max_abs_diff),
            "values_not_compared": self.values_not_compared,
            "passed": self.passed,
            "failed": self.failed,
            "behind_operators": self.behind_operators,
            "attempts": [
                {
                    "number": a.number,
                    "seconds": _rounded(a.seconds),
                    "failure": _failure(a.failure),
                    "cut": list(a.cut),
                }
                for a in self.attempts
            ],
            "examples": list(self.examples),
            "notes": list(self.notes),
            "refused": list(self.refused),
            "onnx": None if self.onnx is None else {
                "path": self.onnx.path, "size": self.onnx.size, "functions": {k: list(v) for k, v in self.onnx.functions.items()},
                "max_abs_diff": _finite(self.onnx.model_diff), "seconds": _rounded(self.onnx.seconds),
            },
            "tree": tree(""),
        }

    def to_markdown(self) -> str:
        """The report as a Markdown page (Note [the Markdown report]): a summary, the attempts, the examples,
        the tree as a table, and a section per piece behind an operator (identical siblings folded) saying why
        it was cut, what was checked, and which program it runs."""
        return _markdown(self)


# ---- the Markdown page --------------------------------------------------------------------------------


def _markdown(report: ExportReport) -> str:
    n = len(report.behind_operators)
    lines = [f"# {report.model_class.__name__} exported piece by piece", "", "| | |", "|---|---|"]
    summary = [
        ("model", f"`{report.model_class.__module__}.{report.model_class.__qualname__}`"),
        ("mode", report.mode),
        ("time", f"{report.seconds:.1f} s"),
        ("pieces behind operators", str(n)),
        ("max \\|diff\\| against eager", "" if report.root.max_abs_diff is None else
            f"{_number(report.root.max_abs_diff)} on {len(report.examples)} example{'s' * (len(report.examples) != 1)}"),
    ]  # fmt: skip
    if report.values_not_compared is not None:
        summary[-1] = ("max \\|diff\\| against eager", f"not run: {report.values_not_compared}; shapes and dtypes checked")
    if report.onnx is not None:
        o = report.onnx
        summary.append(("onnx", f"`{o.path}`, {o.size:,} bytes, {len(o.functions)} function(s), max |diff| of "
                                f"onnxruntime {_number(o.model_diff)}, {o.seconds:.1f} s"))  # fmt: skip
    if report.passed is not None:
        failed = f" ({', '.join(report.failed)})" if report.failed else ""
        summary.append(("verdict", ("PASS" if report.passed else "FAIL") + failed))
    lines += [f"| {k} | {_cell(v)} |" for k, v in summary]
    if report.root.outputs:
        lines += ["", "## Outputs against eager", "", "| output | max \\|diff\\| | max relative | atol | rtol | verdict |",
                  "|---|---:|---:|---:|---:|---|"]  # fmt: skip
        for o in report.root.outputs:
            lines.append(f"| `{_cell(o.name)}` | {_number(o.max_abs_diff)} | {_number(o.max_rel_diff)} | {o.atol:g} | {o.rtol:g} | "
                         f"{'pass' if o.passed else 'FAIL'} |")  # fmt: skip
    lines += ["", "## Attempts", "", "| attempt | result | time | put behind operators next |", "|---:|---|---:|---|"]
    for a in report.attempts:
        result = "exported" if a.failure is None else f"failed: {a.failure.kind}: {a.failure.message}"
        lines.append(f"| {a.number} | {_cell(result)} | {a.seconds:.1f} s | {_cell(', '.join(a.cut))} |")
    lines += ["", "## Examples", "", *(f"- {e}" for e in report.examples), *(f"- note: {x}" for x in report.notes)]
    lines += [f"- FAIL {r}" for r in report.refused]
    lines += ["", "## Modules", "", "| module | class | status | max \\|diff\\| | verdict | time |", "|---|---|---|---:|---|---:|"]
    for depth, label, piece in _table_rows(report, "", 0):
        diff = _diff_cell(piece, report.values_not_compared, "")
        seconds = "" if piece.seconds is None else f"{piece.seconds:.2f} s"
        name = "\u00a0" * 4 * depth + f"`{label}`"  # no-break spaces: Markdown tables drop leading spaces
        lines.append(f"| {name} | {_cell(piece.module_class.__name__)} | {piece.status.value} | {diff} | {piece.verdict} | {seconds} |")
    programs: dict[int, str] = {}  # a program -> the first piece that has it (the one it was exported from)
    for path, p in report.pieces.items():
        if p.program is not None:
            programs.setdefault(id(p.program), path)
    for group in _cut_groups(report):
        lines += ["", *_piece_section(report, group, programs)]
    return "\n".join(lines) + "\n"


def _table_rows(report: ExportReport, parent: str, depth: int) -> Iterator[tuple[int, str, Piece]]:
    if parent == "":
        yield 0, "(model)", report.root
    for group in _fold(report, report.children.get(parent, [])):
        yield depth + 1, _label([_relative(parent, p) for p in group]), _merge([report.pieces[p] for p in group])
        yield from _table_rows(report, group[0], depth + 1)


def _cut_groups(report: ExportReport) -> list[list[str]]:
    """The pieces behind operators, consecutive identical siblings together, in the tree's order; under identical
    siblings folded into one line, the same piece of each of them together too (``model.layers.0-2.linear_attn``:
    the tree shows them as one line, and each is in its section, not the first alone)."""
    groups: list[list[str]] = []

    def walk(parents: list[str]) -> None:  # parents: the same module in each folded sibling (identical trees)
        for group in _fold(report, report.children.get(parents[0], [])):
            names = [_relative(parents[0], p) for p in group]
            paths = [f"{parent}.{name}" if parent else name for parent in parents for name in names]
            if report.pieces[group[0]].status is PieceStatus.BEHIND_OPERATOR:
                groups.append(paths)
            walk(paths)

    walk([""])
    return groups


def _piece_section(report: ExportReport, group: list[str], programs: dict[int, str]) -> list[str]:
    piece, first = _merge([report.pieces[p] for p in group]), report.pieces[group[0]]
    cls = piece.module_class
    lines = [f"## `{_label(group)}`", "", f"- class: `{cls.__module__}.{cls.__qualname__}`"]
    if len(group) == 1:
        lines.append(f"- operator: `{first.operator}`")
    else:
        lines.append(f"- operators: `{first.operator}` and {len(group) - 1} more, one per module")
    if piece.failure is not None:
        lines.append(f"- cut because: {piece.failure.kind}")
        if piece.failure.detail:
            lines.append(f"- where: {piece.failure.detail}")
        if piece.failure.where:
            lines.append(f"- in the model's code: `{piece.failure.where}`")
        if piece.failure.fix:
            lines.append(f"- torch's suggested fix: `{piece.failure.fix}`")
        text = (piece.failure.text or piece.failure.message).splitlines()
        lines += ["- torch's message:", "", "  ```text", *(f"  {line}".rstrip() for line in text), "  ```"]
    if piece.max_abs_diff is None and piece.checked_calls and report.values_not_compared is not None:
        lines.append(f"- checked through its operator against its module: shapes and dtypes on {piece.checked_calls} recorded "
                     f"call{'s' * (piece.checked_calls != 1)}; values not run ({report.values_not_compared})")  # fmt: skip
    if piece.not_checked is not None:
        lines.append(f"- checked through its operator against its module: not run: {piece.not_checked}")
    if piece.max_abs_diff is not None:
        lines.append(f"- checked through its operator against its module: max \\|diff\\| {_number(piece.max_abs_diff)} "
                     f"on {piece.checked_calls} recorded call{'s' * (piece.checked_calls != 1)}: {piece.verdict or 'not compared'}")  # fmt: skip
    lines += [f"  - `{_cell(o.name)}`: {o.line().partition(': ')[2]}" for o in piece.outputs if not o.passed]
    runs: dict[str, list[str]] = {}  # the piece whose program was exported -> the pieces of the group running it
    for path in group:
        program = report.pieces[path].program
        if program is not None:
            runs.setdefault(programs[id(program)], []).append(path)
    if piece.own_export_failure is not None:
        own = piece.own_export_failure
        lines.append(f"- own program: none ({own.kind}: {own.detail or own.message})")
        if piece.by_size is not None:  # the archive and ONNX call those programs; the class is needed only at other sizes
            lines.append(f"- by size: {piece.by_size}; a saved artifact runs these programs, and needs the piece's class in "
                         "`implementations=` only for sizes none of them holds")  # fmt: skip
        else:
            lines.append("- loading a saved artifact needs its class, or an instance, in `implementations=`")
    elif len(group) == 1 and runs:
        (owner,) = runs
        lines.append("- own program: exported alone" if owner == group[0] else f"- own program: the one exported from `{owner}`, an identical piece")
    elif runs:
        said = "; ".join(f"the one exported from `{owner}` runs {_label(paths)}" for owner, paths in runs.items())
        lines.append(f"- own programs: {said}")
    if piece.onnx_max_abs_diff is not None:
        lines.append(f"- onnxruntime against eager: max \\|diff\\| {_number(piece.onnx_max_abs_diff)}")
    return lines


def _same(own: Failure, cut: Failure | None) -> bool:
    """Whether a piece's own export failed as the attempt that cut it did: the same kind, at the same line of the
    model's code (or with the same message, where torch names no line)."""
    if cut is None or own.kind != cut.kind:
        return False
    return own.where == cut.where if own.where else own.message == cut.message


def _diff_cell(piece: Piece, not_compared: str | None, prefix: str) -> str:
    """A piece's difference against eager as a column shows it: "not run" where the export has no values."""
    if piece.not_checked is not None:
        return f"{prefix}not run: {piece.not_checked}"
    if piece.max_abs_diff is not None:
        return f"{prefix}{_number(piece.max_abs_diff)}"
    checked = piece.checked_calls or piece.program is not None or not piece.path
    return "not run" if not_compared is not None and checked else ""


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _signature(report: ExportReport, path: str) -> tuple[Any, ...]:
    piece = report.pieces[path]
    kids = tuple((_relative(path, c), _signature(report, c)) for c in report.children.get(path, []))
    failure = None if piece.failure is None else (piece.failure.kind, piece.failure.message)
    own = None if piece.own_export_failure is None else (piece.own_export_failure.kind, piece.own_export_failure.message)
    return (piece.module_class, piece.status, failure, own, piece.program is None, piece.passed, piece.not_checked, piece.by_size, kids)


def _fold(report: ExportReport, paths: Sequence[str]) -> list[list[str]]:
    groups: list[list[str]] = []
    last: tuple[Any, ...] | None = None
    for path in paths:
        sig = _signature(report, path)
        if groups and sig == last and _foldable(groups[-1][-1], path):
            groups[-1].append(path)
        else:
            groups.append([path])
        last = sig
    return groups


def _foldable(a: str, b: str) -> bool:
    """Siblings fold when their names differ only in a last numeric part (``layers.0``, ``layers.1``)."""
    head_a, _, tail_a = a.rpartition(".")
    head_b, _, tail_b = b.rpartition(".")
    return head_a == head_b and tail_a.isdigit() and tail_b.isdigit()


def _label(paths: Sequence[str]) -> str:
    """Dotted paths that differ in one numeric part as one: siblings (``layers.0-2 (x3)``, ``{0,2}`` when not
    consecutive) and the same piece of each (``model.layers.0-2.linear_attn (x3)``); listed otherwise."""
    if len(paths) == 1:
        return paths[0]
    parts = [p.split(".") for p in paths]  # dotted module paths, as torch writes them
    if len({len(x) for x in parts}) != 1:
        return ", ".join(paths)
    differing = [i for i in range(len(parts[0])) if len({x[i] for x in parts}) > 1]
    if len(differing) != 1 or not all(x[differing[0]].isdigit() for x in parts):
        return ", ".join(paths)
    (i,) = differing
    numbers = [int(x[i]) for x in parts]
    consecutive = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    span = f"{numbers[0]}-{numbers[-1]}" if consecutive else "{" + ",".join(map(str, numbers)) + "}"
    return ".".join([*parts[0][:i], span, *parts[0][i + 1 :]]) + f" (x{len(paths)})"


def _merge(pieces: Sequence[Piece]) -> Piece:
    if len(pieces) == 1:
        return pieces[0]
    diffs = [p.max_abs_diff for p in pieces if p.max_abs_diff is not None]
    onnx = [p.onnx_max_abs_diff for p in pieces if p.onnx_max_abs_diff is not None]
    times = [p.seconds for p in pieces if p.seconds is not None]
    first = pieces[0]
    return dataclasses.replace(
        first, seconds=sum(times) if times else None, max_abs_diff=max(diffs) if diffs else None,
        checked_calls=sum(p.checked_calls for p in pieces), onnx_max_abs_diff=max(onnx) if onnx else None,
        passed=None if all(p.passed is None for p in pieces) else all(p.passed is not False for p in pieces),
        outputs=tuple(o for p in pieces for o in p.outputs if not o.passed) or first.outputs,
    )  # fmt: skip


def _failure(failure: Failure | None) -> dict[str, str] | None:
    if failure is None:
        return None
    return {"kind": failure.kind, "message": failure.message, "detail": failure.detail, "where": failure.where, "fix": failure.fix}


def _short(where: str) -> str:
    """``file:line`` with the file's name only, for a line of the tree (the Markdown page has the whole path)."""
    import os

    return os.path.basename(where)


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent else path


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _number(x: float) -> str:
    if math.isnan(x):  # onnxruntime's checks of an export without values (Note [streamed weights])
        return "not run"
    return "inf" if math.isinf(x) else ("0" if x == 0 else f"{x:.2g}")


def _finite(x: float | None) -> float | str | None:
    if x is None:
        return None
    return "inf" if math.isinf(x) else x


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
