"""Reading a PT2 archive without running anything in it.

Note [safe loading]
~~~~~~~~~~~~~~~~~~~
``torch.export.load`` trusts its file: a weight or a constant marked as pickled is unpickled, sample inputs
that fail the safe load are unpickled, every symbolic expression is given to ``sympy.sympify`` (which evaluates
Python), the guards are compiled with ``exec``, and the names in a program end up in the Python source FX
generates and compiles. So an artifact is read here instead, with the archive opened by :mod:`zipfile` and
torch's deserializer given only what was checked first; the loader's contract is that a file either loads as
the program it was saved with or is refused with :class:`ArtifactError` naming the archive and the member:

* the archive: one folder, no member twice (a reader taking the first copy and one taking the last would see
  different weights), a manifest of at most ``MAX_MANIFEST_BYTES``, program documents of at most
  ``MAX_PROGRAM_BYTES``, each size checked before the member is decompressed, and none decompressing to more than
  ``MAX_INFLATION`` times its size in the file (the cost of a read grows with the file, not with what it declares);
* each program document is read strictly against torch's own schema (Note [program documents] in
  :mod:`._program`): unknown fields, wrong types, names that are not plain ASCII identifiers or dotted paths
  of them, custom objects, nested graphs and pytree specs of other types are refused;
* every node's target is an allowed operator (Note [operator allowlist]) or a function of ``_operator``,
  ``math`` or ``torch.sym_*``; every symbolic expression is read by our own grammar (:mod:`..sym_expr`) and built into its
  sympy object by our own code, and torch is handed that object in place of the text (Note [expressions as
  objects]); every guard only compares sizes, strides and numbers of inputs named by identifiers; every range
  constraint is keyed by a short symbol name or an expression of the program, bounded by bounded integers
  (Note [range constraint keys]); torch's deserializer then reads each expression once per program (Note [each
  expression once]);
* weights and constants are raw bytes: anything marked as pickled, any custom or opaque object, any legacy
  ``.pt`` payload is refused; each tensor's sizes, strides, offset and item size give its extent (overflow
  checked), the member is read up to that extent and no further, straight into the tensor's buffer, and the
  extents read together must fit in the file (a compressed member cannot inflate past what the file holds);
  sample inputs are not read at all; each weight's dtype, sizes and strides equal its placeholder's in the
  program, and each piece program takes its operator's weights as the top program passes them and returns
  the dtypes and devices its call records;
* each program document is the one its operator was made from: the manifest holds the SHA-256 of each program's
  document, written from the same bytes, and a document that differs is refused (Note [program digests]);
* the operators are registered in a namespace made from a digest of the archive (every member's name, size
  and CRC), never the one the file names: a file cannot take over ``quantized_decomposed`` or any namespace
  of this process; the same archive loaded twice is refused as already registered;
* all or nothing: whatever fails (a check, torch's deserializer, FX compiling the runnable module), every
  operator the load registered is removed before the error propagates.

Any other refusal by torch's deserializer is reported the same way (an ``ArtifactError`` naming the member).

Imports: :mod:`._errors`, :mod:`._manifest`, :mod:`._program`, :mod:`._rules`; torch on use.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import zipfile
from collections.abc import Iterator
from typing import Any

from ._errors import ArtifactError
from ._manifest import MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest, read_manifest
from ._program import MAX_PROGRAM_BYTES, as_dataclasses, check_program
from ._program import dotted as _dotted
from ._rules import allowed_target


class Archive:
    """The members of one PT2 archive, read and checked on demand (Note [safe loading])."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.size = os.path.getsize(path)
        self.documents: dict[str, Any] = {}
        self.digests: dict[str, str] = {}  # the SHA-256 of each program document read (Note [program digests])
        self.declared = 0  # bytes the payloads read so far declare: together at most the file's size
        try:
            self.zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, EOFError, ValueError) as exc:
            raise ArtifactError(path, f"not an archive (a zip file): {exc}") from None
        names = self.zip.namelist()
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ArtifactError(path, f"the archive holds {twice} twice (a reader could take either copy)")
        tops = {n.partition("/")[0] for n in names}
        if len(tops) != 1 or not all("/" in n for n in names):
            raise ArtifactError(path, "not a PT2 archive: its files are not all in one folder")
        self.prefix = tops.pop() + "/"
        self.names = {n[len(self.prefix) :] for n in names}
        if self.text("archive_format", 16) != "pt2":
            raise ArtifactError(path, "not a PT2 archive: no archive_format 'pt2'")

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, member: str, limit: int) -> bytes:
        if member not in self.names:
            raise ArtifactError(self.path, f"the archive has no {member}")
        info = self.zip.getinfo(self.prefix + member)
        if info.file_size > limit:
            raise ArtifactError(self.path, f"{member} is {info.file_size} bytes, more than {limit}")
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > max(MAX_INFLATION * info.compress_size, 1 << 20):
            raise ArtifactError(
                self.path,
                f"{member} decompresses to {info.file_size} bytes from {info.compress_size}, more than {MAX_INFLATION} times: "
                "torch writes members stored, and a document that compresses so well is padding",
            )
        try:
            return self.zip.read(info)
        except MemoryError:
            raise ArtifactError(self.path, f"{member} ({info.file_size} bytes) does not fit in memory") from None
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:  # truncated or corrupt member
            raise ArtifactError(self.path, f"{member} cannot be read: {exc}") from None
        except Exception as exc:  # zlib.error and kin, raised by a damaged stream; reported, not swallowed
            raise ArtifactError(self.path, f"{member} cannot be read: {type(exc).__name__}: {exc}") from None

    def text(self, member: str, limit: int, digest: bool = False) -> str:
        """The member as UTF-8 text; with ``digest``, its bytes' SHA-256 kept in ``digests`` (a program document,
        Note [program digests])."""
        data = self.read(member, limit)
        if digest:
            self.digests[member] = hashlib.sha256(data).hexdigest()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ArtifactError(self.path, f"{member} is not UTF-8 text") from None

    def manifest(self) -> Manifest:
        return read_manifest(self.read(f"extra/{MANIFEST_FILE}", MAX_MANIFEST_BYTES), self.path)

    def document(self, member: str) -> Any:
        """The program document ``member``, read strictly (Note [program documents]); checked once, handed out
        once more (the loader reads the top program's calls before torch deserializes it)."""
        found = self.documents.pop(member, None)
        if found is None:
            found = self.documents[member] = check_program(self.json(member, digest=True), self.path, member)
        return found

    def namespace(self) -> str:
        """The namespace the archive's operators are registered in: ``pbp_`` and a digest of every member's name,
        size and CRC (the zip's own, so the weights are not hashed again), never a name the file chooses."""
        digest = hashlib.sha256()
        for info in sorted(self.zip.infolist(), key=lambda i: i.filename):
            digest.update(f"{info.filename}\0{info.file_size}\0{info.CRC}\0".encode())
        return "pbp_" + digest.hexdigest()[:20]

    def json(self, member: str, limit: int = MAX_PROGRAM_BYTES, digest: bool = False) -> Any:
        try:
            return json.loads(self.text(member, limit, digest), parse_constant=_no_constant)
        except ArtifactError:
            raise  # a missing or unreadable member, refused as such (an ArtifactError is a ValueError: not "not JSON")
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise ArtifactError(self.path, f"{member} is not JSON: {exc}") from None
        except MemoryError:
            raise ArtifactError(self.path, f"{member} does not fit in memory as JSON") from None

    def check_digest(self, name: str, digest: str | None, who: str) -> None:
        """The program document ``name`` (read already) is the one the manifest's ``digest`` was taken of
        (Note [program digests])."""
        member = f"models/{name}.json"
        if digest is None or self.digests.get(member) != digest:
            raise ArtifactError(
                self.path,
                f"{member} is not the program {who} was saved with: its SHA-256 is {self.digests.get(member)}, the manifest "
                f"says {digest}",
            )

    # ---- a program -------------------------------------------------------------------------------------

    def program(self, name: str, rename: tuple[str, str] | None = None) -> Any:
        """The exported program ``name`` of the archive, checked, then deserialized by torch; ``rename`` maps the
        namespace the file's operators are called in to the one they are registered in."""
        if not name.isidentifier() or not name.isascii():
            raise ArtifactError(self.path, f"{name!r} is not a program name")
        if f"data/weights/{name}.pt" in self.names or f"data/constants/{name}.pt" in self.names:
            raise ArtifactError(self.path, f"the program {name} has legacy pickled weights or constants")
        member = f"models/{name}.json"
        serialized = self.document(member)
        if rename is not None:
            _rename(serialized, *rename)
        _check_program(serialized, self.path, member, None if rename is None else rename[1])
        state_dict = self._payloads(f"data/weights/{name}_weights_config.json", "data/weights/", "weight_")
        constants = self._payloads(f"data/constants/{name}_constants_config.json", "data/constants/", "tensor_")
        _check_lifted(serialized, state_dict, constants, self.path, member)
        from torch._export.serde.serialize import ExportedProgramDeserializer

        try:
            program = as_dataclasses(serialized)  # Note [documents as dataclasses] in ._program
            with _each_expression_once():
                return ExportedProgramDeserializer(None).deserialize(program, state_dict, constants, None)
        except (Exception, RecursionError) as exc:  # torch's own refusal of a member that passed the checks above, reported as ours
            raise ArtifactError(self.path, f"{member} does not deserialize: {type(exc).__name__}: {exc}") from None

    def _payloads(self, config_member: str, directory: str, prefix: str) -> dict[str, Any]:
        """The tensors of a weights or constants config: raw bytes only, each member read up to the extent its
        tensors declare and no further (Note [safe loading])."""
        config = self.json(config_member, 1 << 28)
        if not isinstance(config, dict) or set(config) != {"config"} or not isinstance(config["config"], dict):
            raise ArtifactError(self.path, f"{config_member} is not a payload config")
        declared: list[tuple[str, str, Any, list[int], list[int], int, bool]] = []
        need: dict[str, int] = {}  # bytes of each member the tensors in it reach
        for fqn, meta in config["config"].items():
            where = f"{config_member} entry {fqn!r}"
            if not _dotted(fqn):
                raise ArtifactError(self.path, f"{where}: not a dotted name of ASCII identifiers")
            if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
                raise ArtifactError(self.path, f"{where}: a pickled payload, which loading would unpickle; refused")
            if set(meta) != _PAYLOAD_KEYS:
                raise ArtifactError(self.path, f"{where}: expected the fields {sorted(_PAYLOAD_KEYS)}, got {sorted(meta)}")
            path_name = meta.get("path_name")
            if not isinstance(path_name, str) or not path_name.startswith(prefix) or not (path_name[len(prefix) :].isascii() and path_name[len(prefix) :].isdigit()):
                raise ArtifactError(self.path, f"{where}: {path_name!r} is not a {prefix}<n> payload")
            member = directory + path_name
            dtype, sizes, strides, offset, item = self._meta(meta, where)
            extent = offset + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) + 1 if math.prod(sizes) else 0
            if member not in self.names:
                raise ArtifactError(self.path, f"{where}: the archive has no {member}")
            need[member] = max(need.get(member, 0), extent * item)
            declared.append((fqn, member, dtype, sizes, strides, offset, bool(meta.get("is_param") is True and meta["tensor_meta"].get("requires_grad") is True)))
        for member, nbytes in need.items():
            size = self.zip.getinfo(self.prefix + member).file_size
            if nbytes > size:
                raise ArtifactError(self.path, f"{member}: its tensors reach byte {nbytes}, past its {size} bytes")
        self.declared += sum(need.values())
        if self.declared > self.size:
            raise ArtifactError(self.path, f"{config_member}: the tensors read declare {self.declared} bytes, more than the file's {self.size}")
        import torch

        bases = {member: self._raw(member, nbytes) for member, nbytes in need.items()}
        out: dict[str, Any] = {}
        for fqn, member, dtype, sizes, strides, offset, grad in declared:
            raw = bases[member]
            item = torch.empty((), dtype=dtype).element_size()
            if raw.numel() % item:
                raise ArtifactError(self.path, f"{member}: read as {dtype} by one tensor and as another dtype by another")
            base = raw.view(dtype) if raw.numel() else torch.empty(0, dtype=dtype)
            tensor = torch.as_strided(base, sizes, strides, offset) if math.prod(sizes) else torch.empty(sizes, dtype=dtype)
            meta = config["config"][fqn]
            if grad and not (dtype.is_floating_point or dtype.is_complex):
                raise ArtifactError(self.path, f"{config_member} entry {fqn!r}: a {dtype} parameter cannot require gradients")
            out[fqn] = torch.nn.Parameter(tensor, requires_grad=grad) if meta.get("is_param") is True else tensor
        return out

    def _meta(self, meta: dict[str, Any], where: str) -> tuple[Any, list[int], list[int], int, int]:
        """The dtype, sizes, strides, offset and item size of a payload's tensor, checked."""
        import torch
        from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

        tm = meta.get("tensor_meta")
        if not isinstance(tm, dict):
            raise ArtifactError(self.path, f"{where}: no tensor_meta")
        dtype = _SERIALIZE_TO_TORCH_DTYPE.get(tm.get("dtype")) if type(tm.get("dtype")) is int else None
        if dtype is None:
            raise ArtifactError(self.path, f"{where}: unknown dtype {tm.get('dtype')!r}")
        sizes, strides, offset = _ints(tm.get("sizes")), _ints(tm.get("strides")), _ints([tm.get("storage_offset")])
        if sizes is None or strides is None or offset is None or len(sizes) != len(strides) or len(sizes) > 64:
            raise ArtifactError(self.path, f"{where}: sizes, strides and offset must be integers, as many sizes as strides (at most 64)")
        device = tm.get("device")
        if not isinstance(device, dict) or device.get("type") != "cpu":
            raise ArtifactError(self.path, f"{where}: only cpu tensors are read, not {device!r}")
        if math.prod(max(n, 1) for n in sizes) >= 2**62 or sum(n * st for n, st in zip(sizes, strides, strict=True)) + offset[0] >= 2**62:
            raise ArtifactError(self.path, f"{where}: sizes {sizes} and strides {strides} overflow a tensor's extent")
        return dtype, sizes, strides, offset[0], torch.empty((), dtype=dtype).element_size()

    def _raw(self, member: str, nbytes: int) -> Any:
        """The first ``nbytes`` of ``member`` as a byte tensor, read in place (no second copy)."""
        import torch

        buffer = bytearray(nbytes)
        view = memoryview(buffer)
        try:
            with self.zip.open(self.prefix + member) as stream:
                f: Any = stream  # a ZipExtFile, an io.BufferedIOBase: readinto is there
                done = 0
                while done < nbytes:
                    n = f.readinto(view[done : done + _CHUNK])
                    if not n:
                        raise ArtifactError(self.path, f"{member} ends at byte {done}, before the {nbytes} its tensors declare")
                    done += n
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            raise ArtifactError(self.path, f"{member} cannot be read: {exc}") from None
        except Exception as exc:  # zlib.error and kin, raised by a damaged stream; reported, not swallowed
            raise ArtifactError(self.path, f"{member} cannot be read: {type(exc).__name__}: {exc}") from None
        return torch.frombuffer(buffer, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)


# What a member read whole (a manifest, a program document, a payload config) may decompress to, in times its size in
# the file: so reading an archive costs memory in proportion to its size on disk, not to a size it declares. torch
# writes every member stored (1x); JSON deflates about 5-10x; above 1 MiB, 32x is padding.
MAX_INFLATION = 32

# the fields torch's PayloadMeta has; the tensor read in chunks of this many bytes
_PAYLOAD_KEYS = frozenset({"path_name", "is_param", "use_pickle", "tensor_meta"})
_CHUNK = 1 << 24


# Note [each expression once]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's deserializer reads every symbolic size with GraphModuleDeserializer._parse_sym_expr, which prints the
# expression (str, for its table of names) and calls itself on each of its arguments: one occurrence costs the
# expression's size times its depth in sympy's printer, and a program repeats its few expressions on every node. A
# program by size of a chunked loop (Qwen3-Next's gated delta-net, unrolled over its 64-row chunk) holds thousands of
# nodes sized by ``(s + Mod(64 - Mod(s, 64), 64))//64`` and kin: its archive (4 programs) took 52 s to load, more than
# half of it there. So while a program is deserialized here, that method gives an expression it has processed in the
# same deserializer the symbol it returned then, which is what it would return again (the same name, from its table),
# its effects already had (the expression's range set, its symbol named, its hint given: a call with a hint the shape
# environment does not hold yet runs again). The same load took 24 s. The method is set on torch's class for the time of
# one deserialization, under a lock (reentrant: a deserialization never starts another, but would not wait on itself); a
# deserialization of another thread in that time takes it too, and computes the same. Without the method (another
# torch), nothing is changed.
_ONE_DESERIALIZATION = threading.RLock()


@contextlib.contextmanager
def _each_expression_once() -> Iterator[None]:
    from torch._export.serde.serialize import GraphModuleDeserializer

    parse = GraphModuleDeserializer.__dict__.get("_parse_sym_expr")
    if parse is None:
        yield
        return

    def once(self: Any, expr: Any, hint: Any = None) -> Any:
        done = self.__dict__.setdefault("_pbp_parsed", {})
        key = (type(expr), expr)  # a text, or the sympy object our reader built (Note [expressions as objects])
        sym = done.get(key)
        if sym is None or (hint is not None and sym not in self.shape_env.backed_var_to_val):
            sym = done[key] = parse(self, expr, hint)
        return sym

    with _ONE_DESERIALIZATION:
        setattr(GraphModuleDeserializer, "_parse_sym_expr", once)  # noqa: B010  # a method of torch's, set for a while
        try:
            yield
        finally:
            setattr(GraphModuleDeserializer, "_parse_sym_expr", parse)  # noqa: B010


def _rename(serialized: dict[str, Any], old: str, new: str) -> None:
    """Call the operators of the namespace ``old`` in ``new``: the loader registers them in a namespace of its own
    (Note [safe loading]), whatever the file names."""
    prefix = f"torch.ops.{old}."
    for node in serialized["graph_module"]["graph"]["nodes"]:
        if node["target"].startswith(prefix):  # torch's dotted target, not our language
            node["target"] = f"torch.ops.{new}." + node["target"][len(prefix) :]


def _check_lifted(serialized: dict[str, Any], state_dict: dict[str, Any], constants: dict[str, Any], source: str, member: str) -> None:
    """Each weight and constant the program lifts is in the payloads, with the dtype, sizes and strides of its
    placeholder."""
    from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

    graph = serialized["graph_module"]["graph"]
    for spec in serialized["graph_module"]["signature"]["input_specs"]:
        (kind, body), = spec.items()
        key = {"parameter": "parameter_name", "buffer": "buffer_name", "tensor_constant": "tensor_constant_name"}.get(kind)
        if key is None:
            continue
        fqn, arg = body[key], body["arg"]["name"]
        tensor = (constants if kind == "tensor_constant" else state_dict).get(fqn)
        if tensor is None and kind == "buffer":
            tensor = constants.get(fqn)  # a non-persistent buffer is stored with the constants
        meta = graph["tensor_values"].get(arg)
        if tensor is None or meta is None:
            raise ArtifactError(source, f"{member}: the {kind} {fqn} has no " + ("payload" if tensor is None else "placeholder"))
        sizes, strides = _ints(meta["sizes"]), _ints(meta["strides"])
        if _SERIALIZE_TO_TORCH_DTYPE.get(meta["dtype"]) != tensor.dtype or sizes != list(tensor.shape) or strides != list(tensor.stride()):
            raise ArtifactError(
                source,
                f"{member}: the {kind} {fqn} is a {tensor.dtype} {tuple(tensor.shape)} with strides {tensor.stride()} where its "
                f"placeholder {arg} says {_SERIALIZE_TO_TORCH_DTYPE.get(meta['dtype'])} {sizes} with strides {strides}",
            )


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _ints(values: Any) -> list[int] | None:
    if not isinstance(values, list):
        return None
    out = []
    for v in values:
        if not isinstance(v, dict) or set(v) != {"as_int"} or type(v["as_int"]) is not int or not 0 <= v["as_int"] < 2**48:
            return None
        out.append(v["as_int"])
    return out




# ---------------------------------------------------------------------------------------------------
# what a program may hold (Note [safe loading])


# Note [program digests]
# ~~~~~~~~~~~~~~~~~~~~~~~
# An operator's schema (its call structures, weights and outputs in the manifest) was made from one program, and
# the checks of shapes and dtypes cannot tell that program from another with the same signature (a piece whose
# ReLU is another's Tanh). So the writer serializes each program document once, and the manifest holds the SHA-256
# of those bytes, per operator and for the top program; the loader digests each document as it reads it and
# refuses one that differs, before any operator is registered. It is a check of consistency, not a signature: whoever
# rewrites a document can rewrite the manifest, and then the archive is refused or loads as what it now says.


def _check_program(data: Any, source: str, member: str, own: str | None = None) -> None:
    """Every node of ``data`` (a program document the strict reader read: names, expressions, guards and ranges
    checked in that one walk, Note [program documents]) calls an allowed operator (Note [operator allowlist]);
    ``own`` is the namespace this load registered."""
    for i, node in enumerate(data["graph_module"]["graph"]["nodes"]):
        if not allowed_target(node["target"], own):
            raise ArtifactError(
                source, f"{member} at .graph_module.graph.nodes[{i}].target calls {node['target']!r}, which is not an allowed operator (Note [operator allowlist])"
            )
