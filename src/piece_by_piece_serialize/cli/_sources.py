"""Find operator-schema strings in files and map every character back to where it was written.

The command line checks schemas where people write them: plain text (one schema per line), Python
sources (``torch.library.define``, ``Library.define``/``lib.define``, ``custom_op(..., schema=...)``,
``torch._C.parse_schema``), C++ and Objective-C++ sources (string literals passed to ``def(``,
``TORCH_SELECTIVE_SCHEMA(``, ``torch::schema(``, ``c10::schema(``, ``torch::jit::parseSchema(`` and
``parseSchemaOrName(``) and YAML ``func:`` entries of files shaped like ``native_functions.yaml``. This
module reads those *container* languages only; it never looks inside a schema (that is the schema
grammar's job). Each schema comes out as a :class:`SchemaSite`: the decoded text exactly as torch would
receive it, plus, for every character of that text, the 1-based line and column in the original file
where the character (or the escape sequence that produced it) was written. That map is what lets a caret
land under the right column of the *original* file even after C++ adjacent literals were joined, escapes
decoded or Python ``+`` concatenations folded.

What a static read cannot see is said, never guessed at: a schema literal holding Jinja placeholders
(``{{ name }}``, ``{% if %}``: the file is a template) becomes a ``template`` note, and a literal joined
with something only the compiler or the interpreter knows (a macro such as ``STRING(X)``, a
preprocessor directive, an f-string field, ``%`` or ``.format()``) becomes a ``not-static`` note; neither
is parsed half. The file's ``pbp: ignore[rule]`` comments are collected as :class:`Suppression` records.

Invariants: reading never executes or imports anything (Python is read with ``ast`` and ``tokenize``,
string escapes are decoded here by hand and cross-checked against ``ast``'s own value); a site's
``positions`` has ``len(text) + 1`` entries (the last one is just past the final character, where an
"end of input" error points); unreadable constructs become :class:`Problem` records, never exceptions
(``fatal`` ones, a Python file that cannot be parsed, fail the run); every scan is linear in the size
of the file.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
import unicodedata
import warnings
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import overload

# How a file is read, chosen from its suffix; anything else given explicitly is read as plain text.
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
CPP_SUFFIXES = frozenset(
    {".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".mm"}
)
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
TEXT_SUFFIXES = frozenset({".schema", ".schemas"})

# Contexts: where a schema was found decides how torch will parse it.
CONTEXT_TEXT = "text"
CONTEXT_YAML = "yaml"
CONTEXT_CPP = "cpp"  # TORCH_LIBRARY m.def / TORCH_SELECTIVE_SCHEMA: type variables are off
CONTEXT_TORCH_SCHEMA = "torch::schema"  # torch::schema(str, kind, allow_typevars=false)
CONTEXT_C10_SCHEMA = "c10::schema"
CONTEXT_JIT_PARSE_SCHEMA = "torch::jit::parseSchema"  # parseSchema(str, allow_typevars=true)
CONTEXT_JIT_PARSE_SCHEMA_OR_NAME = "torch::jit::parseSchemaOrName"
CONTEXT_LIBRARY_DEFINE = "Library.define"  # typevars off, full name optional
CONTEXT_TORCH_LIBRARY_DEFINE = "torch.library.define"  # nameless "(...) -> ..." schema, typevars off
CONTEXT_CUSTOM_OP = "custom_op"  # nameless schema, validated with typevars on, defined with them off
CONTEXT_PARSE_SCHEMA = "parse_schema"  # torch._C.parse_schema: typevars on

# Contexts whose text torch defines through the dispatcher, where type variables are rejected.
TYPEVARS_OFF = frozenset(
    {CONTEXT_CPP, CONTEXT_TORCH_SCHEMA, CONTEXT_C10_SCHEMA, CONTEXT_LIBRARY_DEFINE, CONTEXT_TORCH_LIBRARY_DEFINE, CONTEXT_CUSTOM_OP}
)
# Contexts whose text is a schema without the operator name.
NAMELESS = frozenset({CONTEXT_TORCH_LIBRARY_DEFINE, CONTEXT_CUSTOM_OP})
# Contexts that also take a bare operator name (torch infers the schema from the C++ function).
NAME_ONLY = frozenset({CONTEXT_CPP, CONTEXT_JIT_PARSE_SCHEMA_OR_NAME})

__all__ = [
    "LinePositions",
    "Problem",
    "SchemaSite",
    "SourceFile",
    "Suppression",
    "kind_for_path",
    "read_sites",
    "read_source",
]


@dataclass(frozen=True, slots=True)
class SchemaSite:
    """One schema string found in a file.

    ``positions[i]`` is the (line, column), both 1-based, in the original file of ``text[i]``;
    ``positions[len(text)]`` is the place just after the last character. ``lines`` are the file's lines,
    shared by every site of the file, for printing the source line under a finding. ``span`` is the first
    and last line of the call that holds the schema (a suppression comment on any of them applies);
    ``typevars`` is an explicit ``allow_typevars`` argument written in the call, ``None`` when the context
    decides.
    """

    path: str
    text: str
    positions: Sequence[tuple[int, int]]
    context: str
    lines: Sequence[str]
    span: tuple[int, int] = (0, 0)
    typevars: bool | None = None

    def where(self, offset: int) -> tuple[int, int]:
        """The original (line, column) of the character at ``offset`` in :attr:`text` (clamped)."""
        return self.positions[max(0, min(offset, len(self.text)))]

    @property
    def typevars_off(self) -> bool:
        """Whether torch parses this schema with type variables off."""
        return self.context in TYPEVARS_OFF if self.typevars is None else not self.typevars


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that is not a checked schema: a note on a schema a static read cannot check
    (``code`` "template" or "not-static"), an odd YAML form, or, ``fatal``, a file that cannot be read at
    all (a Python syntax error), which fails the run."""

    path: str
    line: int
    column: int
    message: str
    severity: str = "error"
    code: str = "source"
    fatal: bool = False
    span: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Suppression:
    """A ``pbp: ignore[rule, ...]`` comment at (line, column); ``rules`` is empty when it is malformed."""

    line: int
    column: int
    rules: tuple[str, ...]
    text: str


@dataclass(slots=True)
class SourceFile:
    """Everything read from one file: its lines, schema sites and problems in file order, suppressions."""

    path: str
    lines: list[str]
    sites: list[SchemaSite] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)


class LinePositions(Sequence[tuple[int, int]]):
    """Positions of a schema written on one line from column ``column``: character i is at column + i.

    Kept as three numbers rather than a tuple per character: a plain-text file of 100,000 schemas would
    otherwise hold millions of tuples.
    """

    __slots__ = ("line", "column", "length")

    def __init__(self, line: int, length: int, column: int = 1) -> None:
        self.line = line
        self.column = column
        self.length = length

    def __len__(self) -> int:
        return self.length + 1

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i <= self.length:
            raise IndexError(i)
        return (self.line, self.column + i)


class _Run(Sequence[tuple[int, int]]):
    """``length`` characters written one after the other on ``line`` from ``column`` (``step`` 0: all at one place)."""

    __slots__ = ("line", "column", "length", "step")

    def __init__(self, line: int, column: int, length: int, step: int = 1) -> None:
        self.line = line
        self.column = column
        self.length = length
        self.step = step

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        return (self.line, self.column + i * self.step)


class _Chunks(Sequence[tuple[int, int]]):
    """Positions made of consecutive parts (the pieces of a folded Python string), looked up by bisection."""

    __slots__ = ("parts", "ends")

    def __init__(self, parts: list[Sequence[tuple[int, int]]]) -> None:
        self.parts = [part for part in parts if len(part)]
        ends: list[int] = []
        total = 0
        for part in self.parts:
            total += len(part)
            ends.append(total)
        self.ends = ends

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = bisect.bisect_right(self.ends, i)
        return self.parts[k][i - (self.ends[k - 1] if k else 0)]


class _OffsetPositions(Sequence[tuple[int, int]]):
    """Positions kept as file offsets (one machine integer per character), turned into (line, column) on demand."""

    __slots__ = ("offsets", "where")

    def __init__(self, offsets: array[int], where: _LineIndex) -> None:
        self.offsets = offsets
        self.where = where  # not ``index``: that name is Sequence.index

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(i, slice):
            return [self.where(o) for o in self.offsets[i]]
        return self.where(self.offsets[i])


def kind_for_path(path: str, explicit: bool) -> str | None:
    """``"python"``, ``"cpp"``, ``"yaml"`` or ``"text"`` for a file name; ``None`` to skip it.

    Files found while walking a folder are read only when their suffix is known; a file named on the
    command line (``explicit``) with an unknown suffix is read as plain text.
    """
    suffix = PurePath(path).suffix.lower()
    if suffix in PYTHON_SUFFIXES:
        return "python"
    if suffix in CPP_SUFFIXES:
        return "cpp"
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in TEXT_SUFFIXES or explicit:
        return "text"
    return None


def split_lines(text: str) -> list[str]:
    """The file's lines without their end-of-line characters (text was read with universal newlines)."""
    return text.split("\n")


def read_source(path: str, text: str, kind: str) -> SourceFile:
    """Everything the checker needs from one file of the given kind (see :class:`SourceFile`)."""
    lines = split_lines(text)
    source = SourceFile(path, lines)
    if kind == "python":
        _python_source(source, text)
    elif kind == "cpp":
        _cpp_source(source, text)
    elif kind == "yaml":
        _yaml_source(source)
    else:
        source.sites = _text_sites(path, lines)
    _set_aside_templates(source)
    return source


def read_sites(path: str, text: str, kind: str) -> tuple[list[SchemaSite], list[Problem]]:
    """Every schema site of a file of the given kind, in file order, and the problems met while reading."""
    source = read_source(path, text, kind)
    return source.sites, source.problems


# ------------------------------------------------------------------------------------------------
# Templates: Jinja placeholders in a schema literal mean the file is a template (FBGEMM's codegen
# `*_template.cpp`); what torch receives is the rendered file, so the literal is noted, never parsed.

_TEMPLATE_OPENERS = {"{{": "}}", "{%": "%}", "{#": "#}"}


def template_marker(text: str, start: int = 0, end: int | None = None) -> int:
    """The offset of the first Jinja opener (``{{``, ``{%``, ``{#``) in ``text[start:end]``, or -1."""
    found = [k for k in (text.find(opener, start, end) for opener in _TEMPLATE_OPENERS) if k >= 0]
    return min(found, default=-1)


def _template_note(path: str, text: str, k: int, where: tuple[int, int], span: tuple[int, int]) -> Problem:
    close = text.find(_TEMPLATE_OPENERS[text[k : k + 2]], k + 2)
    shown = " ".join(text[k : close + 2 if close >= 0 else k + 2].split())
    if len(shown) > 40:
        shown = shown[:37] + "..."
    line, column = where
    return Problem(
        path, line, column, f"template: not checked (Jinja '{shown}' is expanded when the file is rendered)", "note", "template", span=span
    )


def _set_aside_templates(source: SourceFile) -> None:
    kept: list[SchemaSite] = []
    for site in source.sites:
        k = template_marker(site.text)
        if k < 0:
            kept.append(site)
        else:
            source.problems.append(_template_note(site.path, site.text, k, site.where(k), site.span))
    if len(kept) != len(source.sites):
        source.sites = kept
        source.problems.sort(key=lambda p: (p.line, p.column))


# ------------------------------------------------------------------------------------------------
# Suppression comments: `pbp: ignore[rule, rule]` anywhere in a comment of the container language.


def parse_directive(comment: str, line: int, column: int) -> Suppression | None:
    """The suppression in one comment's text (written from ``column`` of ``line``), if it holds one.

    ``pbp: ignore`` not followed by a bracketed, non-empty rule list is returned with no rules (reported
    as malformed rather than silently doing nothing).
    """
    k = comment.find("pbp:")
    if k < 0:
        return None
    j = k + 4
    while j < len(comment) and comment[j] in " \t":
        j += 1
    if comment[j : j + 6] != "ignore":
        return None
    j += 6
    while j < len(comment) and comment[j] in " \t":
        j += 1
    text = comment[k:j].rstrip()
    if comment[j : j + 1] == "[":
        close = comment.find("]", j)
        if close > j:
            text = comment[k : close + 1]
            rules = tuple(r.strip() for r in comment[j + 1 : close].split(","))
            if all(rules):
                return Suppression(line, column + k, rules, text)
    return Suppression(line, column + k, (), text)


# ------------------------------------------------------------------------------------------------
# Plain text: one schema per line; blank lines and lines whose first visible character is '#' skipped.


def _text_sites(path: str, lines: list[str]) -> list[SchemaSite]:
    sites = []
    for lineno, line in enumerate(lines, 1):
        start = len(line) - len(line.lstrip())
        body = line[start:].rstrip()
        if not body or body[0] == "#":
            continue
        sites.append(SchemaSite(path, body, LinePositions(lineno, len(body), start + 1), CONTEXT_TEXT, lines, (lineno, lineno)))
    return sites


# ------------------------------------------------------------------------------------------------
# YAML: `func:` entries as in native_functions.yaml. Only the forms such files use are read: plain
# scalars (folded over more-indented continuation lines, a ' #' starts a comment), and single- or
# double-quoted scalars on one line. Anything else is reported rather than guessed at. A YAML file is
# read as schemas only when it has that shape: at least one `func:` value with an argument list and a `->`. Kernel
# lists (`- func: int1mm` / `file: int1mm.metal`) and other YAML that happens to use the key are left alone.


def _yaml_source(source: SourceFile) -> None:
    sites, problems = _yaml_sites(source.path, source.lines)
    if any("(" in site.text and "->" in site.text for site in sites):
        source.sites, source.problems = sites, problems
    for lineno, line in enumerate(source.lines, 1):
        if "pbp:" in line:
            k = _yaml_comment_start(line)
            if k >= 0:
                directive = parse_directive(line[k:], lineno, k + 1)
                if directive is not None:
                    source.suppressions.append(directive)


def _yaml_comment_start(line: str) -> int:
    """Where a YAML comment starts on a line ('#' at the start or after a blank, outside quotes), or -1."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote == "'":
            if ch == "'":
                if line[i + 1 : i + 2] == "'":
                    i += 1
                else:
                    quote = ""
        elif quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
        elif ch in "'\"" and (i == 0 or line[i - 1] in " \t:-[{,"):
            quote = ch
        i += 1
    return -1


def _yaml_sites(path: str, lines: list[str]) -> tuple[list[SchemaSite], list[Problem]]:
    sites: list[SchemaSite] = []
    problems: list[Problem] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        j = _skip_blanks(line, 0)
        # sequence indicators: "- func: ...", "- - func: ..."
        while j < len(line) and line[j] == "-" and (j + 1 == len(line) or line[j + 1] in " \t"):
            j = _skip_blanks(line, j + 1)
        key_end = j + 4
        if not (line[j:key_end] == "func" and key_end < len(line) and line[key_end] == ":"):
            i += 1
            continue
        if key_end + 1 < len(line) and line[key_end + 1] not in " \t":
            i += 1
            continue
        key_col = j
        k = _skip_blanks(line, key_end + 1)
        lineno = i + 1
        if k == len(line) or line[k] == "#":
            problems.append(Problem(path, lineno, key_col + 1, "a 'func:' value on the following lines is not read; write the schema on the 'func:' line", "warning"))
            i += 1
            continue
        quote = line[k]
        if quote in "|>":
            problems.append(Problem(path, lineno, k + 1, "a 'func:' block scalar is not read; write the schema as a plain scalar", "warning"))
            i += 1
            continue
        if quote in "'\"":
            decoded = _yaml_quoted(line, k, lineno)
            if decoded is None:
                problems.append(Problem(path, lineno, k + 1, "unterminated or multi-line quoted 'func:' value"))
            else:
                text, positions = decoded
                sites.append(SchemaSite(path, text, positions, CONTEXT_YAML, lines, (lineno, lineno)))
            i += 1
            continue
        chars: list[str] = []
        positions_list: list[tuple[int, int]] = []
        _yaml_plain_line(line, k, lineno, chars, positions_list)
        # continuation lines: more indented than the key, not blank, not a comment
        i += 1
        while i < len(lines):
            nxt = lines[i]
            start = _skip_blanks(nxt, 0)
            if start == len(nxt) or start <= key_col or nxt[start] == "#":
                break
            chars.append(" ")  # YAML folds a line break inside a plain scalar into one space
            positions_list.append(positions_list[-1] if positions_list else (i + 1, start + 1))
            _yaml_plain_line(nxt, start, i + 1, chars, positions_list)
            i += 1
        if not chars:
            continue
        last_line, last_col = positions_list[-1]
        positions_list.append((last_line, last_col + 1))
        sites.append(SchemaSite(path, "".join(chars), tuple(positions_list), CONTEXT_YAML, lines, (lineno, i)))
    return sites, problems


def _skip_blanks(line: str, j: int) -> int:
    while j < len(line) and line[j] in " \t":
        j += 1
    return j


def _yaml_plain_line(line: str, start: int, lineno: int, chars: list[str], positions: list[tuple[int, int]]) -> None:
    end = len(line)
    j = line.find("#", start + 1)
    while j >= 0:
        # ' #' (a blank then '#') starts a comment in a plain scalar; '#' glued to text does not
        if line[j - 1] in " \t":
            end = j
            break
        j = line.find("#", j + 1)
    while end > start and line[end - 1] in " \t":
        end -= 1
    chars.extend(line[start:end])
    positions.extend([(lineno, col + 1) for col in range(start, end)])


_YAML_DQ_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}
_YAML_HEX = {"x": 2, "u": 4, "U": 8}


def _yaml_quoted(line: str, k: int, lineno: int) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    quote = line[k]
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    j = k + 1
    while j < len(line):
        ch = line[j]
        if quote == "'":
            if ch == "'":
                if j + 1 < len(line) and line[j + 1] == "'":
                    chars.append("'")
                    positions.append((lineno, j + 1))
                    j += 2
                    continue
                positions.append((lineno, j + 1))
                return "".join(chars), tuple(positions)
        else:
            if ch == '"':
                positions.append((lineno, j + 1))
                return "".join(chars), tuple(positions)
            if ch == "\\" and j + 1 < len(line):
                esc = line[j + 1]
                if esc in _YAML_HEX:
                    digits = line[j + 2 : j + 2 + _YAML_HEX[esc]]
                    if len(digits) != _YAML_HEX[esc] or not _is_hex(digits):
                        return None
                    chars.append(chr(int(digits, 16)))
                    positions.append((lineno, j + 1))
                    j += 2 + len(digits)
                    continue
                if esc not in _YAML_DQ_ESCAPES:
                    return None
                chars.append(_YAML_DQ_ESCAPES[esc])
                positions.append((lineno, j + 1))
                j += 2
                continue
        chars.append(ch)
        positions.append((lineno, j + 1))
        j += 1
    return None


def _is_hex(digits: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in digits)


# ------------------------------------------------------------------------------------------------
# C++ (and Objective-C++): a scanner that knows comments, character literals and (raw) string literals
# with prefixes, enough to find the calls that take a schema (`def(`, `TORCH_SELECTIVE_SCHEMA(`,
# `torch::schema(`, `c10::schema(`, `parseSchema(`, `parseSchemaOrName(`) and read their first argument.
# An argument made only of adjacent string literals is one schema (escapes decoded as a C++ compiler
# would); one that mixes literals with anything else (a macro, a preprocessor directive, a Jinja block)
# is a note, never half a schema. The scanner jumps with str.find between the few characters that
# matter ('/', quotes), remembering where each next one is so that a large file is scanned once (a
# fresh find per literal would rescan the rest of the file for a character it does not hold); line and
# column are computed only for the literals that are kept.

_CPP_CALLEES = ("def", "TORCH_SELECTIVE_SCHEMA", "schema", "parseSchema", "parseSchemaOrName")
_CPP_WORDS = ("def", "schema", "Schema", "SCHEMA")  # a file without any of these holds no schema call
_CPP_STRING_PREFIXES = ("u8R", "LR", "uR", "UR", "R", "u8", "L", "u", "U")  # longest first
_CPP_SIMPLE_ESCAPES = {"'": "'", '"': '"', "?": "?", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL = "01234567"
_CPP_BODY = re.compile(r'(?:[^"\\\n]+|\\[\s\S])*')  # the inside of a "..." literal (C++ lexing, not schema text)
# The first argument of a schema call is read token by token up to this many tokens (a schema is a few
# literals); past it the call is not a schema site. Bounds the work per call, whatever the file holds.
_CPP_MAX_TOKENS = 512


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass(slots=True)
class _CppLiteral:
    start: int  # offset of the prefix or opening quote
    end: int  # offset just after the closing quote
    body: int  # offset of the first character inside the quotes
    body_end: int  # offset of the closing delimiter
    raw: bool


class _CppScan:
    """Comments and string literals of a C++ text, as offset intervals, in one pass."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.comments: dict[int, int] = {}  # start -> end
        self.literals: dict[int, _CppLiteral] = {}  # start (prefix included) -> literal
        self.code: list[tuple[int, int]] = []  # spans outside comments and literals
        self._scan()

    def _scan(self) -> None:
        text = self.text
        n = len(text)
        i = code_start = 0
        # where the next '/', '"' and "'" at or after i are (-1: none left); refreshed only once passed
        ahead = {ch: text.find(ch) for ch in "/\"'"}
        while i < n:
            for ch, k in ahead.items():
                if 0 <= k < i:
                    ahead[ch] = text.find(ch, i)
            j = min((k for k in ahead.values() if k >= 0), default=n)
            if j >= n:
                break
            ch = text[j]
            if ch == "/":
                nxt = text[j + 1 : j + 2]
                if nxt == "/":
                    end = text.find("\n", j)
                    end = n if end < 0 else end
                elif nxt == "*":
                    end = text.find("*/", j + 2)
                    end = n if end < 0 else end + 2
                else:
                    i = j + 1
                    continue
                self.code.append((code_start, j))
                self.comments[j] = end
                i = code_start = end
            elif ch == "'":
                if j > 0 and _is_ident_char(text[j - 1]) and _is_ident_char(text[j + 1 : j + 2] or " ") and not self._is_prefix(j):
                    i = j + 1  # a digit separator: 1'000'000
                    continue
                end = self._char_literal_end(j)
                self.code.append((code_start, self._prefix_start(j)))
                i = code_start = end
            else:
                start = self._prefix_start(j)
                raw = start < j and text[j - 1] == "R"
                literal = self._raw_literal(start, j) if raw else self._literal(start, j)
                self.code.append((code_start, start))
                self.literals[start] = literal
                i = code_start = literal.end
        self.code.append((code_start, n))

    def _prefix_start(self, quote: int) -> int:
        text = self.text
        for prefix in _CPP_STRING_PREFIXES:
            k = quote - len(prefix)
            if k >= 0 and text[k:quote] == prefix and (k == 0 or not _is_ident_char(text[k - 1])):
                return k
        return quote

    def _is_prefix(self, quote: int) -> bool:
        return self._prefix_start(quote) < quote

    def _char_literal_end(self, j: int) -> int:
        text = self.text
        k = j + 1
        while k < len(text) and text[k] not in "'\n":
            k += 2 if text[k] == "\\" else 1
        return min(k + 1, len(text))

    def _literal(self, start: int, quote: int) -> _CppLiteral:
        text = self.text
        # the body ends at the closing quote or at an end of line; a backslash protects the next character
        # (a line splice included); a lone backslash at the very end runs to the end of the text
        k = _CPP_BODY.match(text, quote + 1).end()  # type: ignore[union-attr]
        if text[k : k + 1] == "\\":
            k = len(text)
        return _CppLiteral(start, min(k + 1, len(text)) if text[k : k + 1] == '"' else k, quote + 1, k, raw=False)

    def _raw_literal(self, start: int, quote: int) -> _CppLiteral:
        # R"delim( ... )delim"
        text = self.text
        paren = text.find("(", quote + 1)
        if paren < 0:
            return _CppLiteral(start, len(text), len(text), len(text), raw=True)
        closing = ")" + text[quote + 1 : paren] + '"'
        end = text.find(closing, paren + 1)
        if end < 0:
            return _CppLiteral(start, len(text), paren + 1, len(text), raw=True)
        return _CppLiteral(start, end + len(closing), paren + 1, end, raw=True)

    def skip_blank(self, i: int) -> int:
        """The offset of the next token at or after ``i`` (whitespace, comments and line splices skipped)."""
        text = self.text
        while i < len(text):
            if text[i] in " \t\r\n\f\v":
                i += 1
            elif text[i] == "\\" and text[i + 1 : i + 2] == "\n":
                i += 2
            elif i in self.comments:
                i = self.comments[i]
            else:
                break
        return i


def _cpp_decode(text: str, literal: _CppLiteral) -> tuple[list[str], list[int]]:
    """The characters of a literal and the offset each was written at."""
    if literal.raw or text.find("\\", literal.body, literal.body_end) < 0:
        return list(text[literal.body : literal.body_end]), list(range(literal.body, literal.body_end))
    chars: list[str] = []
    offsets: list[int] = []
    k = literal.body
    end = literal.body_end
    while k < end:
        ch = text[k]
        if ch != "\\":
            chars.append(ch)
            offsets.append(k)
            k += 1
            continue
        esc = text[k + 1 : k + 2]
        if esc == "\n":  # line splice
            k += 2
            continue
        if not esc:  # an unterminated literal ending in a backslash: keep it as written
            chars.append(ch)
            offsets.append(k)
            k += 1
            continue
        if esc in _CPP_SIMPLE_ESCAPES:
            chars.append(_CPP_SIMPLE_ESCAPES[esc])
            width = 2
        elif esc and esc in _OCTAL:
            width = 2
            while width < 4 and k + width < end and text[k + width] in _OCTAL:
                width += 1
            chars.append(chr(int(text[k + 1 : k + width], 8)))
        elif esc == "x":
            width = 2
            while k + width < end and _is_hex(text[k + width]):
                width += 1
            chars.append(chr(min(int(text[k + 2 : k + width], 16), 0x10FFFF)) if width > 2 else "x")
        elif esc in ("u", "U"):
            digits = text[k + 2 : k + 2 + (4 if esc == "u" else 8)]
            if len(digits) == (4 if esc == "u" else 8) and _is_hex(digits) and int(digits, 16) < 0x110000:
                chars.append(chr(int(digits, 16)))
                width = 2 + len(digits)
            else:
                chars.append(esc)
                width = 2
        else:
            # unknown escape: compilers warn and keep the character
            chars.append(esc)
            width = 2
        offsets.append(k)
        k += width
    return chars, offsets


class _LineIndex:
    """Offset -> 1-based (line, column), from the offsets where lines start."""

    def __init__(self, text: str) -> None:
        starts = [0]
        k = text.find("\n")
        while k >= 0:
            starts.append(k + 1)
            k = text.find("\n", k + 1)
        self.starts = starts

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return (line, offset - self.starts[line - 1] + 1)


def _cpp_source(source: SourceFile, text: str) -> None:
    wants_sites = any(word in text for word in _CPP_WORDS)
    if not wants_sites and "pbp:" not in text:
        return
    scan = _CppScan(text)
    where = _LineIndex(text)
    if wants_sites:
        found: list[tuple[int, SchemaSite | Problem]] = []
        for lo, hi in scan.code:
            for callee in _CPP_CALLEES:
                k = text.find(callee, lo, hi)
                while k >= 0:
                    after = k + len(callee)
                    if (k == 0 or not _is_ident_char(text[k - 1])) and not _is_ident_char(text[after : after + 1] or " "):
                        context = _cpp_context(text, k, callee)
                        item = _cpp_call(scan, where, source, k, after, context) if context else None
                        if item is not None:
                            found.append((k, item))
                    k = text.find(callee, after, hi)
        found.sort(key=lambda item: item[0])
        for _, item in found:
            if isinstance(item, SchemaSite):
                source.sites.append(item)
            else:
                source.problems.append(item)
    if "pbp:" in text:
        for start, end in scan.comments.items():
            k = text.find("pbp:", start, end)
            if k < 0:
                continue
            line, column = where(k)  # a block comment can put it on a later line than its start
            directive = parse_directive(text[k:end], line, column)
            if directive is not None:
                source.suppressions.append(directive)


def _cpp_context(text: str, k: int, callee: str) -> str | None:
    """The context of a schema call named ``callee`` at offset ``k``; None when it is not one."""
    if callee == "schema":
        # only torch::schema / c10::schema: a bare `schema(` is too common a name to be sure of
        if text[k - 2 : k] != "::":
            return None
        j = k - 2
        while j > 0 and _is_ident_char(text[j - 1]):
            j -= 1
        return {"torch": CONTEXT_TORCH_SCHEMA, "c10": CONTEXT_C10_SCHEMA}.get(text[j : k - 2])
    if callee == "parseSchema":
        return CONTEXT_JIT_PARSE_SCHEMA
    if callee == "parseSchemaOrName":
        return CONTEXT_JIT_PARSE_SCHEMA_OR_NAME
    return CONTEXT_CPP


def _cpp_call(scan: _CppScan, where: _LineIndex, source: SourceFile, callee_at: int, after_callee: int, context: str) -> SchemaSite | Problem | None:
    """The schema site (or note) of the call whose name ends at ``after_callee``; None if it is not one.

    Reads the first argument up to its ',' or ')' at nesting depth 0. Only string literals at depth 0
    count (in ``m.def(TORCH_SELECTIVE_SCHEMA("..."))`` the literal belongs to the inner call, found on
    its own).
    """
    text = scan.text
    n = len(text)
    k = scan.skip_blank(after_callee)
    if text[k : k + 1] != "(":
        return None
    k = scan.skip_blank(k + 1)
    literals: list[_CppLiteral] = []
    other = template = -1
    depth = tokens = 0
    while True:
        tokens += 1
        if k >= n or tokens > _CPP_MAX_TOKENS:
            return None
        literal = scan.literals.get(k)
        if literal is not None:
            if depth == 0:
                literals.append(literal)
            k = scan.skip_blank(literal.end)
            continue
        ch = text[k]
        if depth == 0 and ch in ",)":
            break
        if ch == ";" or (depth == 0 and ch in "]}"):
            return None  # the statement ended: not a call with a schema argument
        if text[k : k + 2] in _TEMPLATE_OPENERS:
            template = k
            break
        if ch == "#" and _starts_line(text, k):
            # a preprocessor directive between the pieces (#if / #else / #endif): its whole logical line
            other = k if other < 0 else other
            k = _end_of_logical_line(text, k)
        elif _is_ident_char(ch):
            j = k + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            if depth == 0 and other < 0:
                other = k
            k = j
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif depth == 0 and other < 0:
                other = k
            k += 1
        k = scan.skip_blank(k)
    if not literals:
        return None
    span = (where(callee_at)[0], where(k)[0])
    if template >= 0:
        return _template_note(source.path, text, template, where(template), span)
    if other >= 0:
        line, column = where(other)
        shown = _cpp_shown(scan, other)
        if shown.startswith("#") and _starts_line(text, other):
            message = f"cannot read statically: a preprocessor directive ('{shown}') sits between the string literals; not checked"
        else:
            message = f"cannot read statically: the schema text is joined with '{shown}', known only when the file is compiled; not checked"
        return Problem(source.path, line, column, message, "note", "not-static", span=span)
    offsets = array("q")
    chars: list[str] = []
    for literal in literals:
        decoded, at = _cpp_decode(text, literal)
        chars.extend(decoded)
        offsets.extend(at)
    offsets.append(literals[-1].body_end)
    typevars = _cpp_bool_argument(scan, k) if context != CONTEXT_CPP and text[k] == "," else None
    return SchemaSite(source.path, "".join(chars), _OffsetPositions(offsets, where), context, source.lines, span, typevars)


def _starts_line(text: str, k: int) -> bool:
    """Whether only blanks precede offset ``k`` on its line (where '#' opens a directive, not a '#x' stringizing)."""
    j = k
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    return j == 0 or text[j - 1] == "\n"


def _end_of_logical_line(text: str, k: int) -> int:
    """The offset of the newline that ends the (backslash-continued) line holding offset ``k``."""
    while True:
        end = text.find("\n", k)
        if end < 0:
            return len(text)
        if end > 0 and text[end - 1] == "\\":
            k = end + 1
            continue
        return end


def _cpp_shown(scan: _CppScan, k: int) -> str:
    """The unresolved piece at ``k`` as written, for a note: a name with its parenthesized arguments, a
    directive line, or one character; blanks collapsed, cut at 40 characters."""
    text = scan.text
    if text[k] == "#" and _starts_line(text, k):
        end = _end_of_logical_line(text, k)
    elif text[k] == "#":  # a macro parameter turned into a string: #NAME
        end = k + 1
        while end < len(text) and (_is_ident_char(text[end]) or text[end] == "#"):
            end += 1
    elif _is_ident_char(text[k]):
        end = k
        while end < len(text) and (_is_ident_char(text[end]) or text[end : end + 2] == "::"):
            end += 2 if text[end] == ":" else 1
        j = scan.skip_blank(end)
        if text[j : j + 1] == "(":
            depth = 0
            while j < len(text) and j < k + 200:
                literal = scan.literals.get(j)
                if literal is not None:
                    j = literal.end
                    continue
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    end = j
                    break
    else:
        end = k + 1
    shown = " ".join(text[k:end].split())
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _cpp_bool_argument(scan: _CppScan, k: int) -> bool | None:
    """A ``true``/``false`` written as a later argument of the call (``parseSchema(s, false)``,
    ``torch::schema(s, kind, true)``: the allow_typevars flag); None when there is none."""
    text = scan.text
    depth = tokens = 0
    flag: bool | None = None
    k = scan.skip_blank(k + 1)
    while k < len(text) and tokens < _CPP_MAX_TOKENS:
        tokens += 1
        literal = scan.literals.get(k)
        if literal is not None:
            k = scan.skip_blank(literal.end)
            continue
        ch = text[k]
        if ch == ";" or (depth == 0 and ch == ")"):
            break
        if _is_ident_char(ch):
            j = k + 1
            while j < len(text) and _is_ident_char(text[j]):
                j += 1
            if depth == 0 and text[k:j] in ("true", "false"):
                flag = text[k:j] == "true"
            k = j
        else:
            depth += {"(": 1, ")": -1, "[": 1, "]": -1, "{": 1, "}": -1}.get(ch, 0)
            k += 1
        k = scan.skip_blank(k)
    return flag


# ------------------------------------------------------------------------------------------------
# Python: calls found with `ast`; string arguments folded from literals (including implicit
# concatenation and f-strings without fields), `+` of foldable parts and module-level names bound once to
# a foldable value. An argument that holds a literal but cannot be folded (an f-string field, `%`,
# `.format()`, a name bound elsewhere) is a `not-static` note. Character positions come from reading the
# literal's own source text, because `ast` only knows where a whole literal starts.

_LIBRARY_DEFINE_FUNCS = frozenset({"torch.library.define", "torch._library.define"})
_CUSTOM_OP_FUNCS = frozenset(
    {"torch.library.custom_op", "torch._library.custom_ops.custom_op", "torch.library.triton_op", "torch._library.triton.triton_op"}
)
_PARSE_SCHEMA_FUNCS = frozenset({"torch._C.parse_schema"})
_LIBRARY_FACTORIES = frozenset({"Library", "_scoped_library"})
# A file mentions one of these or holds no schema site (checked before paying for ast.parse, which
# costs about 0.4 s per MB: a whole tree of Python is mostly files without a schema).
_PYTHON_WORDS = ("define(", ".define", "custom_op", "triton_op", "parse_schema")

# text and its per-character positions as consecutive parts (no end entry)
_Folded = tuple[str, list[Sequence[tuple[int, int]]]]


def _python_source(source: SourceFile, text: str) -> None:
    if "pbp:" in text:
        source.suppressions.extend(_python_suppressions(text))
    if not any(word in text for word in _PYTHON_WORDS):
        return
    path = source.path
    try:
        with warnings.catch_warnings():
            # the file's own invalid escapes ('\d' in a regex) are its business: Python 3.12 would print a
            # SyntaxWarning for each on our stderr
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        source.problems.append(Problem(path, line, col, f"cannot parse Python source ({exc.msg}); its schemas were not checked", fatal=True))
        return
    except ValueError as exc:  # e.g. NUL bytes in the source
        source.problems.append(Problem(path, 1, 1, f"cannot parse Python source ({exc}); its schemas were not checked", fatal=True))
        return
    except (RecursionError, MemoryError):  # CPython's own parser gives up on very deeply nested expressions
        source.problems.append(Problem(path, 1, 1, "cannot parse Python source (nested too deeply); its schemas were not checked", fatal=True))
        return
    reader = _PythonReader(path, source.lines, tree)
    source.sites.extend(reader.sites)
    source.problems.extend(reader.notes)


def _python_suppressions(text: str) -> list[Suppression]:
    found: list[Suppression] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and "pbp:" in tok.string:
                directive = parse_directive(tok.string, tok.start[0], tok.start[1] + 1)
                if directive is not None:
                    found.append(directive)
    except (tokenize.TokenError, SyntaxError):
        pass  # a file tokenize cannot finish is reported by ast.parse; the comments before the error count
    return found


class _PythonReader:
    def __init__(self, path: str, lines: list[str], tree: ast.Module) -> None:
        self.path = path
        self.lines = lines
        self.aliases: dict[str, str] = {}
        self.constants = _module_constants(tree)
        # One walk collects imports, Library bindings and calls; calls are resolved afterwards, once every
        # import and binding of the file is known.
        calls: list[ast.Call] = []
        bindings: list[ast.AST] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                calls.append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                _add_import_aliases(node, self.aliases)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.withitem, ast.arg)):
                bindings.append(node)
        self.libraries = self._library_bindings(bindings)
        found: list[tuple[tuple[int, int], SchemaSite | Problem]] = []
        for call in calls:
            item = self._call(call)
            if item is not None:
                found.append(((call.lineno, call.col_offset), item))
        found.sort(key=lambda item: item[0])  # ast.walk is breadth-first; report in file order
        self.sites = [item for _, item in found if isinstance(item, SchemaSite)]
        self.notes = [item for _, item in found if isinstance(item, Problem)]

    def _qualified(self, func: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return None
        parts.append(self.aliases.get(func.id, func.id))
        return ".".join(reversed(parts))

    def _is_library_call(self, node: ast.expr) -> bool:
        """``Library(...)`` / ``torch.library.Library(...)`` / ``_scoped_library(...)``, however imported."""
        if not isinstance(node, ast.Call):
            return False
        qualified = self._qualified(node.func) or ""
        return qualified.rpartition(".")[2] in _LIBRARY_FACTORIES

    def _library_bindings(self, nodes: list[ast.AST]) -> set[str]:
        """Dotted names bound to a Library: ``lib = Library(...)``, ``self.lib = ...``, ``with ... as lib``,
        parameters annotated ``Library``."""
        bound: set[str] = set()
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and self._is_library_call(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bound.update(name for name in map(_dotted, targets) if name)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None and self._is_library_call(node.context_expr):
                name = _dotted(node.optional_vars)
                if name:
                    bound.add(name)
            elif isinstance(node, ast.arg) and node.annotation is not None:
                annotation = _dotted(node.annotation) or ""
                if annotation.rpartition(".")[2] == "Library":
                    bound.add(node.arg)
        return bound

    def _is_library(self, receiver: ast.expr) -> bool:
        if self._is_library_call(receiver):
            return True
        name = _dotted(receiver)
        if name is None:
            return False
        # a name bound to a Library in this file, or one named like a library (lib, my_lib, self._LIB):
        # ScriptModule.define(source) and other unrelated .define methods are left alone
        return name in self.libraries or "lib" in name.rpartition(".")[2].lower()

    def _call(self, node: ast.Call) -> SchemaSite | Problem | None:
        qualified = self._qualified(node.func)
        if qualified in _LIBRARY_DEFINE_FUNCS:
            first = node.args[0] if node.args else None
            if first is not None and not any(kw.arg == "qualname" for kw in node.keywords) and self._fold(first, depth=0) is None and not _holds_literal(first, self.constants):
                # the old overload torch.library.define(lib, schema): a whole named schema
                return self._site(node, _argument(node, 1, "schema"), CONTEXT_LIBRARY_DEFINE)
            return self._site(node, _argument(node, 1, "schema"), CONTEXT_TORCH_LIBRARY_DEFINE)
        if qualified in _CUSTOM_OP_FUNCS:
            return self._site(node, _argument(node, None, "schema"), CONTEXT_CUSTOM_OP)
        if qualified in _PARSE_SCHEMA_FUNCS:
            return self._site(node, _argument(node, 0, "schema"), CONTEXT_PARSE_SCHEMA)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "define" and self._is_library(node.func.value):
            # Library.define(schema, alias_analysis="", *, tags=())
            return self._site(node, _argument(node, 0, "schema"), CONTEXT_LIBRARY_DEFINE)
        return None

    def _site(self, call: ast.Call, arg: ast.expr | None, context: str) -> SchemaSite | Problem | None:
        if arg is None:
            return None
        span = (call.lineno, call.end_lineno or call.lineno)
        folded = self._fold(arg, depth=0)
        if folded is None:
            return self._not_static(arg, span)
        text, parts = folded
        positions = _Chunks(parts)
        if len(positions):
            line, col = positions[-1]
            end = (line, col + 1)
        else:
            end = self._start(arg)
        return SchemaSite(self.path, text, _Chunks([*positions.parts, [end]]), context, self.lines, span)

    def _not_static(self, arg: ast.expr, span: tuple[int, int]) -> Problem | None:
        """A note for an argument that holds a string literal but cannot be folded; None for one that
        holds none (a name bound in a function, a parameter: there is nothing to read)."""
        if not _holds_literal(arg, self.constants):
            return None
        part = self._unfoldable_part(arg, depth=0)
        if isinstance(part, ast.FormattedValue):
            what = f"the f-string field {{{_shown(part.value)}}}"
            at = part.value
        elif isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mod):
            what, at = "'%' formatting", part
        elif isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr == "format":
            what, at = "str.format()", part
        else:
            what, at = f"'{_shown(part)}'", part
        line, column = self._start(at)
        message = f"cannot read statically: the schema text is built with {what}, known only when the code runs; not checked"
        return Problem(self.path, line, column, message, "note", "not-static", span=span)

    def _unfoldable_part(self, node: ast.expr, depth: int) -> ast.expr:
        """The first part, left to right, that stops :meth:`_fold` (the node itself if nothing smaller)."""
        if depth > 50:
            return node
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if self._fold(node.left, depth + 1) is None:
                return self._unfoldable_part(node.left, depth + 1)
            if self._fold(node.right, depth + 1) is None:
                return self._unfoldable_part(node.right, depth + 1)
        if isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    return value
        return node

    def _start(self, node: ast.expr) -> tuple[int, int]:
        """1-based (line, character column) of a node (``ast`` counts columns in UTF-8 bytes)."""
        line = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        col = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", errors="replace"))
        return (node.lineno, col + 1)

    def _fold(self, node: ast.expr, depth: int) -> _Folded | None:
        if depth > 50:  # a chain of names or '+' this long is not a schema literal worth following
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self._literal(node, node.value)
        if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values):
            # an f-string without fields (possibly joined with plain literals) is a constant string
            return self._literal(node, "".join(v.value for v in node.values))  # type: ignore[attr-defined]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._fold(node.left, depth + 1)
            right = self._fold(node.right, depth + 1) if left is not None else None
            if left is None or right is None:
                return None
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self._fold(self.constants[node.id], depth + 1)
        return None

    def _literal(self, node: ast.expr, value: str) -> _Folded:
        """Decode the literal's string tokens (implicit concatenation included) with positions.

        Only the literal's own source is read; each token's characters are mapped back to the file and
        the decoded text must equal ``ast``'s value (else every character points at the literal's start
        rather than at a wrong column).
        """
        start_line, start_col = self._start(node)
        end_line = node.end_lineno or start_line
        if node.end_col_offset is None or not 0 < start_line <= end_line <= len(self.lines):
            return value, [_Run(start_line, start_col, len(value), 0)]
        segment = self.lines[start_line - 1 : end_line]
        segment[-1] = segment[-1].encode("utf-8")[: node.end_col_offset].decode("utf-8", errors="replace")
        segment[0] = segment[0][start_col - 1 :]
        chars: list[str] = []
        parts: list[Sequence[tuple[int, int]]] = []
        for token, row, col in _string_tokens(segment):
            line = start_line + row
            column = col + 1 + (start_col - 1 if row == 0 else 0)
            decoded = _decode_python_string(token, line, column)
            if decoded is None:
                break
            chars.extend(decoded[0])
            parts.append(decoded[1])
        if "".join(chars) != value:
            return value, [_Run(start_line, start_col, len(value), 0)]
        return value, parts


def _string_tokens(segment: list[str]) -> list[tuple[str, int, int]]:
    """The string literal tokens of the source of one (implicitly concatenated) literal, with their
    0-based row and column in ``segment``. Between tokens only blanks, comments, line continuations and
    parentheses can appear. Read by hand so that f-strings come out the same on every Python version
    (3.12 tokenizes them into pieces)."""
    src = "\n".join(segment)
    starts = [0]
    for line in segment[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    tokens: list[tuple[str, int, int]] = []
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        if ch in " \t\f\r\n()":
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == "#":
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        j = i
        while j < n and src[j].isalpha():
            j += 1
        if j >= n or src[j] not in "'\"":
            break  # not a string token: stop, the caller's cross-check will notice
        quote = src[j : j + 3] if src[j : j + 3] in ("'''", '"""') else src[j]
        k = _PY_BODIES[quote].match(src, j + len(quote)).end()  # type: ignore[union-attr]
        end = min(k + len(quote), n)
        row = bisect.bisect_right(starts, i) - 1
        tokens.append((src[i:end], row, i - starts[row]))
        i = end
    return tokens


# The inside of a Python string token for each quote (Python lexing, not schema text): up to the closing
# quote, a backslash protecting the next character; single-quoted bodies stop at an end of line.
_PY_BODIES = {
    "'": re.compile(r"(?:[^'\\\n]+|\\[\s\S])*"),
    '"': re.compile(r'(?:[^"\\\n]+|\\[\s\S])*'),
    "'''": re.compile(r"(?:[^'\\]+|\\[\s\S]|'(?!''))*"),
    '"""': re.compile(r'(?:[^"\\]+|\\[\s\S]|"(?!""))*'),
}


def _holds_literal(node: ast.expr, constants: dict[str, ast.expr]) -> bool:
    """Whether an expression holds a string literal (directly or through a module constant)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr) or (isinstance(sub, ast.Constant) and isinstance(sub.value, str)):
            return True
        if isinstance(sub, ast.Name) and sub.id in constants:
            value = constants[sub.id]
            if isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                return True
    return False


def _shown(node: ast.expr) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, TypeError, RecursionError):  # pragma: no cover - ast.unparse handles parsed trees
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _argument(node: ast.Call, index: int | None, keyword: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == keyword:
            return kw.value
    if index is not None and index < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[: index + 1]):
        return node.args[index]
    return None


def _add_import_aliases(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    """Record local name -> dotted origin for one import (scopes are not distinguished)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                aliases[alias.asname] = alias.name
    elif node.module and node.level == 0:
        for alias in node.names:
            aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound exactly once by a plain assignment (``NAME = <expr>``)."""
    bound: dict[str, ast.expr] = {}
    seen: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                if target.id in seen:
                    bound.pop(target.id, None)
                else:
                    seen.add(target.id)
                    if value is not None and len(targets) == 1:
                        bound[target.id] = value
    return bound


_PY_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _decode_python_string(token: str, row: int, col: int) -> tuple[Sequence[str], Sequence[tuple[int, int]]] | None:
    """Decode one Python string token written at (row, col); ``None`` for bytes and for f-strings with
    fields (an f-string without fields decodes like a plain string, ``{{`` and ``}}`` being ``{`` and ``}``)."""
    q = 0
    while q < len(token) and token[q] not in "'\"":
        q += 1
    prefix = token[:q].lower()
    if "b" in prefix:
        return None
    fstring = "f" in prefix
    raw = "r" in prefix
    quote = token[q : q + 3] if token[q : q + 3] in ("'''", '"""') else token[q]
    body_start = q + len(quote)
    body_end = len(token) - len(quote)
    body = token[body_start:body_end]
    if "\\" not in body and "\n" not in body and not (fstring and ("{" in body or "}" in body)):
        # the common case: every character stands for itself, on one line
        return body, _Run(row, col + body_start, len(body))
    # positions of each character of the token in the file
    line, column = row, col
    where: list[tuple[int, int]] = []
    for ch in token:
        where.append((line, column))
        if ch == "\n":
            line += 1
            column = 1
        else:
            column += 1
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    i = body_start
    while i < body_end:
        ch = token[i]
        if fstring and ch in "{}":
            if token[i + 1 : i + 2] != ch:
                return None  # a field: not a constant string
            chars.append(ch)
            positions.append(where[i])
            i += 2
            continue
        if ch != "\\" or raw:
            if raw and ch == "\\" and i + 1 < body_end:
                # a raw string keeps the backslash and the character it protects
                chars.append(ch)
                positions.append(where[i])
                chars.append(token[i + 1])
                positions.append(where[i + 1])
                i += 2
                continue
            chars.append(ch)
            positions.append(where[i])
            i += 1
            continue
        esc = token[i + 1]
        pos = where[i]
        if esc == "\n":
            i += 2
        elif esc in _PY_SIMPLE_ESCAPES:
            chars.append(_PY_SIMPLE_ESCAPES[esc])
            positions.append(pos)
            i += 2
        elif esc in "01234567":
            j = i + 1
            while j < i + 4 and j < body_end and token[j] in "01234567":
                j += 1
            chars.append(chr(int(token[i + 1 : j], 8)))
            positions.append(pos)
            i = j
        elif esc in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[esc]
            chars.append(chr(int(token[i + 2 : i + 2 + width], 16)))
            positions.append(pos)
            i += 2 + width
        elif esc == "N":
            close = token.index("}", i)
            chars.append(unicodedata.lookup(token[i + 3 : close]))
            positions.append(pos)
            i = close + 1
        else:
            chars.append("\\")
            positions.append(pos)
            chars.append(esc)
            positions.append(where[i + 1])
            i += 2
    return chars, positions
