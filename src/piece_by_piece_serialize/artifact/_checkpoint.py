"""Weights read from a safetensors checkpoint one tensor at a time, for models whose weights are not in memory.

Note [streamed weights]
~~~~~~~~~~~~~~~~~~~~~~~
A model built on the ``meta`` device (or under ``FakeTensorMode``) exports piece by piece without its weights
(Note [exports without values] in :mod:`..export`), and its programs hold weights without values. ``save`` and
``to_onnx`` then take ``weights=``: a safetensors file, or a directory as transformers writes it (one
``model.safetensors``, or shards listed by ``model.safetensors.index.json``). Each weight without values is read
from the checkpoint under its name in the model (``model.layers.0.mlp.up_proj.weight``; a tied weight under any
of its names), checked against the shape and dtype the program was traced with, written, and dropped before the
next is read: the peak is about the largest tensor plus a constant, whatever the size of the model. Files are
opened lazily (``safetensors.safe_open``, which maps the file and copies out only the tensor asked for). Weights
that have values (buffers computed at construction, such as rotary frequencies) are written as they are; one
without values that the checkpoint lacks is an error that names it. Programs traced on ``meta`` record that
device in their graphs (an ``arange``'s ``device=``): they are written as moved to the CPU
(``torch.export.passes.move_to_device_pass``), so the archive runs on CPU tensors like any other.

Invariants: nothing of the checkpoint runs (safetensors holds raw bytes and a JSON header; no pickle); a
tensor read has exactly the shape and dtype asked for, or :class:`CheckpointError` says which differs.

Imports: safetensors and torch on use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class CheckpointError(ValueError):
    """A checkpoint given as ``weights=`` that cannot provide a weight: ``path`` names the checkpoint, ``reason``
    what is wrong (a missing file or weight, another shape or dtype)."""

    __module__ = "piece_by_piece_serialize.artifact"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason)


class Checkpoint:
    """A safetensors checkpoint: a file, or a directory with ``model.safetensors`` or an index of shards."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.where: dict[str, str] = {}  # weight name -> the file holding it
        if os.path.isdir(self.path):
            index = os.path.join(self.path, INDEX_FILE)
            if os.path.isfile(index):
                self._read_index(index)
            elif os.path.isfile(os.path.join(self.path, SINGLE_FILE)):
                self._read_keys(os.path.join(self.path, SINGLE_FILE))
            else:
                raise CheckpointError(self.path, f"a directory without {INDEX_FILE} or {SINGLE_FILE}")
        elif os.path.isfile(self.path):
            self._read_keys(self.path)
        else:
            raise CheckpointError(self.path, "no such file or directory")

    def _read_index(self, index: str) -> None:
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(self.path, f"{INDEX_FILE} has no weight_map: {exc}") from None
        if not isinstance(weight_map, dict):
            raise CheckpointError(self.path, f"{INDEX_FILE}: weight_map is not an object")
        for name, shard in weight_map.items():
            # a shard is a file name beside the index, never a path elsewhere
            if not isinstance(shard, str) or os.path.basename(shard) != shard or shard in ("", ".", ".."):
                raise CheckpointError(self.path, f"{INDEX_FILE}: {name!r} is in {shard!r}, not a file of the directory")
            self.where[name] = os.path.join(self.path, shard)

    def _read_keys(self, file: str) -> None:
        for name in _open(self.path, file).keys():  # noqa: SIM118 - a safe_open handle is not iterable
            self.where[name] = file

    def tensor(self, names: Sequence[str], shape: tuple[int, ...], dtype: Any) -> Any:
        """The weight stored under the first of ``names`` (a weight and its tied aliases) the checkpoint has, read
        alone; it must have ``shape`` and ``dtype``."""
        for name in names:
            file = self.where.get(name)
            if file is not None:
                break
        else:
            raise CheckpointError(
                self.path, f"no weight {' or '.join(map(repr, names))} among its {len(self.where)} weights (they are named "
                "as in the model's state_dict(), as transformers' save_pretrained writes them)",
            )  # fmt: skip
        tensor = _open(self.path, file).get_tensor(name)
        if tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
            raise CheckpointError(
                self.path, f"{name!r} is {tensor.dtype} {tuple(tensor.shape)} where the model has {dtype} {tuple(shape)}"
            )
        return tensor


def _open(path: str, file: str) -> Any:
    """``safe_open`` of one file of the checkpoint, lazily: no tensor is read until asked for."""
    from safetensors import SafetensorError, safe_open

    try:
        return safe_open(file, framework="pt")
    except (OSError, SafetensorError) as exc:
        raise CheckpointError(path, f"{os.path.basename(file)} is not a safetensors file: {exc}") from None


def aliases(model: Any) -> dict[str, list[str]]:
    """Every name of each parameter and buffer of ``model`` (tied weights have several), by each of its names."""
    by_id: dict[int, list[str]] = {}
    for prefix, module in model.named_modules(remove_duplicate=False):
        for table in (module._parameters, module._buffers):
            for local, tensor in table.items():
                if tensor is not None:
                    names = by_id.setdefault(id(tensor), [])
                    name = f"{prefix}.{local}" if prefix else local
                    if name not in names:
                        names.append(name)
    return {name: names for names in by_id.values() for name in names}


def chunks(tensor: Any, size: int = 1 << 26) -> Iterator[memoryview]:
    """The bytes of a contiguous CPU ``tensor``, in views of at most ``size`` bytes (no copy of the whole)."""
    import torch

    flat = tensor.contiguous().reshape(-1).view(torch.uint8)
    data = memoryview(flat.numpy())
    for start in range(0, len(data), size):
        yield data[start : start + size]
