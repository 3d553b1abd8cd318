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

# Not ``from typing import TYPE_CHECKING`` (see the package's __init__)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Engine", "Failure", "Token", "NAME", "choose", "choose_copy", "optional_copy", "source_sha256", "sources_sha256"]

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
    return choose_copy(choice, compiled, pure, lambda: source_sha256(pure), "compiled engine",
                       os.path.basename(pure.__file__ or ""))


def choose_copy(choice: str, compiled: ModuleType | None, pure: ModuleType, stamp: Callable[[], str], what: str,
                sources: str) -> ModuleType:
    """``pure`` or its compiled copy ``compiled`` (None when none imports) for a ``PBP_ENGINE`` value: the copy
    only while its ``SOURCE_SHA256`` equals ``stamp()`` (called only when there is a copy to check). ``what``
    names the copy and ``sources`` what the stamp covers, in the errors of ``choose``."""
    choice = choice or "auto"
    if choice not in _CHOICES:
        raise ValueError(f"PBP_ENGINE must be one of {', '.join(_CHOICES)}, got {choice!r}")
    if choice == "python":
        return pure
    if compiled is None:
        if choice == "compiled":
            raise RuntimeError(f"PBP_ENGINE=compiled, but no {what} is built (run `make accel`)")
        return pure
    if getattr(compiled, "SOURCE_SHA256", None) != stamp():
        if choice == "compiled":
            raise RuntimeError(
                f"PBP_ENGINE=compiled, but the {what} {compiled.__name__} was built from another version of "
                f"{sources} (run `make accel` again)"
            )
        return pure
    return compiled


def sources_sha256(module: ModuleType) -> str:
    """The stamp of a compiled copy of ``module`` that uses the engine: the SHA-256 over the name and content of
    every ``.py`` file of ``module``'s package directory and of the pure engine's source, so that an edit of
    anything the copy was type-checked and compiled against makes it stale (bench/build_accel.py writes it)."""
    import hashlib  # as in source_sha256

    folder = os.path.dirname(module.__file__ or "")
    paths = [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith(".py")]
    paths.append(_lalr.__file__ or "")
    total = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        total.update(f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)} {digest}\n".encode())
    return total.hexdigest()


def optional_copy(name: str) -> ModuleType | None:
    """The compiled copy ``name`` (a full module name), or None when none is built. An optional build artifact,
    git-ignored and without source, so it is imported by its fixed name; a copy that is there but fails on an
    import of its own is an error, not the same as no copy."""
    from importlib import import_module

    try:
        return import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


_CHOICE = os.environ.get("PBP_ENGINE", "")
_MODULE = choose(_CHOICE, None if _CHOICE == "python" else optional_copy(f"{__package__}._compiled"))

# The checker sees the pure engine's classes, which the compiled ones are, compiled.
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
#
# The schema callbacks (schema/_transform.py) are compiled the same way, as schema/_transform_compiled, picked by
# schema/_choice.py through choose_copy with the same PBP_ENGINE values. Their stamp, sources_sha256, covers every
# .py file of schema/ and engine.py: mypyc compiles a module against the types of everything it imports, so an
# edit of any of them (an AST class, a helper's signature) can change what the compiled copy does. The compiled
# callbacks take Token from here like the source does, and mypyc treats classes it does not compile as plain
# objects, so they run with either engine.
