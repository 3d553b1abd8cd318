"""Find operator-schema strings in files and map every character back to where it was written.

The command line checks schemas where people write them: plain text (one schema per line), Python
sources (``torch.library.define``, ``Library.define``/``lib.define``, ``custom_op(..., schema=...)``,
``torch._C.parse_schema``), C++ and Objective-C++ sources (string literals passed to ``def(`` outside a
``PYBIND11_MODULE`` body, ``TORCH_SELECTIVE_SCHEMA(``, ``torch::schema(``, ``c10::schema(``,
``torch::jit::parseSchema(``, ``parseSchemaOrName(``, ``torch::jit::Operator(`` and, in a file that uses
``RegisterOperators``, ``.op(`` and ``.schema(``), the project's own schema functions in both, and YAML ``func:`` entries of files shaped like ``native_functions.yaml``. This
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

The readers, one module per container language: :mod:`._text`, :mod:`._yaml`, :mod:`._cpp` and
:mod:`._python` (with :mod:`._pystring`, its string-literal decoder); the records they produce are in
:mod:`._model` and the position maps in :mod:`._positions`. This module picks the reader for a file.

Imports: :mod:`.._contexts` (through :mod:`._model`) and this package's modules only; never the schema
parser, never torch, and no other module of the command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from ._cpp import cpp_source
from ._model import Problem, SchemaSite, SourceFile, Suppression, set_aside_templates, template_marker
from ._positions import LinePositions
from ._python import python_source
from ._text import text_sites
from ._yaml import yaml_source

__all__ = [
    "CPP_SUFFIXES",
    "PYTHON_SUFFIXES",
    "TEXT_SUFFIXES",
    "YAML_SUFFIXES",
    "LinePositions",
    "Problem",
    "SchemaSite",
    "SourceFile",
    "Suppression",
    "kind_for_path",
    "read_sites",
    "read_source",
    "split_lines",
    "template_marker",
]

# How a file is read, chosen from its suffix; anything else given explicitly is read as plain text.
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
CPP_SUFFIXES = frozenset(
    {".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".mm"}
)
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
TEXT_SUFFIXES = frozenset({".schema", ".schemas"})


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


def read_source(path: str, text: str, kind: str, schema_functions: Sequence[str] = ()) -> SourceFile:
    """Everything the checker needs from one file of the given kind (see :class:`SourceFile`).

    ``schema_functions`` names the project's own calls that take a schema (``--schema-function``,
    ``schema-functions`` in the configuration), read in Python and C++ files besides torch's own.
    """
    lines = split_lines(text)
    source = SourceFile(path, lines)
    if kind == "python":
        python_source(source, text, schema_functions)
    elif kind == "cpp":
        cpp_source(source, text, schema_functions)
    elif kind == "yaml":
        yaml_source(source)
    else:
        source.sites = text_sites(path, lines)
    set_aside_templates(source)
    return source


def read_sites(path: str, text: str, kind: str, schema_functions: Sequence[str] = ()) -> tuple[list[SchemaSite], list[Problem]]:
    """Every schema site of a file of the given kind, in file order, and the problems met while reading."""
    source = read_source(path, text, kind, schema_functions)
    return source.sites, source.problems
