"""Hostile archives, each built from a legitimate tiny Llama archive saved by ``PieceByPieceExport.save``: one
test per class of attack of issue 29, each refused cleanly (an ``ArtifactError`` naming the file and the
member) or, for the namespace, made harmless; the genuine archive still loads afterwards.

Classes: code run by the load (names torch's FX code generator writes into Python source), operators outside
the allowlist, resources not bounded by the declarations, archives that disagree with themselves, and a load
that fails late without leaving its operators registered. Where a payload would run code it creates a marker
file; the test checks it is absent.
"""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers.modeling_outputs  # noqa: E402, F401  # the model's output class, as the model's code imports it

import _tiny_models as tiny  # noqa: E402
from _archive_edit import redigest  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402
from piece_by_piece_serialize.artifact import _archive, _rules  # noqa: E402

BATCH = torch.export.Dim("batch", min=1, max=32)
SEQ = torch.export.Dim("seq", min=2, max=128)
TOP = "models/model.json"
PIECE = "models/piece_0.json"
WEIGHTS = "data/weights/model_weights_config.json"
MANIFEST = "extra/pbp_manifest.json"


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tiny.llama()
    ids = tiny.ids(6, 2)
    result = export_piece_by_piece(
        model, (ids,), {"use_cache": False}, dynamic_shapes={"input_ids": {0: BATCH, 1: SEQ}}, classes=type(model.model.layers[0])
    )
    path = tmp_path_factory.mktemp("llama") / "llama.pt2"
    result.save(path)
    result.close()
    return path


def _rewrite(
    src: Path, dst: Path, changes: dict[str, Callable[[bytes], bytes]], *, deflate: tuple[str, ...] = (),
    extra: tuple[tuple[str, bytes], ...] = (), consistent: bool = True,
) -> Path:  # fmt: skip
    """A copy of ``src`` with members changed (by their path inside the archive's folder), some compressed, and
    extra members appended (a name already there makes a duplicate); ``consistent``: the manifest's digests are
    those of the changed program documents, as an attacker would write them."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        prefix = old.namelist()[0].split("/", 1)[0] + "/"
        members = {info.filename[len(prefix) :]: changes.get(info.filename[len(prefix) :], lambda d: d)(old.read(info)) for info in old.infolist()}
        if consistent and any(m.startswith("models/") for m in changes):
            redigest(members)
        for info in old.infolist():
            member = info.filename[len(prefix) :]
            info.compress_type = zipfile.ZIP_DEFLATED if member in deflate else info.compress_type
            new.writestr(info, members[member])
        for member, data in extra:
            with pytest.warns(UserWarning, match="Duplicate name"):
                new.writestr(prefix + member, data)
    return dst


def _json(change: Callable[[Any], None]) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        parsed = json.loads(data)
        change(parsed)
        return json.dumps(parsed).encode()

    return apply


def _renamed(old: str, new: str) -> Callable[[bytes], bytes]:
    """Every JSON string (key or value) equal to ``old`` becomes ``new``: a name changed consistently."""

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {walk(k): walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return new if x == old else x

    return lambda data: json.dumps(walk(json.loads(data))).encode()


def _marker(tmp_path: Path) -> tuple[Path, str]:
    marker = tmp_path / "ran"
    return marker, f"__import__('pathlib').Path({str(marker)!r}).touch()"


def _refused(path: Path, message: str) -> ArtifactError:
    with pytest.raises(ArtifactError, match=message) as info:
        load_piece_by_piece(path)
    assert info.value.path == str(path)
    return info.value


def _calls_own_operator(node: dict[str, Any]) -> bool:
    return node["target"].startswith("torch.ops.pbp_")


# ---- class 1: code run by the load ----------------------------------------------------------------------


def _arg_name(program: Any, code: str) -> None:
    program["graph_module"]["module_call_graph"][0]["signature"]["forward_arg_names"][-1] = f"x=({code})"


def _spec_key(program: Any, code: str) -> None:
    # an argument moved to the forward's keywords: FX writes its key between quotes, which the key closes
    signature = program["graph_module"]["module_call_graph"][0]["signature"]
    spec = json.loads(signature["in_spec"])
    args, kwargs = spec[1]["children_spec"]
    kwargs["context"] = json.dumps([f"a': ({code}), 'b"])
    kwargs["children_spec"].append(args["children_spec"].pop())
    signature["in_spec"] = json.dumps(spec)


_NAMES: dict[str, tuple[Callable[[str], Callable[[bytes], bytes]], str]] = {
    "forward_arg_names": (lambda code: _json(lambda p: _arg_name(p, code)), r"forward_arg_names: \"x=.*is not an ASCII identifier"),
    "input name": (lambda code: _renamed("tensors_13", f"x=({code})"), r"inputs\[13\].as_tensor.name: \"x=.* is not an ASCII identifier"),
    "node name": (lambda code: _renamed("sym_size_int_5", f"(({code}))"), r"nodes\[0\].outputs\[0\].as_sym_int.as_name: .* is not an ASCII identifier"),
    "keyword": (lambda code: _renamed("sym_size_int_5", "if"), r"nodes\[0\].outputs\[0\].as_sym_int.as_name: \"if\" is not an ASCII identifier"),
    "pytree key": (lambda code: _json(lambda p: _spec_key(p, code)), r"in_spec: a pytree spec node of builtins.dict with the context"),
    "full-width letter": (lambda code: _renamed("tensors_0", "\uff54ensors_0"), r"inputs\[0\].as_tensor.name: \"\\uff54ensors_0\" is not an ASCII identifier"),
}


@pytest.mark.parametrize("case", list(_NAMES))
def test_names_written_into_generated_code_are_ascii_identifiers(llama: Path, tmp_path: Path, case: str) -> None:
    marker, code = _marker(tmp_path)
    change, message = _NAMES[case]
    path = _rewrite(llama, tmp_path / "names.pt2", {PIECE: change(code)})
    error = _refused(path, message)
    assert PIECE in error.reason
    assert not marker.exists()


def test_a_range_constraint_is_a_plain_expression(llama: Path, tmp_path: Path) -> None:
    marker, code = _marker(tmp_path)

    def constraint(program: Any) -> None:  # a key is the text of an expression over the graph's symbols
        program["range_constraints"][code] = {"min_val": 0, "max_val": 1}

    path = _rewrite(llama, tmp_path / "constraint.pt2", {PIECE: _json(constraint)})
    _refused(path, r"models/piece_0.json at .range_constraints: names .*, which is neither a symbol's name of at most 8 characters nor an expression of the program")
    assert not marker.exists()


def test_a_weight_name_with_a_full_width_letter_is_refused(llama: Path, tmp_path: Path) -> None:
    # Python NFKC-normalizes identifiers: a full-width n (U+FF4E) is "n" in generated code, another name in the tables
    name = "module.model.norm.weight"
    path = _rewrite(llama, tmp_path / "fullwidth.pt2", {TOP: _renamed(name, "module.model.\uff4eorm.weight"), WEIGHTS: _renamed(name, "module.model.\uff4eorm.weight")})
    _refused(path, r"models/model.json at .*parameter_name: \"module.model.\\uff4eorm.weight\" is not a dotted path of ASCII identifiers")


_MANIFEST_NAMES = [
    (lambda m: m["operators"][0].update(piece="model.layers.0.\uff53elf_attn"), r"operators\[0\].piece: \"model.layers.0.\\uff53elf_attn\" is not a dotted path"),
    (lambda m: m["operators"][0]["weights"].__setitem__(0, "model.layers.0.input_layern\u043erm.weight"), r"operators\[0\].weights\[0\]: .* is not a dotted path"),
    (lambda m: m["operators"][0].update({"class": "transformers.models.llama.modeling_llama.Ll\u0430maDecoderLayer"}), r"operators\[0\].class: .* is not a qualified class name of ASCII identifiers"),
    (lambda m: m.update(model_class="builtins.eval('1')"), r"model_class: .* is not a qualified class name"),
]


@pytest.mark.parametrize(("change", "message"), _MANIFEST_NAMES, ids=["piece_fullwidth", "weight_cyrillic", "class_cyrillic", "class_code"])
def test_names_in_the_manifest_are_ascii_dotted_paths(llama: Path, tmp_path: Path, change: Callable[[Any], None], message: str) -> None:
    # a piece path or a class name is matched against the user's implementations= by name: two spellings of one
    # name (a look-alike letter) would match one and show another
    _refused(_rewrite(llama, tmp_path / "names.pt2", {MANIFEST: _json(change)}), r"manifest " + message)


# ---- class 2: operators ---------------------------------------------------------------------------------


def test_operators_outside_the_allowlist_are_refused_by_name(llama: Path, tmp_path: Path) -> None:
    for op in (torch.ops.aten.from_file.default, torch.ops.aten._reshape_alias.default, torch.ops.aten.set_.source_Tensor, torch.ops.aten.as_strided.default):
        assert not _rules.allowed_operator(op), op

    def from_file(program: Any) -> None:
        node = next(n for n in program["graph_module"]["graph"]["nodes"] if n["target"] == "torch.ops.aten.mul.Tensor")
        node["target"] = "torch.ops.aten.from_file.default"

    path = _rewrite(llama, tmp_path / "from_file.pt2", {PIECE: _json(from_file)})
    _refused(path, r"models/piece_0.json at .*target calls 'torch.ops.aten.from_file.default', which is not an allowed operator")


# ---- class 3: resources ---------------------------------------------------------------------------------


def _first_weight(config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return next((k, v) for k, v in config["config"].items() if len(v["tensor_meta"]["sizes"]) == 2)


def test_a_weight_is_read_only_up_to_its_declared_extent(llama: Path, tmp_path: Path) -> None:
    config = json.loads(zipfile.ZipFile(llama).read(f"llama/{WEIGHTS}"))
    _, meta = _first_weight(config)
    member = "data/weights/" + meta["path_name"]
    original = zipfile.ZipFile(llama).read(f"llama/{member}")
    # 24 MiB past the tensor's bytes, compressed to a few kilobytes: reading the member whole costs them
    path = _rewrite(llama, tmp_path / "long.pt2", {member: lambda data: data + bytes(24 << 20)}, deflate=(member,))
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        loaded = load_piece_by_piece(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20, peak  # the whole member, read and copied, is 48 MiB
    # the tensor's own bytes, untouched: the load computes what the genuine archive computes
    assert len(original) == torch.Size([s["as_int"] for s in meta["tensor_meta"]["sizes"]]).numel() * 4
    genuine = load_piece_by_piece(llama)  # another digest, another namespace: both load at once
    x = tiny.ids(5, 2, seed=3)
    with torch.no_grad():
        assert torch.equal(loaded(x, use_cache=False).logits, genuine(x, use_cache=False).logits)
    loaded.close()
    genuine.close()


def test_declared_bytes_must_fit_the_file_and_extents_must_not_overflow(llama: Path, tmp_path: Path) -> None:
    config = json.loads(zipfile.ZipFile(llama).read(f"llama/{WEIGHTS}"))
    fqn, meta = _first_weight(config)
    member = "data/weights/" + meta["path_name"]

    def huge(config: Any) -> None:
        config["config"][fqn]["tensor_meta"]["sizes"] = [{"as_int": 4096}, {"as_int": 4096}]
        config["config"][fqn]["tensor_meta"]["strides"] = [{"as_int": 4096}, {"as_int": 1}]

    path = _rewrite(llama, tmp_path / "bomb.pt2", {member: lambda data: bytes(64 << 20), WEIGHTS: _json(huge)}, deflate=(member,))
    _refused(path, r"the tensors read declare \d+ bytes, more than the file's \d+")

    def overflow(config: Any) -> None:
        config["config"][fqn]["tensor_meta"]["sizes"] = [{"as_int": 2**47}, {"as_int": 2**47}, {"as_int": 0}]
        config["config"][fqn]["tensor_meta"]["strides"] = [{"as_int": 1}, {"as_int": 1}, {"as_int": 1}]

    path = _rewrite(llama, tmp_path / "overflow.pt2", {WEIGHTS: _json(overflow)})
    _refused(path, rf"{WEIGHTS} entry '{fqn}': sizes .* overflow a tensor's extent")


def test_a_program_document_is_bounded_before_it_is_read(llama: Path, tmp_path: Path) -> None:
    big = b"[" + b" " * (_archive.MAX_PROGRAM_BYTES + 1) + b"]"
    path = _rewrite(llama, tmp_path / "big.pt2", {PIECE: lambda data: big}, deflate=(PIECE,))
    assert path.stat().st_size < 1 << 20
    _refused(path, rf"{PIECE} is {len(big)} bytes, more than {_archive.MAX_PROGRAM_BYTES}")
    # under the limit, a 32 MiB document of padding in a file of 0.1 MiB: refused before it is decompressed
    padded = b"[" + b" " * (32 << 20) + b"]"
    path = _rewrite(llama, tmp_path / "padded.pt2", {PIECE: lambda data: padded}, deflate=(PIECE,))
    _refused(path, rf"{PIECE} decompresses to {len(padded)} bytes from \d+, more than {_archive.MAX_INFLATION} times")
    # a document deflated as a user's zip tool would: it loads
    path = _rewrite(llama, tmp_path / "deflated.pt2", {}, deflate=(PIECE, TOP, MANIFEST))
    load_piece_by_piece(path).close()


def _tensors_as_int(program: Any) -> None:  # the operator's Tensor[] argument an integer
    node = next(n for n in program["graph_module"]["graph"]["nodes"] if _calls_own_operator(n))
    node["inputs"][0]["arg"] = {"as_int": 3}


def _size_as_string(program: Any) -> None:
    next(iter(program["graph_module"]["graph"]["tensor_values"].values()))["sizes"][0] = {"as_int": "3"}


def _capped(*candidate: Any) -> Callable[[Any], None]:
    """A learned shape rule (Note [learned shapes]) capped at a constant, its one candidate ``candidate``."""

    def change(manifest: Any) -> None:
        manifest["operators"][0]["calls"][0]["rules"][0][0] = ["min", {"tuple": [{"tuple": list(candidate)}]}]

    return change


_DIM = {"tuple": [0, 1]}


def _rule(kind: str, *candidates: Any) -> Callable[[Any], None]:
    """A learned shape rule of ``kind`` for the first output's first dimension, its candidates ``candidates``."""

    def change(manifest: Any) -> None:
        manifest["operators"][0]["calls"][0]["rules"][0][0] = [kind, {"tuple": list(candidates)}]

    return change


def _unknown_field(program: Any) -> None:
    program["graph_module"]["graph"]["nodes"][0]["exec"] = "print(1)"


def _eps(value: Any) -> Callable[[Any], None]:
    """The layer's norm epsilon (``add(mean, 1e-06)``, node 6), an argument torch's schema types as a float,
    replaced by ``value``: what the loader's own conversion to dataclasses reads (Note [documents as dataclasses])."""

    def change(program: Any) -> None:
        (eps,) = [a["arg"] for a in program["graph_module"]["graph"]["nodes"][6]["inputs"] if "as_float" in a["arg"]]
        eps.clear()
        eps.update(value)

    return change


@pytest.mark.parametrize(
    ("member", "change", "message"),
    [
        (TOP, _tensors_as_int, r"the program calls pbp_\w+.model__layers__0.default with arguments that are not \(tensors, weights, call\)"),
        (PIECE, _size_as_string, r"sizes\[0\].as_int: expected a 64-bit integer, got \"3\""),
        (PIECE, _unknown_field, r"nodes\[0\]: Node has no field 'exec'"),
        (PIECE, _eps({"as_float": "__import__('os').getcwd()"}), r"nodes\[6\].inputs\[1\].arg.as_float: expected a number, got \"__import__"),
        (PIECE, _eps({"as_float": "1e-06"}), r"nodes\[6\].inputs\[1\].arg.as_float: expected a number, got \"1e-06\""),
        (PIECE, _eps({"as_float": 1e-06, "as_int": 1}), r"nodes\[6\].inputs\[1\].arg: a Argument holds exactly one of its members, got 2"),
        *[(MANIFEST, _capped(*c), r"\.rules\[0\]\[0\]\[1\]: not the candidates of a 'min' rule") for c in (
            (_DIM, None, "15"),  # a cap that is no size
            (_DIM, None, -1),
            (_DIM, None, True),  # a boolean, which Python counts as an int
            (_DIM, None, 2**62),
            (_DIM, {"tuple": [0, -1]}, 15),  # a dimension that is none
            (_DIM, 15),  # no cap
            (None, None, 15),
        )],
        # an input tensor the call does not have (the llama's layer takes 5), by every kind of rule that names one
        *[(MANIFEST, _rule(kind, c), r"\.rules\[0\]\[0\]\[1\]: names input tensor 9, where its call has 5 \(numbered from 0\)") for kind, c in (
            ("dim", {"tuple": [9, 0]}),
            ("sum", {"tuple": [_DIM, {"tuple": [9, 0]}]}),
            ("plus", {"tuple": [{"tuple": [9, 0]}, 1]}),
            ("min", {"tuple": [_DIM, {"tuple": [9, 0]}, 15]}),
        )],
    ],
    ids=["operator argument", "size", "unknown field", "float as code", "float as text", "union of two", "cap a string", "cap negative", "cap a boolean", "cap too large",
         "second dimension negative", "two items", "no first dimension",
         "dim of a tensor beyond", "sum of a tensor beyond", "plus on a tensor beyond", "min of a tensor beyond"],
)
def test_malformed_fields_are_artifact_errors_not_raw_exceptions(llama: Path, tmp_path: Path, member: str, change: Callable[[Any], None], message: str) -> None:
    path = _rewrite(llama, tmp_path / "malformed.pt2", {member: _json(change)})
    before = set(torch._C._dispatch_get_all_op_names())
    _refused(path, message)
    assert not set(torch._C._dispatch_get_all_op_names()) - before  # no operator of the refused archive left registered


# ---- class 4: consistency -------------------------------------------------------------------------------


def test_a_weight_must_match_its_placeholder(llama: Path, tmp_path: Path) -> None:
    config = json.loads(zipfile.ZipFile(llama).read(f"llama/{WEIGHTS}"))
    fqn, _ = _first_weight(config)

    def half(config: Any) -> None:
        config["config"][fqn]["tensor_meta"]["dtype"] = 6  # float16: the same sizes fit the member

    path = _rewrite(llama, tmp_path / "dtype.pt2", {WEIGHTS: _json(half)})
    _refused(path, rf"models/model.json: the parameter {fqn} is a torch.float16 .* where its placeholder \w+ says torch.float32")


def test_a_piece_pointing_at_another_pieces_program_is_refused(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=torch.nn.Linear)
    result.save(tmp_path / "two.pt2")
    result.close()

    def swap(m: Any) -> None:
        a, b = m["operators"]
        a["program"], b["program"] = b["program"], a["program"]

    path = _rewrite(tmp_path / "two.pt2", tmp_path / "swapped.pt2", {MANIFEST: _json(swap)})
    _refused(path, r"models/piece_\d.json is not the program the operator \w+ \(\d\) was saved with: its SHA-256 is [0-9a-f]{64}, the manifest says [0-9a-f]{64}")

    def swap_with_digests(m: Any) -> None:  # consistent: the shapes still tell the programs apart
        a, b = m["operators"]
        for key in ("program", "program_digest"):
            a[key], b[key] = b[key], a[key]

    path = _rewrite(tmp_path / "two.pt2", tmp_path / "swapped_digests.pt2", {MANIFEST: _json(swap_with_digests)})
    _refused(path, r"the program piece_\d of \d takes its input \w+ as a torch.float32 \(\d, 4\) .* where the weight its operator passes is")


class _Rectified(torch.nn.Module):
    def __init__(self, activation: torch.nn.Module) -> None:
        super().__init__()
        self.linear, self.activation = torch.nn.Linear(4, 4), activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))


def test_a_program_with_the_same_signature_as_the_pieces_own_is_refused_by_its_digest(tmp_path: Path) -> None:
    # two pieces of one signature (4 -> 4, one Linear's weights): only the digest tells their programs apart
    model = torch.nn.Sequential(_Rectified(torch.nn.ReLU()), _Rectified(torch.nn.Tanh())).eval()
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},), classes=_Rectified)
    result.save(tmp_path / "two.pt2")
    result.close()
    manifest = json.loads(zipfile.ZipFile(tmp_path / "two.pt2").read(f"two/{MANIFEST}"))
    assert len({o["program"] for o in manifest["operators"]}) == 2  # not one shared program

    def point_both_at_the_first(m: Any) -> None:
        m["operators"][1]["program"] = m["operators"][0]["program"]

    path = _rewrite(tmp_path / "two.pt2", tmp_path / "relu_twice.pt2", {MANIFEST: _json(point_both_at_the_first)})
    _refused(path, r"models/piece_0.json is not the program the operator \w+ \(1\) was saved with")


def test_duplicate_members_are_refused(llama: Path, tmp_path: Path) -> None:
    path = _rewrite(llama, tmp_path / "twice.pt2", {}, extra=(("data/weights/weight_0", bytes(8192)),))
    _refused(path, "the archive holds llama/data/weights/weight_0 twice")


def test_the_namespace_is_the_archives_digest_not_the_files(llama: Path, tmp_path: Path) -> None:
    manifest = json.loads(zipfile.ZipFile(llama).read(f"llama/{MANIFEST}"))
    path = _rewrite(
        llama,
        tmp_path / "squat.pt2",
        {MANIFEST: _json(lambda m: m.update(namespace="quantized_decomposed")), TOP: lambda d: d.replace(f"torch.ops.{manifest['namespace']}.".encode(), b"torch.ops.quantized_decomposed.")},
    )
    loaded = load_piece_by_piece(path)
    try:
        assert loaded.manifest.namespace.startswith("pbp_") and loaded.manifest.namespace != manifest["namespace"]
        registered = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("quantized_decomposed::m")]
        assert registered == []
        with torch.no_grad():
            assert loaded(tiny.ids(4, 1), use_cache=False).logits.shape == (1, 4, tiny.VOCAB)
    finally:
        loaded.close()


def test_a_defaultdict_factory_comes_from_an_allowlist(llama: Path, tmp_path: Path) -> None:
    def popen(m: Any) -> None:
        m["call"]["kinds"][0] = "___v1_DD_subprocess__Popen_D_a_X_E"

    import subprocess  # noqa: F401  # loaded, as in any process: the factory must still be refused

    path = _rewrite(llama, tmp_path / "factory.pt2", {MANIFEST: _json(popen)})
    _refused(path, r"manifest call.kinds\[0\]: a defaultdict whose factory is subprocess.Popen")


# ---- class 5: all or nothing ----------------------------------------------------------------------------


def test_a_load_that_fails_late_leaves_no_operator_registered(llama: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from piece_by_piece_serialize.artifact import _runnable

    def broken(self: Any, *args: Any) -> None:
        raise RuntimeError("compiling the program failed")

    before = set(torch._C._dispatch_get_all_op_names())
    with monkeypatch.context() as patch:
        patch.setattr(_runnable.FlatProgramModule, "__init__", broken)
        _refused(llama, "the program model cannot be made runnable: RuntimeError: compiling the program failed")
    assert not set(torch._C._dispatch_get_all_op_names()) - before  # only additions: an earlier export may be collected meanwhile
    load_piece_by_piece(llama).close()


def test_a_program_torchs_deserializer_refuses_leaves_its_method_as_it_was_and_no_operator(llama: Path, tmp_path: Path) -> None:
    """A layer program whose rsqrt reads a tensor no node makes passes the strict reader (each name is an identifier)
    and is refused by torch's deserializer, while it reads each expression once (Note [each expression once]): the
    refusal is an ArtifactError naming the file and the member, no operator stays registered, torch's method is its
    own again, and the archive as saved still loads and computes after it."""
    from torch._export.serde.serialize import GraphModuleDeserializer

    own = GraphModuleDeserializer.__dict__["_parse_sym_expr"]

    def dangling(program: Any) -> None:
        program["graph_module"]["graph"]["nodes"][7]["inputs"][0]["arg"]["as_tensor"]["name"] = "nowhere"

    path = _rewrite(llama, tmp_path / "dangling.pt2", {PIECE: _json(dangling)})
    before = set(torch._C._dispatch_get_all_op_names())
    _refused(path, r"models/piece_0.json does not deserialize: \w+Error")
    assert not set(torch._C._dispatch_get_all_op_names()) - before
    assert GraphModuleDeserializer.__dict__["_parse_sym_expr"] is own
    loaded = load_piece_by_piece(llama)
    model, ids = tiny.llama(), tiny.ids(5, 3)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, use_cache=False).logits, model(ids, use_cache=False).logits, rtol=0, atol=1e-5)
    loaded.close()
