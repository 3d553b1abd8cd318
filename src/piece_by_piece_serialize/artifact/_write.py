"""Writing an artifact: the top program, each distinct piece program, every weight once, and the manifest.

The archive is in torch's PT2 layout (``torch.export.pt2_archive``), written with torch's writer: ``models/model`` is the
top program, whose operators take the pieces' weights as inputs (Note [weights as inputs] in
:mod:`..custom_op`), so its weights are all the model's, stored once; ``models/piece_<n>`` are the pieces'
own programs and their programs by size (Note [programs by size] in :mod:`..export._by_size`), which take their
weights as inputs too and so hold none: pieces whose programs serialize to the same bytes (identical layers)
share one. ``extra/pbp_manifest.json`` is the manifest (Note [manifest]), which
holds each program document's digest: a document is serialized once, and those bytes are both digested and
written (Note [program digests] in :mod:`._archive`).

Imports: :mod:`..custom_op` (the call structure and the shape rules), :mod:`._manifest`, :mod:`._state`; torch.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import warnings
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
    program_key: str | None  # the call structure its program, or its programs by size, compute
    by_size: tuple[Any, ...] = ()  # without a program of its own, its programs by size (Note [programs by size])


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


def _document(program: Any) -> bytes:
    """The program's document as the archive holds it (``models/<name>.json``), without weights or examples."""
    from torch._export.serde.serialize import serialize

    return serialize(_without_examples(program), None, serialize_state_dict=False, serialize_constants=False).exported_program


def write_artifact(path: str, *, program: Any, call: Call, namespace: str, model_class: type, pieces: Sequence[SavedPiece],
                   weights: Any = None, names: dict[str, list[str]] | None = None) -> Manifest:  # fmt: skip
    """Write the artifact at ``path`` (see the module docstring); return its manifest. ``weights`` is the
    :class:`._checkpoint.Checkpoint` the weights without values are read from (Note [streamed weights]), found
    under their ``names`` in the model (each weight's names, tied ones several)."""
    streamed = any(is_valueless(t) for t in [*program.state_dict.values(), *program.constants.values()])
    if streamed and weights is None:
        raise ValueError(
            "save: the model's weights have no values (the meta device or FakeTensorMode): pass weights= a safetensors "
            "checkpoint (a file, or a directory of shards with model.safetensors.index.json) to read them from"
        )
    programs: dict[str, Any] = {"model": _without_examples(program)}
    documents: dict[str, bytes] = {}  # each program's document, serialized once: digested, then written as it is
    digests: dict[str, str] = {}  # each document's SHA-256, by program name
    by_digest: dict[str, str] = {}  # pieces whose programs serialize to the same bytes share one
    by_object: dict[int, str] = {}  # identical pieces share one program object (Note [shared programs]): serialized once
    operators = []

    def named(own: Any) -> str:
        """The archive's name of a piece's program, written once per object and once per document."""
        name = by_object.get(id(own))
        if name is None:
            document = _document(own)
            digest = hashlib.sha256(document).hexdigest()
            name = by_object[id(own)] = by_digest.setdefault(digest, f"piece_{len(by_digest)}")
            if name not in programs:
                documents[name], digests[name], programs[name] = document, digest, _without_examples(own)
        return name

    for piece in pieces:
        calls = tuple(record_of(c, piece.qualname) for c in piece.calls.values() if c.out_kinds is not None)
        computed = piece.program_key in {c.key for c in calls}
        name = named(piece.program) if piece.program is not None and computed else None
        sized = tuple(named(own) for own in piece.by_size) if name is None and computed else ()
        # a piece by size keeps its state too: a size no domain holds for runs its module, rebuilt or given
        state = None if name is not None else capture(piece.module)
        key = piece.program_key if name is not None or sized else None
        operators.append(OperatorRecord(piece.qualname.partition("::")[2], piece.path, qualified(type(piece.module)), piece.weights, name, key, calls, state,
                                        by_size=tuple((n, "") for n in sized)))  # fmt: skip
    written = {k: on_cpu(v) for k, v in programs.items()} if streamed else programs
    # the documents written are those of the programs moved to the CPU when streamed: digested again
    for name in written if streamed else ["model"]:
        documents[name] = _document(written[name])
        digests[name] = hashlib.sha256(documents[name]).hexdigest()
    operators = [
        dataclasses.replace(o, digest=None if o.program is None else digests[o.program], by_size=tuple((n, digests[n]) for n, _ in o.by_size))
        for o in operators
    ]
    top = record_of(call, "the model")
    manifest = Manifest(namespace, qualified(model_class), "model", top, tuple(operators), torch.__version__, digests["model"])
    if streamed:
        manifest = _on_cpu_manifest(manifest)
    _package(path, written, programs, documents, write_manifest(manifest), weights, names or {})
    return manifest


# ---- streamed weights (Note [streamed weights]) ----------------------------------------------------------


def is_valueless(tensor: Any) -> bool:
    """A tensor without values: on the meta device, or a fake tensor."""
    from torch._subclasses.fake_tensor import FakeTensor

    return bool(getattr(tensor, "is_meta", False)) or isinstance(tensor, FakeTensor)


def on_cpu(program: Any) -> Any:
    """A copy of ``program`` moved from the meta device to the CPU, its weights without values standing in as
    one-element tensors broadcast to their shapes (``program`` and its weights are left as they are)."""
    from torch.export.passes import move_to_device_pass

    def stand_in(t: Any) -> Any:
        if not is_valueless(t):
            return t
        one = torch.empty((), dtype=t.dtype).expand(t.shape)
        return torch.nn.Parameter(one, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else one

    shallow = copy.copy(program)
    shallow._state_dict = {k: stand_in(v) for k, v in program.state_dict.items()}
    shallow._constants = {k: stand_in(v) if isinstance(v, torch.Tensor) else v for k, v in program.constants.items()}
    keep = {id(v): v for v in [*shallow._state_dict.values(), *shallow._constants.values()]}  # weights are not copied
    with warnings.catch_warnings():  # torch's treespecs warn about their own deprecated class when copied
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)
        moved = copy.deepcopy(shallow, memo=dict(keep))
    return move_to_device_pass(moved, {"meta": "cpu"})


def _on_cpu_manifest(manifest: Manifest) -> Manifest:
    """The manifest with every output recorded on the meta device recorded on the CPU, where the archive runs."""

    def moved(c: CallRecord) -> CallRecord:
        return dataclasses.replace(c, out_devices=tuple("cpu" if d == "meta" else d for d in c.out_devices))

    operators = tuple(dataclasses.replace(o, calls=tuple(moved(c) for c in o.calls)) for o in manifest.operators)
    return dataclasses.replace(manifest, call=moved(manifest.call), operators=operators)


def _package(path: str, programs: dict[str, Any], traced: dict[str, Any], documents: dict[str, bytes], manifest: str,
             weights: Any, names: dict[str, list[str]]) -> None:  # fmt: skip
    """Write the archive in torch's PT2 layout, which the loader reads: each program's ``documents`` entry as it
    is (its digest is in the manifest), each weight by itself, those without values read from ``weights`` one at
    a time and dropped once written (Note [streamed weights])."""
    from torch._export.serde import schema
    from torch._export.serde.serialize import serialize_tensor_meta
    from torch.export.pt2_archive._package import PT2ArchiveWriter, _package_payload_config
    from torch.export.pt2_archive.constants import (
        CONSTANTS_CONFIG_FILENAME_FORMAT,
        CONSTANTS_DIR,
        EXTRA_DIR,
        MODELS_FILENAME_FORMAT,
        SAMPLE_INPUTS_FILENAME_FORMAT,
        TENSOR_CONSTANT_FILENAME_PREFIX,
        WEIGHT_FILENAME_PREFIX,
        WEIGHTS_CONFIG_FILENAME_FORMAT,
        WEIGHTS_DIR,
    )  # fmt: skip

    counts = {WEIGHTS_DIR: 0, CONSTANTS_DIR: 0}

    def write(writer: Any, directory: str, prefix: str, table: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
        config: dict[str, Any] = {}
        done: dict[int, str] = {}  # a tensor under two names is written once
        for fqn, tensor in table.items():
            if not isinstance(tensor, torch.Tensor):
                continue
            source = original[fqn]
            name = fqn.removeprefix("module.")  # the flat call's attribute holding the model (export/_flat.py)
            value = weights.tensor(names.get(name, [name]), tuple(source.shape), source.dtype) if is_valueless(source) else tensor.contiguous()
            file = done.get(id(source))
            if file is None:
                file = done[id(source)] = f"{prefix}{counts[directory]}"
                counts[directory] += 1
                nbytes = value.numel() * value.element_size()
                if value.storage_offset() or value.untyped_storage().nbytes() != nbytes:
                    value = value.clone()  # a view into a larger storage: its own bytes only
                writer.archive_file.write_record(f"{directory}{file}", value.untyped_storage(), nbytes)
            config[fqn] = schema.PayloadMeta(
                path_name=file, is_param=isinstance(source, torch.nn.Parameter), use_pickle=False, tensor_meta=serialize_tensor_meta(value),
            )  # fmt: skip
            del value  # the next weight is read only after this one is dropped
        return config

    with PT2ArchiveWriter(path) as writer:
        for model_name, program in programs.items():
            state = write(writer, WEIGHTS_DIR, WEIGHT_FILENAME_PREFIX, program.state_dict, traced[model_name].state_dict)
            _package_payload_config(writer, schema.PayloadConfig(config=state), WEIGHTS_CONFIG_FILENAME_FORMAT.format(model_name))
            constants = write(writer, CONSTANTS_DIR, TENSOR_CONSTANT_FILENAME_PREFIX, program.constants, traced[model_name].constants)
            _package_payload_config(writer, schema.PayloadConfig(config=constants), CONSTANTS_CONFIG_FILENAME_FORMAT.format(model_name))
            writer.write_bytes(MODELS_FILENAME_FORMAT.format(model_name), documents[model_name])
            writer.write_bytes(SAMPLE_INPUTS_FILENAME_FORMAT.format(model_name), b"")  # the loader reads no examples
        writer.write_string(f"{EXTRA_DIR}{MANIFEST_FILE}", manifest)
