"""piece-by-piece-serialize: pass nested PyTorch inputs through custom operators and back.

Two small languages sit at the core, each defined by a Lark grammar shipped in ``grammars/``:
the PyTorch operator function-schema language (:func:`parse_schema`, :func:`extract_names_from_schema`)
and the TreeSpec name / type-info encoding (:func:`tree_spec_as_name`, :func:`tree_spec_from_name`).
The serialization API (:func:`serialize_args`, :func:`deserialize_args`, ...) is built on both.

Importing this package imports neither torch nor transformers nor lark: every public name is
loaded from its module on first access, so schema tooling starts fast.
"""

from __future__ import annotations

import importlib

from .errors import PbpSyntaxError, SchemaError, TreeSpecNameError

# Not ``from typing import TYPE_CHECKING``: importing typing (and the re, enum, collections it pulls in) is
# about half the cost of importing this package; type checkers treat this name as True all the same.
TYPE_CHECKING = False

__version__ = "0.1.0"

# public name -> submodule that defines it (loaded on first attribute access)
_LAZY = {
    "parse_schema": "schema",
    "extract_names_from_schema": "schema",
    "FunctionSchema": "schema",
    "tree_spec_as_name": "treespec_name",
    "tree_spec_from_name": "treespec_name",
    "pretty_name": "treespec_name",
    "parse_type_info": "type_info",
    "serialize_one": "serialize",
    "serialize_args": "serialize",
    "type_as_str_with_info": "serialize",
    "deserialize_args": "serialize",
    "deserialize_args_kwargs": "serialize",
    "make_copy": "serialize",
    "choose_kwargs_for_dynamic_shapes": "serialize",
    "register_cache_class": "caches",
    "register_cache_layer_class": "caches",
    "as_custom_op": "custom_op",
    "replace_with_custom_ops": "custom_op",
    "restore_modules": "custom_op",
    "CustomOpError": "custom_op",
    "export_piece_by_piece": "export",
    "dynamic_shapes_from_examples": "export",
    "record_calls": "export",
    "PieceByPieceExport": "export",
    "PieceByPieceExportError": "export",
    "load_piece_by_piece": "artifact",
    "ArtifactError": "artifact",
}

__all__ = ["PbpSyntaxError", "SchemaError", "TreeSpecNameError", "__version__", *_LAZY]

if TYPE_CHECKING:
    from typing import Any

    from .artifact import ArtifactError as ArtifactError
    from .artifact import load_piece_by_piece as load_piece_by_piece

    # ``name as name``: the explicit re-export that type checkers (and ruff) read; ``__all__`` is built from
    # ``_LAZY`` at run time, which neither can evaluate
    from .caches import register_cache_class as register_cache_class
    from .caches import register_cache_layer_class as register_cache_layer_class
    from .custom_op import CustomOpError as CustomOpError
    from .custom_op import as_custom_op as as_custom_op
    from .custom_op import replace_with_custom_ops as replace_with_custom_ops
    from .custom_op import restore_modules as restore_modules
    from .export import PieceByPieceExport as PieceByPieceExport
    from .export import PieceByPieceExportError as PieceByPieceExportError
    from .export import dynamic_shapes_from_examples as dynamic_shapes_from_examples
    from .export import export_piece_by_piece as export_piece_by_piece
    from .export import record_calls as record_calls
    from .schema import FunctionSchema as FunctionSchema
    from .schema import extract_names_from_schema as extract_names_from_schema
    from .schema import parse_schema as parse_schema
    from .serialize import choose_kwargs_for_dynamic_shapes as choose_kwargs_for_dynamic_shapes
    from .serialize import deserialize_args as deserialize_args
    from .serialize import deserialize_args_kwargs as deserialize_args_kwargs
    from .serialize import make_copy as make_copy
    from .serialize import serialize_args as serialize_args
    from .serialize import serialize_one as serialize_one
    from .serialize import type_as_str_with_info as type_as_str_with_info
    from .treespec_name import pretty_name as pretty_name
    from .treespec_name import tree_spec_as_name as tree_spec_as_name
    from .treespec_name import tree_spec_from_name as tree_spec_from_name
    from .type_info import parse_type_info as parse_type_info

def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later accesses skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
