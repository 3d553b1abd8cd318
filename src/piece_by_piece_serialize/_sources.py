"""Find operator-schema strings in files and map every character back to where it was written.

The command line checks schemas where people write them: plain text (one schema per line), Python
sources (``torch.library.define``, ``Library.define``/``lib.define``, ``custom_op(..., schema=...)``),
C++ sources (string literals passed to ``def(`` and ``TORCH_SELECTIVE_SCHEMA(``) and YAML ``func:``
entries. This module reads those *container* languages only; it never looks inside a schema (that is
the schema grammar's job). Each schema comes out as a :class:`SchemaSite`: the decoded text exactly as
torch would receive it, plus, for every character of that text, the 1-based line and column in the
original file where the character (or the escape sequence that produced it) was written. That map is
what lets a caret land under the right column of the *original* file even after C++ adjacent literals
were joined, escapes decoded or Python ``+`` concatenations folded.

Invariants: reading never executes or imports anything (Python is read with ``ast`` and ``tokenize``,
string escapes are decoded here by hand and cross-checked against ``ast``'s own value); a site's
``positions`` has ``len(text) + 1`` entries (the last one is just past the final character, where an
"end of input" error points); unreadable constructs become :class:`Problem` records, never exceptions.
"""

from __future__ import annotations

import ast
import bisect
import io
import tokenize
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

# How a file is read, chosen from its suffix; anything else given explicitly is read as plain text.
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
CPP_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl"})
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
TEXT_SUFFIXES = frozenset({".schema", ".schemas"})

# Contexts: where a schema was found decides how torch will parse it.
CONTEXT_TEXT = "text"
CONTEXT_YAML = "yaml"
CONTEXT_CPP = "cpp"  # TORCH_LIBRARY m.def / TORCH_SELECTIVE_SCHEMA: type variables are off
CONTEXT_LIBRARY_DEFINE = "Library.define"  # typevars off, full name optional
CONTEXT_TORCH_LIBRARY_DEFINE = "torch.library.define"  # nameless "(...) -> ..." schema, typevars off
CONTEXT_CUSTOM_OP = "custom_op"  # nameless schema, validated with typevars on, defined with them off
CONTEXT_PARSE_SCHEMA = "parse_schema"  # torch._C.parse_schema: typevars on

# Contexts whose text torch defines through the dispatcher, where type variables are rejected.
TYPEVARS_OFF = frozenset({CONTEXT_CPP, CONTEXT_LIBRARY_DEFINE, CONTEXT_TORCH_LIBRARY_DEFINE, CONTEXT_CUSTOM_OP})
# Contexts whose text is a schema without the operator name.
NAMELESS = frozenset({CONTEXT_TORCH_LIBRARY_DEFINE, CONTEXT_CUSTOM_OP})

__all__ = [
    "Problem",
    "SchemaSite",
    "kind_for_path",
    "read_sites",
]


@dataclass(frozen=True, slots=True)
class SchemaSite:
    """One schema string found in a file.

    ``positions[i]`` is the (line, column), both 1-based, in the original file of ``text[i]``;
    ``positions[len(text)]`` is the place just after the last character. ``lines`` are the file's lines,
    shared by every site of the file, for printing the source line under a finding.
    """

    path: str
    text: str
    positions: Sequence[tuple[int, int]]
    context: str
    lines: Sequence[str]

    def where(self, offset: int) -> tuple[int, int]:
        """The original (line, column) of the character at ``offset`` in :attr:`text` (clamped)."""
        return self.positions[max(0, min(offset, len(self.text)))]


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a file that stops schemas from being read (a Python syntax error, an odd YAML form)."""

    path: str
    line: int
    column: int
    message: str
    severity: str = "error"


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


def read_sites(path: str, text: str, kind: str) -> tuple[list[SchemaSite], list[Problem]]:
    """Every schema site of a file of the given kind, in file order, and the problems met while reading."""
    lines = split_lines(text)
    if kind == "python":
        return _python_sites(path, text, lines)
    if kind == "cpp":
        return _cpp_sites(path, text, lines), []
    if kind == "yaml":
        return _yaml_sites(path, lines)
    return _text_sites(path, lines), []


# ------------------------------------------------------------------------------------------------
# Plain text: one schema per line; blank lines and lines whose first visible character is '#' skipped.


def _text_sites(path: str, lines: list[str]) -> list[SchemaSite]:
    sites = []
    for lineno, line in enumerate(lines, 1):
        start = len(line) - len(line.lstrip())
        body = line[start:].rstrip()
        if not body or body[0] == "#":
            continue
        positions = tuple((lineno, col) for col in range(start + 1, start + len(body) + 2))
        sites.append(SchemaSite(path, body, positions, CONTEXT_TEXT, lines))
    return sites


# ------------------------------------------------------------------------------------------------
# YAML: `func:` entries as in native_functions.yaml. Only the forms such files use are read: plain
# scalars (folded over more-indented continuation lines, a ' #' starts a comment), and single- or
# double-quoted scalars on one line. Anything else is reported rather than guessed at.


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
                sites.append(SchemaSite(path, text, positions, CONTEXT_YAML, lines))
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
        sites.append(SchemaSite(path, "".join(chars), tuple(positions_list), CONTEXT_YAML, lines))
    return sites, problems


def _skip_blanks(line: str, j: int) -> int:
    while j < len(line) and line[j] in " \t":
        j += 1
    return j


def _yaml_plain_line(line: str, start: int, lineno: int, chars: list[str], positions: list[tuple[int, int]]) -> None:
    end = len(line)
    j = start
    while j < len(line):
        # ' #' (a blank then '#') starts a comment in a plain scalar; '#' glued to text does not
        if line[j] == "#" and j > start and line[j - 1] in " \t":
            end = j
            break
        j += 1
    while end > start and line[end - 1] in " \t":
        end -= 1
    for col in range(start, end):
        chars.append(line[col])
        positions.append((lineno, col + 1))


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
# C++: a scanner that knows comments, character literals and (raw) string literals with prefixes,
# enough to find `def(` / `TORCH_SELECTIVE_SCHEMA(` followed by one or more adjacent string literals.
# Escapes are decoded as a C++ compiler would. The scanner jumps with str.find between the few
# characters that matter ('/', quotes) because real trees hold thousands of large headers; line and
# column are computed only for the literals that are kept.

_CPP_CALLEES = ("def", "TORCH_SELECTIVE_SCHEMA")
_CPP_STRING_PREFIXES = ("u8R", "LR", "uR", "UR", "R", "u8", "L", "u", "U")  # longest first
_CPP_SIMPLE_ESCAPES = {"'": "'", '"': '"', "?": "?", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_OCTAL = "01234567"


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
        while i < n:
            # the next character that can open a comment or a literal
            j = min((k for k in (text.find("/", i), text.find('"', i), text.find("'", i)) if k >= 0), default=n)
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
        k = quote + 1
        while k < len(text) and text[k] not in '"\n':
            k += 2 if text[k] == "\\" else 1
        k = min(k, len(text))
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
    if literal.raw:
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


def _cpp_sites(path: str, text: str, lines: list[str]) -> list[SchemaSite]:
    if "def" not in text and "TORCH_SELECTIVE_SCHEMA" not in text:
        return []
    scan = _CppScan(text)
    where = _LineIndex(text)
    sites = []
    for lo, hi in scan.code:
        for callee in _CPP_CALLEES:
            k = text.find(callee, lo, hi)
            while k >= 0:
                after = k + len(callee)
                if (k == 0 or not _is_ident_char(text[k - 1])) and not _is_ident_char(text[after : after + 1] or " "):
                    site = _cpp_call(scan, where, path, lines, after)
                    if site is not None:
                        sites.append((k, site))
                k = text.find(callee, after, hi)
    sites.sort(key=lambda item: item[0])
    return [site for _, site in sites]


def _cpp_call(scan: _CppScan, where: _LineIndex, path: str, lines: list[str], after_callee: int) -> SchemaSite | None:
    text = scan.text
    k = scan.skip_blank(after_callee)
    if text[k : k + 1] != "(":
        return None
    k = scan.skip_blank(k + 1)
    if k not in scan.literals:
        return None
    chars: list[str] = []
    offsets: list[int] = []
    end = k
    while k in scan.literals:  # adjacent literals are one string
        literal = scan.literals[k]
        decoded, at = _cpp_decode(text, literal)
        chars.extend(decoded)
        offsets.extend(at)
        end = literal.body_end
        k = scan.skip_blank(literal.end)
    positions = tuple(where(o) for o in offsets) + (where(end),)
    return SchemaSite(path, "".join(chars), positions, CONTEXT_CPP, lines)


# ------------------------------------------------------------------------------------------------
# Python: calls found with `ast`; string arguments folded from literals (including implicit
# concatenation), `+` of foldable parts and module-level names bound once to a foldable value.
# Character positions come from `tokenize`, because `ast` only knows where a whole literal starts.

_LIBRARY_DEFINE_FUNCS = frozenset({"torch.library.define", "torch._library.define"})
_CUSTOM_OP_FUNCS = frozenset(
    {"torch.library.custom_op", "torch._library.custom_ops.custom_op", "torch.library.triton_op", "torch._library.triton.triton_op"}
)
_PARSE_SCHEMA_FUNCS = frozenset({"torch._C.parse_schema"})
_LIBRARY_FACTORIES = frozenset({"Library", "_scoped_library"})
# A file mentions one of these or holds no schema site (checked before paying for ast.parse).
_PYTHON_WORDS = ("define(", ".define", "custom_op", "triton_op", "parse_schema")

_Folded = tuple[str, tuple[tuple[int, int], ...]]  # text and per-character positions (no end entry)


def _python_sites(path: str, text: str, lines: list[str]) -> tuple[list[SchemaSite], list[Problem]]:
    if not any(word in text for word in _PYTHON_WORDS):
        return [], []
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        return [], [Problem(path, line, col, f"cannot read Python source ({exc.msg}); its schemas were not checked", "warning")]
    except ValueError as exc:  # e.g. NUL bytes in the source
        return [], [Problem(path, 1, 1, f"cannot read Python source ({exc}); its schemas were not checked", "warning")]
    except RecursionError:  # CPython's own parser gives up on very deeply nested expressions
        return [], [Problem(path, 1, 1, "cannot read Python source (nested too deeply); its schemas were not checked", "warning")]
    reader = _PythonReader(path, lines, tree)
    return reader.sites, []


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
        found: list[tuple[tuple[int, int], SchemaSite]] = []
        for call in calls:
            site = self._call(call)
            if site is not None:
                found.append(((call.lineno, call.col_offset), site))
        found.sort(key=lambda item: item[0])  # ast.walk is breadth-first; report in file order
        self.sites = [site for _, site in found]

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

    def _call(self, node: ast.Call) -> SchemaSite | None:
        qualified = self._qualified(node.func)
        if qualified in _LIBRARY_DEFINE_FUNCS:
            first = node.args[0] if node.args else None
            if first is not None and not any(kw.arg == "qualname" for kw in node.keywords) and self._fold(first, depth=0) is None:
                # the old overload torch.library.define(lib, schema): a whole named schema
                return self._site(_argument(node, 1, "schema"), CONTEXT_LIBRARY_DEFINE)
            return self._site(_argument(node, 1, "schema"), CONTEXT_TORCH_LIBRARY_DEFINE)
        if qualified in _CUSTOM_OP_FUNCS:
            return self._site(_argument(node, None, "schema"), CONTEXT_CUSTOM_OP)
        if qualified in _PARSE_SCHEMA_FUNCS:
            return self._site(_argument(node, 0, "schema"), CONTEXT_PARSE_SCHEMA)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "define" and self._is_library(node.func.value):
            # Library.define(schema, alias_analysis="", *, tags=())
            return self._site(_argument(node, 0, "schema"), CONTEXT_LIBRARY_DEFINE)
        return None

    def _site(self, arg: ast.expr | None, context: str) -> SchemaSite | None:
        if arg is None:
            return None
        folded = self._fold(arg, depth=0)
        if folded is None:
            return None
        text, positions = folded
        if positions:
            line, col = positions[-1]
            end = (line, col + 1)
        else:
            end = self._start(arg)
        return SchemaSite(self.path, text, positions + (end,), context, self.lines)

    def _start(self, node: ast.expr) -> tuple[int, int]:
        """1-based (line, character column) of a node (``ast`` counts columns in UTF-8 bytes)."""
        line = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        col = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", errors="replace"))
        return (node.lineno, col + 1)

    def _fold(self, node: ast.expr, depth: int) -> _Folded | None:
        if depth > 50:  # a chain of names or '+' this long is not a schema literal worth following
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self._literal(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._fold(node.left, depth + 1)
            right = self._fold(node.right, depth + 1) if left is not None else None
            if left is None or right is None:
                return None
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self._fold(self.constants[node.id], depth + 1)
        return None

    def _literal(self, node: ast.Constant) -> _Folded:
        """Decode the literal's STRING tokens (implicit concatenation included) with positions.

        Only the literal's own source is tokenized, wrapped in parentheses so that a concatenation over
        several lines tokenizes on its own; token positions are shifted back to the file's.
        """
        start_line, start_col = self._start(node)
        value = node.value
        end_line = node.end_lineno or start_line
        if node.end_col_offset is None or not 0 < start_line <= end_line <= len(self.lines):
            return value, tuple((start_line, start_col) for _ in value)
        segment = self.lines[start_line - 1 : end_line]
        segment[-1] = segment[-1].encode("utf-8")[: node.end_col_offset].decode("utf-8", errors="replace")
        segment[0] = segment[0][start_col - 1 :]
        chars: list[str] = []
        positions: list[tuple[int, int]] = []
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO("(" + "\n".join(segment) + ")").readline))
        except (tokenize.TokenError, SyntaxError):
            tokens = []
        for tok in tokens:
            if tok.type != tokenize.STRING:
                continue
            row, col = tok.start
            line = start_line + row - 1
            column = col + 1 + (start_col - 2 if row == 1 else 0)  # the '(' we added shifts line 1 by one
            decoded = _decode_python_string(tok.string, line, column)
            if decoded is None:
                break
            chars.extend(decoded[0])
            positions.extend(decoded[1])
        if "".join(chars) != value:
            # Our decoding disagrees with Python's (should not happen): keep Python's text and point
            # every character at the start of the literal rather than at a wrong column.
            return value, tuple((start_line, start_col) for _ in value)
        return value, tuple(positions)


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


def _decode_python_string(token: str, row: int, col: int) -> tuple[list[str], list[tuple[int, int]]] | None:
    """Decode one Python STRING token written at (row, col); ``None`` for bytes and f-strings."""
    q = 0
    while q < len(token) and token[q] not in "'\"":
        q += 1
    prefix = token[:q].lower()
    if "b" in prefix or "f" in prefix:
        return None
    raw = "r" in prefix
    quote = token[q : q + 3] if token[q : q + 3] in ("'''", '"""') else token[q]
    body_start = q + len(quote)
    body_end = len(token) - len(quote)
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
