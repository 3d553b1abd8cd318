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
from collections.abc import Iterator, Sequence
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
    positions: tuple[tuple[int, int], ...]
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
# C++: a small lexer that knows comments, character literals, (raw) string literals with prefixes,
# numbers and identifiers, enough to find `def(` / `TORCH_SELECTIVE_SCHEMA(` followed by one or more
# adjacent string literals. Escapes are decoded as a C++ compiler would.

_CPP_CALLEES = frozenset({"def", "TORCH_SELECTIVE_SCHEMA"})
_CPP_STRING_PREFIXES = frozenset({"L", "u8", "u", "U", "R", "LR", "u8R", "uR", "UR"})
_CPP_SIMPLE_ESCAPES = {"'": "'", '"': '"', "?": "?", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(slots=True)
class _CppToken:
    kind: str  # "ident", "string", "punct", "other"
    value: str  # identifier text / punctuation; for strings the decoded text
    positions: list[tuple[int, int]]  # strings: per decoded char; others: [start]
    end: tuple[int, int]  # position just after the token's last character


class _Cursor:
    """Walks a text keeping the 1-based (line, column) of the current character."""

    __slots__ = ("text", "i", "line", "col")

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.col = 1

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def pos(self) -> tuple[int, int]:
        return (self.line, self.col)

    def advance(self, n: int = 1) -> None:
        for _ in range(n):
            if self.i >= len(self.text):
                return
            if self.text[self.i] == "\n":
                self.line += 1
                self.col = 1
            else:
                self.col += 1
            self.i += 1


def _cpp_tokens(text: str) -> Iterator[_CppToken]:
    cur = _Cursor(text)
    while cur.i < len(text):
        ch = cur.peek()
        if ch in " \t\r\n\f\v":
            cur.advance()
        elif ch == "\\" and cur.peek(1) == "\n":
            cur.advance(2)
        elif ch == "/" and cur.peek(1) == "/":
            while cur.i < len(text) and cur.peek() != "\n":
                cur.advance()
        elif ch == "/" and cur.peek(1) == "*":
            cur.advance(2)
            while cur.i < len(text) and not (cur.peek() == "*" and cur.peek(1) == "/"):
                cur.advance()
            cur.advance(2)
        elif ch.isalpha() or ch == "_":
            start = cur.pos()
            j = cur.i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[cur.i : j]
            if j < len(text) and text[j] in "\"'" and word in _CPP_STRING_PREFIXES | {"u8", "L", "u", "U"}:
                cur.advance(j - cur.i)
                if text[j] == "'":
                    _cpp_skip_char_literal(cur)
                    continue
                yield _cpp_string(cur, raw=word.endswith("R"), start=start)
                continue
            cur.advance(j - cur.i)
            yield _CppToken("ident", word, [start], cur.pos())
        elif ch == '"':
            yield _cpp_string(cur, raw=False, start=cur.pos())
        elif ch == "'":
            _cpp_skip_char_literal(cur)
        elif ch.isdigit() or (ch == "." and cur.peek(1).isdigit()):
            # pp-number: digits, letters, '.', digit separators and signed exponents
            start = cur.pos()
            while cur.i < len(text):
                c = cur.peek()
                if c in "eEpP" and cur.peek(1) in "+-":
                    cur.advance(2)
                elif c.isalnum() or c in "._" or (c == "'" and cur.peek(1).isalnum()):
                    cur.advance()
                else:
                    break
            yield _CppToken("other", "", [start], cur.pos())
        else:
            start = cur.pos()
            cur.advance()
            yield _CppToken("punct", ch, [start], cur.pos())


def _cpp_skip_char_literal(cur: _Cursor) -> None:
    cur.advance()  # opening quote
    while cur.i < len(cur.text) and cur.peek() not in "'\n":
        cur.advance(2 if cur.peek() == "\\" else 1)
    cur.advance()


def _cpp_string(cur: _Cursor, *, raw: bool, start: tuple[int, int]) -> _CppToken:
    chars: list[str] = []
    positions: list[tuple[int, int]] = []
    cur.advance()  # opening quote
    text = cur.text
    if raw:
        # R"delim( ... )delim"
        delim_start = cur.i
        while cur.i < len(text) and cur.peek() not in "(\n\"":
            cur.advance()
        delim = text[delim_start : cur.i]
        cur.advance()  # '('
        closing = ")" + delim + '"'
        while cur.i < len(text) and text.startswith(closing, cur.i) is False:
            chars.append(cur.peek())
            positions.append(cur.pos())
            cur.advance()
        end = cur.pos()
        cur.advance(len(closing))
        return _CppToken("string", "".join(chars), positions, end)
    while cur.i < len(text):
        ch = cur.peek()
        if ch == '"' or ch == "\n":
            break
        pos = cur.pos()
        if ch != "\\":
            chars.append(ch)
            positions.append(pos)
            cur.advance()
            continue
        esc = cur.peek(1)
        if esc == "\n":  # line splice
            cur.advance(2)
        elif esc in _CPP_SIMPLE_ESCAPES:
            chars.append(_CPP_SIMPLE_ESCAPES[esc])
            positions.append(pos)
            cur.advance(2)
        elif esc in "01234567" and esc != "":
            digits = ""
            while len(digits) < 3 and cur.peek(1 + len(digits)) in tuple("01234567"):
                digits += cur.peek(1 + len(digits))
            chars.append(chr(int(digits, 8)))
            positions.append(pos)
            cur.advance(1 + len(digits))
        elif esc == "x":
            digits = ""
            while cur.peek(2 + len(digits)) != "" and _is_hex(cur.peek(2 + len(digits))):
                digits += cur.peek(2 + len(digits))
            if digits:
                chars.append(chr(min(int(digits, 16), 0x10FFFF)))
                positions.append(pos)
            cur.advance(2 + len(digits))
        elif esc in ("u", "U"):
            width = 4 if esc == "u" else 8
            digits = text[cur.i + 2 : cur.i + 2 + width]
            if len(digits) == width and _is_hex(digits) and int(digits, 16) < 0x110000:
                chars.append(chr(int(digits, 16)))
                positions.append(pos)
                cur.advance(2 + width)
            else:
                chars.append(esc)
                positions.append(pos)
                cur.advance(2)
        else:
            # unknown escape: compilers warn and keep the character
            chars.append(esc)
            positions.append(pos)
            cur.advance(2)
    end = cur.pos()
    cur.advance()  # closing quote
    return _CppToken("string", "".join(chars), positions, end)


def _cpp_sites(path: str, text: str, lines: list[str]) -> list[SchemaSite]:
    if "def" not in text and "TORCH_SELECTIVE_SCHEMA" not in text:
        return []
    tokens = list(_cpp_tokens(text))
    sites = []
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.value not in _CPP_CALLEES:
            continue
        if i + 2 >= len(tokens) or tokens[i + 1].value != "(" or tokens[i + 1].kind != "punct":
            continue
        j = i + 2
        chars: list[str] = []
        positions: list[tuple[int, int]] = []
        end = (0, 0)
        while j < len(tokens) and tokens[j].kind == "string":
            chars.append(tokens[j].value)
            positions.extend(tokens[j].positions)
            end = tokens[j].end
            j += 1
        if j == i + 2:
            continue
        positions.append(end)
        sites.append(SchemaSite(path, "".join(chars), tuple(positions), CONTEXT_CPP, lines))
    return sites


# ------------------------------------------------------------------------------------------------
# Python: calls found with `ast`; string arguments folded from literals (including implicit
# concatenation), `+` of foldable parts and module-level names bound once to a foldable value.
# Character positions come from `tokenize`, because `ast` only knows where a whole literal starts.

_LIBRARY_DEFINE_FUNCS = frozenset({"torch.library.define", "torch._library.define"})
_CUSTOM_OP_FUNCS = frozenset(
    {"torch.library.custom_op", "torch._library.custom_ops.custom_op", "torch.library.triton_op", "torch._library.triton.triton_op"}
)
_PARSE_SCHEMA_FUNCS = frozenset({"torch._C.parse_schema"})

_Folded = tuple[str, tuple[tuple[int, int], ...]]  # text and per-character positions (no end entry)


def _python_sites(path: str, text: str, lines: list[str]) -> tuple[list[SchemaSite], list[Problem]]:
    if "define" not in text and "custom_op" not in text and "triton_op" not in text and "parse_schema" not in text:
        return [], []
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        return [], [Problem(path, line, col, f"cannot read Python source: {exc.msg}")]
    except ValueError as exc:  # e.g. NUL bytes in the source
        return [], [Problem(path, 1, 1, f"cannot read Python source: {exc}")]
    try:
        strings = _python_string_tokens(text)
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - ast accepted the text
        strings = {}
    reader = _PythonReader(path, lines, strings, tree)
    return reader.sites, []


def _python_string_tokens(text: str) -> dict[tuple[int, int], tokenize.TokenInfo]:
    """STRING tokens by their (line, 0-based character column) start."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING:
            found[tok.start] = tok
    return found


class _PythonReader:
    def __init__(self, path: str, lines: list[str], strings: dict[tuple[int, int], tokenize.TokenInfo], tree: ast.Module) -> None:
        self.path = path
        self.lines = lines
        self.strings = strings
        self.string_starts = sorted(strings)
        self.aliases = _import_aliases(tree)
        self.constants = _module_constants(tree)
        found: list[tuple[tuple[int, int], SchemaSite]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                site = self._call(node)
                if site is not None:
                    found.append(((node.lineno, node.col_offset), site))
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

    def _call(self, node: ast.Call) -> SchemaSite | None:
        qualified = self._qualified(node.func)
        if qualified in _LIBRARY_DEFINE_FUNCS:
            return self._site(_argument(node, 1, "schema"), CONTEXT_TORCH_LIBRARY_DEFINE)
        if qualified in _CUSTOM_OP_FUNCS:
            return self._site(_argument(node, None, "schema"), CONTEXT_CUSTOM_OP)
        if qualified in _PARSE_SCHEMA_FUNCS:
            return self._site(_argument(node, 0, "schema"), CONTEXT_PARSE_SCHEMA)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "define":
            # Library.define(schema, alias_analysis="", *, tags=()) on any receiver that is not the module
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
        """Decode the literal's STRING tokens (implicit concatenation included) with positions."""
        start_line, start_col = self._start(node)
        end_line = node.end_lineno or start_line
        end_col = start_col
        if node.end_col_offset is not None and 0 < end_line <= len(self.lines):
            line = self.lines[end_line - 1]
            end_col = len(line.encode("utf-8")[: node.end_col_offset].decode("utf-8", errors="replace")) + 1
        chars: list[str] = []
        positions: list[tuple[int, int]] = []
        first = bisect.bisect_left(self.string_starts, (start_line, start_col - 1))
        for row, col in self.string_starts[first:]:
            if (row, col + 1) >= (end_line, end_col):
                break
            tok = self.strings[(row, col)]
            decoded = _decode_python_string(tok.string, row, col + 1)
            if decoded is None:
                break
            chars.extend(decoded[0])
            positions.extend(decoded[1])
        value = node.value
        if "".join(chars) != value:
            # Our decoding disagrees with Python's (should not happen): keep Python's text and point
            # every character at the start of the literal rather than at a wrong column.
            return value, tuple((start_line, start_col) for _ in value)
        return value, tuple(positions)


def _argument(node: ast.Call, index: int | None, keyword: str) -> ast.expr | None:
    for kw in node.keywords:
        if kw.arg == keyword:
            return kw.value
    if index is not None and index < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[: index + 1]):
        return node.args[index]
    return None


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted origin for every import in the module (scopes are not distinguished)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


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
