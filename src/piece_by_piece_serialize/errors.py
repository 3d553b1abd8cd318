"""The public error family: :class:`SchemaError` for operator schemas, :class:`TreeSpecNameError` for the three
languages of the serialized form (TreeSpec names, type-info strings, structure descriptions), :class:`SymExprError`
for the symbolic expressions of an exported program; all ``ValueError`` subclasses of :class:`PbpSyntaxError`.

Every malformed input to any of the five languages raises exactly one of these, never a lark exception,
``IndexError`` or ``RecursionError``. An error carries the text it was raised on, a 0-based offset into
it, the 1-based line and column derived from that offset, and the tokens that would have been
accepted there. ``str(error)`` shows the message, the source line and a caret under the offending
column. End of input is reported at ``len(text)`` as "end of input". Errors pickle, so they cross
process boundaries (multiprocessing, pytest-xdist) intact.

Imports: nothing at import time; :mod:`._diagnostics` for the caret, when an error is shown.
"""

from __future__ import annotations

__all__ = ["PbpSyntaxError", "SchemaError", "SymExprError", "TreeSpecNameError"]

class PbpSyntaxError(ValueError):
    """Base class of the per-language errors: a message positioned in a source text."""

    def __init__(
        self,
        msg: str,
        text: str = "",
        pos: int | None = None,
        expected: tuple[str, ...] | frozenset[str] | list[str] = (),
    ) -> None:
        if pos is None:
            pos = len(text)
        pos = max(0, min(pos, len(text)))
        self.msg = msg
        self.text = text
        self.pos = pos
        self.expected = tuple(sorted(expected))
        self.lineno = text.count("\n", 0, pos) + 1
        line_start = text.rfind("\n", 0, pos) + 1
        self.colno = pos - line_start + 1
        super().__init__(msg, text, pos, self.expected)

    # ValueError's default pickling re-calls __init__ with self.args, which is exactly our signature.

    def __str__(self) -> str:
        return f"{self.msg} (line {self.lineno}, column {self.colno})\n{self.caret()}"

    def caret(self) -> str:
        """The offending source line and a caret under the error column (two lines)."""
        line_start = self.text.rfind("\n", 0, self.pos) + 1
        line_end = self.text.find("\n", self.pos)
        if line_end == -1:
            line_end = len(self.text)
        line = self.text[line_start:line_end]
        # deferred: the package's import stays a few modules; a caret is wanted only when an error is shown
        from ._diagnostics import caret

        return caret(line, self.pos - line_start)


class SchemaError(PbpSyntaxError):
    """A PyTorch operator function schema could not be parsed, or is not a valid schema.

    Raised by :func:`piece_by_piece_serialize.parse_schema` and
    :func:`piece_by_piece_serialize.extract_names_from_schema`.
    """


class TreeSpecNameError(PbpSyntaxError):
    """A TreeSpec name or a type-info string could not be decoded, or a spec cannot be encoded.

    Raised by :func:`piece_by_piece_serialize.tree_spec_from_name`, the type-info parser and
    :func:`piece_by_piece_serialize.deserialize_args` on malformed or hostile input, and by the
    encoder when an object has no encoding (the message names its type and how to register it).
    """


class SymExprError(PbpSyntaxError):
    """A symbolic expression of an exported program (sympy's ``srepr`` text, as torch writes it) could not be
    read: outside the language, past one of its limits, or refused by sympy or torch when built.

    Raised by :func:`piece_by_piece_serialize.sym_expr.parse_sym_expr` and
    :func:`piece_by_piece_serialize.sym_expr.sym_expr_to_sympy`; the artifact loader reports it as an
    ``ArtifactError`` naming the file and the member.
    """
