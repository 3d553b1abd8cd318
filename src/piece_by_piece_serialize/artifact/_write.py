"""Writing an artifact: the top program, each distinct piece program, every weight once, and the manifest.

The archive is torch's PT2 archive (``torch.export.pt2_archive``), written by torch: ``models/model`` is the
top program, whose operators take the pieces' weights as inputs (Note [weights as inputs] in
:mod:`..custom_op`), so its weights are all the model's, stored once; ``models/piece_<n>`` are the pieces'
own programs, which take their weights as inputs too and so hold none: pieces whose programs serialize to the
same bytes (identical layers) share one. ``extra/pbp_manifest.json`` is the manifest (Note [manifest]).

Imports: :mod:`..custom_op` (the call structure and the shape rules), :mod:`._manifest`, :mod:`._state`; torch.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..custom_op._calls import Call
from ..custom_op._shapes import learn
from ._manifest import MANIFEST_FILE, CallRecord, Manifest, OperatorRecord, call_key, write_manifest
from ._state import capture, qualified


@dataclass
class SavedPiece:
    """What the export knows of one piece behind an operator."""

    path: str
    qualname: str  # the operator, namespace::name
    module: Any  # the user's module
    weights: tuple[str, ...]
    calls: dict[str, Call]
    program: Any  # its own exported program, weights as inputs, or None
    program_key: str | None


def record_of(call: Call, qualname: str) -> CallRecord:
    """A call structure as the manifest writes it, with the shape rules learned from its calls."""
    if call.out_kinds is None:
        raise ValueError(f"{qualname}: a call structure without output structure cannot be saved")
    rules = None
    if call.shapes:
        rules = tuple(tuple(r) for r in (call.rules if call.rules is not None else learn(qualname, call.shapes)))
    constants = tuple(sorted(call.constants.items()))
    return CallRecord(
        call_key(tuple(call.kinds), tuple(call.keywords), constants, call.slices), tuple(call.kinds), call.n_positional,
        tuple(call.keywords), constants, call.n_flat, tuple(call.caches), tuple(call.out_kinds),
        tuple(sorted(call.out_constants.items())), call.out_n_flat, tuple(call.out_aliases),
        tuple(str(d).removeprefix("torch.") for d in call.out_dtypes), tuple(str(d) for d in call.out_devices), rules,
        call.slices,
    )  # fmt: skip


def _without_examples(program: Any) -> Any:
    """A shallow copy of ``program`` without its example inputs: torch would pickle them beside it, and a piece
    program's examples are its weights, which the top program already holds."""
    copied = copy.copy(program)
    copied._example_inputs = None
    return copied


def _program_bytes(program: Any) -> bytes:
    from torch._export.serde.serialize import serialize

    return serialize(program).exported_program


def write_artifact(path: str, *, program: Any, call: Call, namespace: str, model_class: type, pieces: Sequence[SavedPiece]) -> Manifest:
    """Write the artifact at ``path`` (see the module docstring); return its manifest."""
    from torch.export.pt2_archive._package import package_pt2

    programs: dict[str, Any] = {"model": _without_examples(program)}
    by_digest: dict[str, str] = {}
    by_object: dict[int, str] = {}  # identical pieces share one program object (Note [shared programs]): serialized once
    operators = []
    for piece in pieces:
        calls = tuple(record_of(c, piece.qualname) for c in piece.calls.values() if c.out_kinds is not None)
        name = None
        if piece.program is not None and piece.program_key in {c.key for c in calls}:
            name = by_object.get(id(piece.program))
            if name is None:
                digest = hashlib.sha256(_program_bytes(piece.program)).hexdigest()
                name = by_object[id(piece.program)] = by_digest.setdefault(digest, f"piece_{len(by_digest)}")
                programs.setdefault(name, _without_examples(piece.program))
        state = None if name is not None else capture(piece.module)
        key = piece.program_key if name is not None else None
        operators.append(OperatorRecord(piece.qualname.partition("::")[2], piece.path, qualified(type(piece.module)), piece.weights, name, key, calls, state))
    top = record_of(call, "the model")
    manifest = Manifest(namespace, qualified(model_class), "model", top, tuple(operators), torch.__version__)
    package_pt2(path, exported_programs=programs, extra_files={MANIFEST_FILE: write_manifest(manifest)})
    return manifest
