"""Which LALR engine the parsers run: the pure-Python :mod:`.engine`, or its mypyc-compiled copy when one is built.

The compiled engine is optional (``make accel``, ``bench/build_accel.py``) and is the same source compiled: a
copy of ``engine.py`` under another module name, ``_compiled``, so that it never shadows the source, stamped
with the SHA-256 of the ``engine.py`` it was built from. It is used only while that stamp matches the ``engine.py``
beside it; an edit of the source makes the package fall back to the pure engine, silently, until the next build
(Note [compiled engine]). ``PBP_ENGINE`` forces the choice: ``python``, or ``compiled``, which raises
:class:`RuntimeError` when no compiled engine is built or the one built is stale, instead of falling back.

The parsers take ``Engine``, ``Failure`` and ``Token`` from here, all three from the same module: the engine raises
its own ``Failure`` and makes its own ``Token`` objects, which the callbacks test with ``isinstance``.
"""

from __future__ import annotations

import os
from types import ModuleType

from . import engine as _lalr

__all__ = ["Engine", "Failure", "Token", "NAME", "choose", "source_sha256"]

# The values PBP_ENGINE takes; unset or empty is "auto" (compiled when built and current, else pure).
_CHOICES = ("auto", "python", "compiled")


def source_sha256(module: ModuleType = _lalr) -> str:
    """The SHA-256 (hex) of the source file of ``module``, the pure engine: what a compiled copy's stamp must be."""
    import hashlib  # only when a compiled engine is there to check (about 2 ms to import, at the first parse)

    with open(module.__file__ or "", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def choose(choice: str, compiled: ModuleType | None, pure: ModuleType = _lalr) -> ModuleType:
    """The engine module to run for a ``PBP_ENGINE`` value ``choice`` and the compiled module (None when none
    imports). Raises :class:`RuntimeError` for ``compiled`` without a current compiled engine, and
    :class:`ValueError` for an unknown choice."""
    choice = choice or "auto"
    if choice not in _CHOICES:
        raise ValueError(f"PBP_ENGINE must be one of {', '.join(_CHOICES)}, got {choice!r}")
    if choice == "python":
        return pure
    if compiled is None:
        if choice == "compiled":
            raise RuntimeError("PBP_ENGINE=compiled, but no compiled engine is built (run `make accel`)")
        return pure
    if getattr(compiled, "SOURCE_SHA256", None) != source_sha256(pure):
        if choice == "compiled":
            raise RuntimeError(
                f"PBP_ENGINE=compiled, but the compiled engine {compiled.__name__} was built from another version of "
                f"{os.path.basename(pure.__file__ or '')} (run `make accel` again)"
            )
        return pure
    return compiled


def _compiled() -> ModuleType | None:
    try:
        from . import _compiled  # type: ignore[attr-defined]  # an optional build artifact, git-ignored: no source to type
    except ImportError:
        return None
    module: ModuleType = _compiled
    return module


_CHOICE = os.environ.get("PBP_ENGINE", "")
_MODULE = choose(_CHOICE, None if _CHOICE == "python" else _compiled())

# Not ``from typing import TYPE_CHECKING`` (see the package's __init__); the checker sees the pure engine's
# classes, which the compiled ones are, compiled.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import Engine, Failure, Token
else:
    Engine, Failure, Token = _MODULE.Engine, _MODULE.Failure, _MODULE.Token
# "python" or "compiled": which one runs (the benchmarks and tests report it)
NAME = "python" if _MODULE is _lalr else "compiled"

# Note [compiled engine]
# ~~~~~~~~~~~~~~~~~~~~~~
# mypyc compiles a module under the name of its file. Compiling engine.py itself would put an extension module
# engine.*.so beside engine.py, which Python imports in its place: every later edit of the source would be ignored
# without a word until someone rebuilt. So the build compiles a copy named _compiled, with the source's
# SHA-256 appended as SOURCE_SHA256, and this module compares that stamp with the source on import (one hash of
# a 25 kB file, only when a compiled engine exists). Both engines are the same code, so they agree by
# construction; tests/test_compiled_engine.py checks it over every schema torch registers and the TreeSpec
# corpus, and the engine tests and fuzz replay run on either with PBP_ENGINE set.
