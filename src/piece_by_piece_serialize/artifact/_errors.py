"""The error of :mod:`piece_by_piece_serialize.artifact`, in a module of its own so that the manifest reader,
the archive reader and the loader raise the same class without importing each other."""

from __future__ import annotations

from typing import Any


class ArtifactError(ValueError):
    """An artifact that cannot be loaded, or a load that cannot be done: ``path`` names the file, ``reason`` says
    what is wrong with it (the first thing found); ``str()`` shows both. Raised before anything of the
    archive runs."""

    # the public home of the class: tracebacks, reprs and the API reference name the package
    __module__ = "piece_by_piece_serialize.artifact"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason)
