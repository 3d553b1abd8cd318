"""torch as an optional dependency: imported where a feature needs it, with the install line when it is missing.

The package installs without torch (``pip install piece-by-piece-serialize``): the schema language, the
TreeSpec-name and type-info parsers, their pretty views and every ``pbp-serialize schema`` command need only the
standard library (and lark, to rebuild stale parse tables). Flattening values, encoding and decoding TreeSpecs
and custom operators need torch, installed with the ``torch`` extra. Every such entry point gets torch through
:func:`import_torch`, so that a missing torch is reported once, in one voice, with the line that installs it,
never as a bare ``No module named 'torch'`` from deep inside.

Invariant: the error is a ``ModuleNotFoundError`` whose ``name`` is ``"torch"``, so code that already handles a
missing module (``except ImportError``) keeps working; any other import failure inside torch propagates as is.

Imports: the standard library only (layer 0: everything may import this module, it imports nothing of ours).
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["EXTRAS", "TORCH_EXTRA", "import_torch", "missing_torch", "torch_available"]

#: What installs torch beside this package (the extra declared in pyproject.toml).
TORCH_EXTRA = "pip install 'piece-by-piece-serialize[torch]'"


#: The optional dependencies, each installed by the extra of the same name.
EXTRAS = ("torch", "transformers")


def missing_torch(feature: str, module: str = "torch") -> ModuleNotFoundError:
    """The error for ``feature`` (e.g. ``"serialize_args"``) when torch (or ``module``, another of
    :data:`EXTRAS`) is not installed."""
    message = f"{feature} needs {module}, which is not installed: pip install 'piece-by-piece-serialize[{module}]'"
    if module == "torch":
        message += " (or install torch itself first, e.g. the CPU wheel from https://download.pytorch.org/whl/cpu)"
    return ModuleNotFoundError(message, name=module)


def import_torch(feature: str) -> ModuleType:
    """``torch``, imported; raises :func:`missing_torch` (a ``ModuleNotFoundError``) when it is not installed."""
    module = sys.modules.get("torch")
    if module is not None:
        return module
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":  # torch is there but one of its own dependencies is not: not ours to reword
            raise
        raise missing_torch(feature) from None
    return torch


def torch_available() -> bool:
    """Whether torch can be imported, without importing it (a look-up on the import path)."""
    if "torch" in sys.modules:
        return True
    from importlib.util import find_spec

    return find_spec("torch") is not None
