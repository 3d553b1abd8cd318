"""Python sources: the schema arguments of ``torch.library.define``, ``Library.define``/``lib.define``,
``custom_op(..., schema=...)`` (and ``triton_op``) and ``torch._C.parse_schema``.

Calls are found with ``ast``; string arguments are folded from literals (including implicit
concatenation and f-strings without fields), ``+`` of foldable parts and module-level names bound once
to a foldable value. An argument that holds a literal but cannot be folded (an f-string field, ``%``,
``.format()``, a name bound elsewhere) is a ``not-static`` note. Character positions come from reading
the literal's own source text (:mod:`._pystring`), because ``ast`` only knows where a whole literal
starts. Nothing is imported or executed; a file ``ast`` cannot parse is a fatal problem.

Imports: :mod:`.._contexts`, :mod:`._model`, :mod:`._positions` and :mod:`._pystring` only.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from collections.abc import Sequence

from .._contexts import (
    CONTEXT_CUSTOM_OP,
    CONTEXT_LIBRARY_DEFINE,
    CONTEXT_PARSE_SCHEMA,
    CONTEXT_SCHEMA_FUNCTION,
    CONTEXT_TORCH_LIBRARY_DEFINE,
)
from ._model import Problem, SchemaSite, SourceFile, Suppression, parse_directive
from ._positions import Chunks, Run
from ._pystring import decode_python_string, string_tokens

__all__ = ["python_source"]


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


def python_source(source: SourceFile, text: str, functions: Sequence[str] = ()) -> None:
    """The schema sites, notes and suppressions of a Python file; ``functions`` are the project's own helpers
    that take a schema (``--schema-function``): the first positional argument that holds a string, or ``schema=``."""
    if "pbp:" in text:
        source.suppressions.extend(_python_suppressions(text))
    if not any(word in text for word in _PYTHON_WORDS) and not any(name.rpartition(".")[2] in text for name in functions):
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
    reader = _PythonReader(path, source.lines, tree, functions)
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
    def __init__(self, path: str, lines: list[str], tree: ast.Module, functions: Sequence[str] = ()) -> None:
        self.path = path
        self.lines = lines
        self.functions = tuple(functions)
        self.aliases: dict[str, str] = {}
        self.constants, self.rebound = _module_constants(tree)
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
        if self.functions and qualified is not None and self._is_schema_function(qualified):
            return self._site(node, self._first_string(node), CONTEXT_SCHEMA_FUNCTION)
        return None

    def _is_schema_function(self, qualified: str) -> bool:
        """Whether a call's dotted name (imports resolved) is one of the project's schema functions: a plain
        name matches the last part (``register_tosa_op`` matches ``ops.register_tosa_op``), a dotted one the
        end of the dotted name."""
        return any(qualified == name or qualified.endswith("." + name) for name in self.functions)

    def _first_string(self, node: ast.Call) -> ast.expr | None:
        """``schema=``, else the first positional argument that holds a string (``bind_pattern_to_op(lib, "...")``)."""
        keyword = _argument(node, None, "schema")
        if keyword is not None:
            return keyword
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                return None
            if _holds_literal(arg, self.constants) or (isinstance(arg, ast.Name) and arg.id in self.rebound):
                return arg
        return None

    def _site(self, call: ast.Call, arg: ast.expr | None, context: str) -> SchemaSite | Problem | None:
        if arg is None:
            return None
        span = (call.lineno, call.end_lineno or call.lineno)
        folded = self._fold(arg, depth=0)
        if folded is None and isinstance(arg, ast.JoinedStr):
            folded = self._dynamic_name(arg)
        if folded is None:
            return self._not_static(arg, span)
        text, parts = folded
        positions = Chunks(parts)
        if len(positions):
            line, col = positions[-1]
            end = (line, col + 1)
        else:
            end = self._start(arg)
        return SchemaSite(self.path, text, Chunks([*positions.parts, [end]]), context, self.lines, span)

    def _dynamic_name(self, node: ast.JoinedStr) -> _Folded | None:
        """``f"{name}(Tensor x) -> Tensor"``, ``f"{ns}::{op}.out(...)"``: when every field of a one-line f-string
        stands before its argument list, only the operator name is dynamic. The rest is read from the source
        after the last field, and the name becomes ``_`` (placed at that field), so the argument list, the
        returns and the context's rules are checked; None when a field is in the argument list itself."""
        fields = [i for i, v in enumerate(node.values) if isinstance(v, ast.FormattedValue)]
        tail = node.values[fields[-1] + 1 :]
        before = "".join(str(v.value) for v in node.values[: fields[-1]] if isinstance(v, ast.Constant))
        tail_text = "".join(str(v.value) for v in tail if isinstance(v, ast.Constant))
        if "(" in before or "(" not in tail_text or node.lineno != node.end_lineno or node.end_col_offset is None:
            return None
        line = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        raw = line.encode("utf-8")
        last = node.values[fields[-1]]
        assert isinstance(last, ast.FormattedValue)  # by construction of fields
        value_end = last.value.end_col_offset
        start = node.col_offset
        if value_end is None:
            return None
        # the '}' that closes the last field (after its conversion and format spec)
        depth, k = 1, value_end
        while k < node.end_col_offset and depth:
            depth += {ord("{"): 1, ord("}"): -1}.get(raw[k], 0)
            k += 1
        prefix_end = start
        while prefix_end < k and raw[prefix_end] not in b"'\"":
            prefix_end += 1
        quote = raw[prefix_end : prefix_end + 3] if raw[prefix_end : prefix_end + 3] in (b'"""', b"'''") else raw[prefix_end : prefix_end + 1]
        head = (raw[start:prefix_end] + quote).decode("utf-8", errors="replace")
        rest = raw[k : node.end_col_offset].decode("utf-8", errors="replace")
        column = len(raw[:k].decode("utf-8", errors="replace")) + 1 - len(head)
        decoded = decode_python_string(head + rest, node.lineno, column)
        if decoded is None or "".join(decoded[0]) != tail_text:
            return None
        return "_" + tail_text, [[self._start(last.value)], decoded[1]]

    def _not_static(self, arg: ast.expr, span: tuple[int, int]) -> Problem | None:
        """A note for an argument that holds a string literal but cannot be folded, or a module-level name
        bound more than once to strings; None for one that holds neither (a name bound in a function, a
        parameter: there is nothing to read)."""
        if isinstance(arg, ast.Name) and any(_holds_literal(v, {}) for v in self.rebound.get(arg.id, ())):
            line, column = self._start(arg)
            message = (
                f"cannot read statically: '{arg.id}' is assigned {len(self.rebound[arg.id])} times at module level, so "
                "which schema it holds is known only when the code runs; not checked"
            )
            return Problem(self.path, line, column, message, "note", "not-static", span=span)
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
            return value, [Run(start_line, start_col, len(value), 0)]
        segment = self.lines[start_line - 1 : end_line]
        segment[-1] = segment[-1].encode("utf-8")[: node.end_col_offset].decode("utf-8", errors="replace")
        segment[0] = segment[0][start_col - 1 :]
        chars: list[str] = []
        parts: list[Sequence[tuple[int, int]]] = []
        for token, row, col in string_tokens(segment):
            line = start_line + row
            column = col + 1 + (start_col - 1 if row == 0 else 0)
            decoded = decode_python_string(token, line, column)
            if decoded is None:
                break
            chars.extend(decoded[0])
            parts.append(decoded[1])
        if "".join(chars) != value:
            return value, [Run(start_line, start_col, len(value), 0)]
        return value, parts


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


def _module_constants(tree: ast.Module) -> tuple[dict[str, ast.expr], dict[str, list[ast.expr]]]:
    """Module-level names bound exactly once by a plain assignment (``NAME = <expr>``), and those bound more
    than once with the values given to them (a schema read from one of those is noted, not guessed)."""
    bound: dict[str, ast.expr] = {}
    rebound: dict[str, list[ast.expr]] = {}
    values: dict[str, list[ast.expr]] = {}
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
                if value is not None:
                    values.setdefault(target.id, []).append(value)
                if target.id in seen:
                    bound.pop(target.id, None)
                    rebound[target.id] = values.get(target.id, [])
                else:
                    seen.add(target.id)
                    if value is not None and len(targets) == 1:
                        bound[target.id] = value
    return bound, rebound
