"""YAML: the ``func:`` entries of files shaped like ``native_functions.yaml``.

Only the forms such files use are read: plain scalars (folded over more-indented continuation lines, a
``' #'`` starts a comment), and single- or double-quoted scalars on one line. Anything else is reported
rather than guessed at. A YAML file is read as schemas only when it has that shape: at least one
``func:`` value with an argument list and a ``->``. Kernel lists (``- func: int1mm`` / ``file:
int1mm.metal``) and other YAML that happens to use the key are left alone. This is a line scanner, not a
YAML parser: no YAML library is imported and nothing is resolved (anchors, tags).

Imports: :mod:`.._contexts` and :mod:`._model` only.
"""

from __future__ import annotations

from .._contexts import CONTEXT_YAML
from ._model import Problem, SchemaSite, SourceFile, is_hex, parse_directive

__all__ = ["yaml_source"]


def yaml_source(source: SourceFile) -> None:
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
                    if len(digits) != _YAML_HEX[esc] or not is_hex(digits):
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
