"""The inputs of ``schema check`` and ``schema format``: which files are read, and how.

Paths expand into files to read (folders walked depth first, sorted, without following symlinked
folders); each is read as UTF-8 (a leading BOM dropped, universal newlines) by the same rule for files
and stdin, and handed to :mod:`.sources`. What cannot be read is reported through the reporter and
counted, so the command exits 2; it is never raised. Only regular files are opened: a FIFO or a device
in a folder is never read, so it cannot hang the run.

Imports: :mod:`._config`, :mod:`._progress` and :mod:`.sources` (:mod:`._report` for annotations only);
never the schema parser.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ._config import Config, ConfigError, load_config
from ._progress import Progress
from .sources import SourceFile, kind_for_path, read_source

if TYPE_CHECKING:
    from ._report import Reporter

__all__ = ["Reader", "iter_files", "load_or_report"]

# Folders never worth walking into when looking for schemas.
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


class Reader:
    """Expands paths into files to read and reads them, reporting what cannot be read (exit 2)."""

    def __init__(self, reporter: Reporter, config: Config) -> None:
        self.reporter = reporter
        self.config = config
        self.io_errors = 0

    def io_error(self, message: str, path: str | None = None, line: int = 0, column: int = 0) -> None:
        """Report an input that could not be read (or parsed at all) and count it."""
        self.io_errors += 1
        self.reporter.io_error(message, path, line, column)

    def expand(self, paths: Sequence[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for path in paths:
            if path == "-":
                found.append(("-", "text"))
            elif self.config.excluded(path):
                continue
            elif os.path.isdir(path):
                self._walk(path, found)
            elif os.path.lexists(path):
                kind = kind_for_path(path, explicit=True)
                found.append((path, kind or "text"))
            else:
                self.io_error(f"cannot read {path}: no such file or directory", path)
        return found

    def _walk(self, top: str, found: list[tuple[str, str]]) -> None:
        """Depth first, each folder's files (sorted) before its subfolders (sorted); symlinked folders are
        not followed; anything but a regular file (a FIFO, a socket, a device, a dangling link) is not a
        source and is passed over without being opened."""
        stack = [top]
        config = self.config
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                self.io_error(f"cannot read folder {folder}: {exc.strerror or exc}", folder)
                continue
            subfolders: list[str] = []
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name[:1] != "." and entry.name not in _SKIP_DIRS and not config.excluded(entry.path):
                            subfolders.append(entry.path)
                        continue
                    regular = entry.is_file()
                except OSError:
                    regular = False
                if not regular or config.excluded(entry.path):
                    continue
                if config.include:
                    if config.included(entry.path):
                        found.append((entry.path, kind_for_path(entry.path, explicit=True) or "text"))
                else:
                    kind = kind_for_path(entry.path, explicit=False)
                    if kind is not None:
                        found.append((entry.path, kind))
            stack.extend(reversed(subfolders))

    def read(self, path: str, kind: str) -> tuple[str, str] | None:
        """(name, text) of one input, or None after reporting why it cannot be read."""
        if path == "-":
            stdin = sys.stdin
            buffer = getattr(stdin, "buffer", None)
            data: bytes | str = buffer.read() if buffer is not None else stdin.read()
            return self._decode("<stdin>", data)
        try:
            # O_NONBLOCK: opening a FIFO named on the command line must not wait for a writer
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        except OSError as exc:
            self.io_error(f"cannot read {path}: {exc.strerror or exc}", path)
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    self.io_error(f"cannot read {path}: not a regular file (use '-' to read standard input)", path)
                    return None
                data = handle.read()
            except OSError as exc:
                self.io_error(f"cannot read {path}: {exc.strerror or exc}", path)
                return None
        return self._decode(path, data)

    def _decode(self, name: str, data: bytes | str) -> tuple[str, str] | None:
        """The same rule for files and stdin: UTF-8 (a leading BOM dropped), no NUL byte, universal newlines."""
        if isinstance(data, bytes):
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                self.io_error(f"cannot read {name}: not UTF-8 text ({exc.reason} at byte {exc.start})", name)
                return None
        else:
            text = data.removeprefix("\ufeff")
        nul = text.find("\0")
        if nul >= 0:
            at = len(text[:nul].encode("utf-8")) + (3 if isinstance(data, bytes) and data[:3] == b"\xef\xbb\xbf" else 0)
            self.io_error(f"cannot read {name}: not text (a NUL byte at byte {at})", name)
            return None
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return name, text


def iter_files(reader: Reader, paths: Sequence[str], quiet: bool) -> Iterator[SourceFile]:
    """Every readable input of ``paths``, read into a :class:`~.sources.SourceFile`, with progress shown."""
    files = reader.expand(paths)
    with Progress(len(files), "checking files", quiet=quiet) as progress:
        for path, kind in files:
            item = reader.read(path, kind)
            if item is not None:
                source = read_source(item[0], item[1], kind, reader.config.schema_functions)
                progress.clear()  # findings are printed while the caller consumes this item
                yield source
            progress.advance()


def load_or_report(config_path: str | None, exclude: Sequence[str], reporter: Reporter, schema_functions: Sequence[str] = ()) -> Config | None:
    """The configuration with the command line's excludes and schema functions added; None after reporting why
    it is invalid."""
    try:
        return load_config(config_path).with_excludes(exclude, os.getcwd()).with_schema_functions(schema_functions)
    except ConfigError as exc:
        reporter.io_error(str(exc))
        return None
