"""A piece that could not be exported is stored as its weights and the name of its class; loading it takes the
class (or an instance) from the user, and refuses clearly without it. The loaded model equals eager on both
sides of the data-dependent branch, in a fresh process."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import _toy_models as toy  # noqa: E402
from piece_by_piece_serialize import ArtifactError, export_piece_by_piece, load_piece_by_piece  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
BATCH = torch.export.Dim("batch", min=1, max=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = export_piece_by_piece(toy.deep(), (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    assert result.report.behind_operators == ["top.mid.leaf"] and result.pieces["top.mid.leaf"].program is None
    path = tmp_path_factory.mktemp("deep") / "deep.pt2"
    result.save(path)
    result.close()  # its operators' names are free again: the same process may load the archive
    return path


_FRESH = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
import _toy_models as toy
from piece_by_piece_serialize import ArtifactError, load_piece_by_piece
try:
    load_piece_by_piece(sys.argv[2])
except ArtifactError as exc:
    print("refused:", exc.reason)
model = toy.deep()
for given in ([toy.Branchy], {"top.mid.leaf": model.top.mid.leaf}):
    loaded = load_piece_by_piece(sys.argv[2], implementations=given)
    for x in (torch.randn(5, 4) + 3, torch.randn(7, 4) - 3):  # both sides of the branch
        with torch.no_grad():
            print(type(given).__name__, torch.equal(loaded(x), model(x)))
    loaded.close()
"""


def _with_manifest(path: Path, dst: Path, change: Any) -> Path:
    """A copy of the archive ``path`` at ``dst``, its manifest's JSON changed in place by ``change``."""
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename.endswith("pbp_manifest.json"):
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest).encode()
            new.writestr(info, data)
    return dst


def test_a_piece_without_program_loads_with_its_class_or_an_instance_in_a_fresh_process(saved: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _FRESH, str(TESTS), str(saved)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0] == (
        "refused: the piece top.mid.leaf (_toy_models.Branchy) is stored without a program of its own (its export "
        "failed): pass its class or an instance of it in implementations= to load it"
    )
    assert lines[1:] == ["list True", "list True", "dict True", "dict True"]


def test_a_shape_rule_naming_a_dimension_the_call_lacks_is_refused_by_name_when_traced(saved: Path, tmp_path: Path) -> None:
    """The shape rules of a piece run by its class compute its outputs' shapes when the loaded model is traced
    again. The manifest's reader checks each rule's input tensor; a dimension beyond the tensor's rank is known
    only from a call's tensors: the fake kernel refuses it by name (it raised a bare IndexError)."""
    from piece_by_piece_serialize.custom_op import CustomOpError

    def past_the_rank(manifest: Any) -> None:
        manifest["operators"][0]["calls"][0]["rules"][0][0] = ["dim", {"tuple": [{"tuple": [0, 5]}]}]

    loaded = load_piece_by_piece(_with_manifest(saved, tmp_path / "rank.pt2", past_the_rank), implementations=[toy.Branchy])
    try:
        x = torch.randn(5, 4) + 3
        with torch.no_grad():
            assert loaded(x).shape == (5, 2)  # an eager call runs the class, not the rules
        message = r"top__mid__leaf: output tensor 0 dim 0: its rule names a dimension this call's input tensors lack \(input tensor 0 dim 5; their ranks: 2\)"
        with pytest.raises(CustomOpError, match=message):
            torch.export.export(loaded, (x,), dynamic_shapes=(({0: BATCH},),))
    finally:
        loaded.close()


def test_the_class_must_be_rebuildable_and_the_instance_must_hold_the_stored_weights(saved: Path) -> None:
    class NotIt(torch.nn.Module):
        pass

    with pytest.raises(TypeError, match="give module classes or module instances"):
        load_piece_by_piece(saved, implementations=["Branchy"])  # a name is not code: the loader imports nothing
    wrong = toy.Branchy()
    wrong.lin = torch.nn.Linear(4, 3)
    with pytest.raises(ArtifactError, match=r"the instance given for the piece top\.mid\.leaf has a torch\.float32 \(3, 4\) lin\.weight, where the archive has a torch\.float32 \(4, 4\)"):
        load_piece_by_piece(saved, implementations={"top.mid.leaf": wrong})
    with pytest.raises(ArtifactError, match=r"stored without a program"):
        load_piece_by_piece(saved, implementations=[NotIt])
    loaded = load_piece_by_piece(saved, implementations=[toy.Branchy])
    with pytest.raises(ArtifactError, match="already registered in this process"):
        load_piece_by_piece(saved, implementations=[toy.Branchy])
    loaded.close()
    load_piece_by_piece(saved, implementations=[toy.Branchy]).close()


def test_a_piece_holding_what_the_archive_cannot_carry_needs_an_instance(tmp_path: Path) -> None:
    model = toy.deep()
    model.top.mid.leaf.scale = lambda x: x  # an attribute no manifest can hold
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    result.save(tmp_path / "deep.pt2")
    result.close()
    with pytest.raises(ArtifactError, match=r"holds attributes the archive cannot carry: scale \(builtins\.function\); pass an instance"):
        load_piece_by_piece(tmp_path / "deep.pt2", implementations=[toy.Branchy])
    # said before any program is read (a load that fails for its classes does not first deserialize them): the
    # same refusal from a copy whose program documents are damaged, which the load refuses once the class is right
    with zipfile.ZipFile(tmp_path / "deep.pt2") as old, zipfile.ZipFile(tmp_path / "damaged.pt2", "w") as new:
        for info in old.infolist():
            new.writestr(info, b"{" if "/models/" in info.filename and info.filename.endswith(".json") else old.read(info))
    with pytest.raises(ArtifactError, match=r"holds attributes the archive cannot carry: scale"):
        load_piece_by_piece(tmp_path / "damaged.pt2", implementations=[toy.Branchy])
    with pytest.raises(ArtifactError, match=r"models/"):
        load_piece_by_piece(tmp_path / "damaged.pt2", implementations={"top.mid.leaf": model.top.mid.leaf})
    loaded = load_piece_by_piece(tmp_path / "deep.pt2", implementations={"top.mid.leaf": model.top.mid.leaf})
    x = torch.randn(4, 4)
    assert torch.equal(loaded(x), model(x))
    loaded.close()


class _Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class _Shift(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def test_a_rebuilt_class_names_every_submodule_class_it_lacks_at_once(tmp_path: Path) -> None:
    model = toy.deep()
    leaf = model.top.mid.leaf
    leaf.scale, leaf.shift, leaf.again = _Scale(), _Shift(), _Scale()  # submodules its code never calls
    result = export_piece_by_piece(model, (torch.randn(3, 4),), dynamic_shapes=({0: BATCH},))
    result.save(tmp_path / "deep.pt2")
    result.close()
    names = r"test_implementations\._Scale \(its submodule scale\), \S*test_implementations\._Shift \(its submodule shift\)"
    with pytest.raises(ArtifactError, match=rf"the piece top\.mid\.leaf needs 2 classes: \S*{names}; pass those classes in implementations="):
        load_piece_by_piece(tmp_path / "deep.pt2", implementations=[toy.Branchy])
    with pytest.raises(ArtifactError, match=r"\(its submodule shift\) is a \S+_Shift: pass that class in implementations="):
        load_piece_by_piece(tmp_path / "deep.pt2", implementations=[toy.Branchy, _Scale])  # one left: named alone
    loaded = load_piece_by_piece(tmp_path / "deep.pt2", implementations=[toy.Branchy, _Scale, _Shift])
    for sign in (1, -1):  # both sides of its branch
        x = sign * (torch.rand(4, 4) + 4)
        assert torch.equal(loaded(x), model(x))
    loaded.close()
    _hostile_class_names_are_named_not_imported(tmp_path / "deep.pt2", tmp_path)


def _hostile_class_names_are_named_not_imported(path: Path, tmp_path: Path) -> None:
    """The submodules' class names are the file's. One that is no qualified name (quotes, a newline) is refused by
    the manifest's reader; names of code (a module that would leave a marker if imported, ``os.system``) are only
    compared with the classes given and listed in the refusal. Each refusal names the file; nothing is imported and
    no operator stays registered."""
    (tmp_path / "pbp_marker_module.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\nclass Evil: pass\n")
    sys.path.insert(0, str(tmp_path))
    cases = {
        "not_a_name": ({"scale": "pbp_marker_module.Evil", "again": "a'b\nc.D"}, r"manifest operators\[0\]\.state\.children\[3\]\[1\]\.class: .* is not a qualified class name"),
        "code": ({"scale": "pbp_marker_module.Evil", "shift": "os.system"}, r"needs 2 classes: pbp_marker_module\.Evil \(its submodule scale\), os\.system \(its submodule shift\); pass those classes"),
        # one name of code: refused where the depth-first walk meets it, before any program is read and before
        # the module is rebuilt (which no longer checks again, and would look the name up)
        "one_code": ({"shift": "os.system"}, r"the piece \S+ \(its submodule shift\) is a os\.system: pass that class in implementations="),
    }
    try:
        for case, (names, message) in cases.items():
            def rename(manifest: Any, names: dict[str, str] = names) -> None:
                for child, state in manifest["operators"][0]["state"]["children"]:
                    state["class"] = names.get(child, state["class"])

            _with_manifest(path, tmp_path / f"{case}.pt2", rename)
            before = set(torch._C._dispatch_get_all_op_names())
            with pytest.raises(ArtifactError, match=message) as refused:
                load_piece_by_piece(tmp_path / f"{case}.pt2", implementations=[toy.Branchy, _Scale, _Shift])
            assert refused.value.path == str(tmp_path / f"{case}.pt2")
            assert not (tmp_path / "ran").exists() and "pbp_marker_module" not in sys.modules
            assert not set(torch._C._dispatch_get_all_op_names()) - before
    finally:
        sys.path.remove(str(tmp_path))


_JAMBA = r"""
import sys
import torch
from transformers.activations import SiLUActivation
from transformers.models.jamba.modeling_jamba import JambaMambaMixer, JambaRMSNorm
from piece_by_piece_serialize import load_piece_by_piece
loaded = load_piece_by_piece(sys.argv[1], implementations=[JambaMambaMixer, JambaRMSNorm, SiLUActivation])
with torch.no_grad():
    torch.save(loaded(torch.load(sys.argv[2]), use_cache=False).logits, sys.argv[3])
"""


def test_a_piece_holding_a_transformers_config_is_rebuilt_from_its_class_in_a_fresh_process(tmp_path: Path) -> None:
    # before: "the piece model.layers.0.mamba holds attributes the archive cannot carry: config (...JambaConfig)"
    pytest.importorskip("transformers")
    import _tiny_models as tiny

    model = tiny.jamba()
    dims = {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=32)}
    result = export_piece_by_piece(model, (tiny.ids(6, 2),), {"use_cache": False}, dynamic_shapes={"input_ids": dims})
    assert result.report.behind_operators == ["model.layers.0.mamba"] and result.pieces["model.layers.0.mamba"].program is None
    result.save(tmp_path / "jamba.pt2")
    result.close()
    with zipfile.ZipFile(tmp_path / "jamba.pt2") as archive:
        (name,) = [n for n in archive.namelist() if n.endswith("pbp_manifest.json")]
        (state,) = [op["state"] for op in json.loads(archive.read(name))["operators"]]
    assert [c[:2] for c in state["configs"]] == [["config", "jamba"]] and state["unstorable"] == []
    x = tiny.ids(11, 3, seed=3)
    torch.save(x, tmp_path / "x.pt")
    out = subprocess.run([sys.executable, "-c", _JAMBA, str(tmp_path / "jamba.pt2"), str(tmp_path / "x.pt"), str(tmp_path / "got.pt")],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    with torch.no_grad():
        torch.testing.assert_close(torch.load(tmp_path / "got.pt"), model(x, use_cache=False).logits, rtol=0, atol=1e-5)
    _hostile_configs_are_refused(tmp_path / "jamba.pt2", tmp_path)


def _hostile_configs_are_refused(path: Path, tmp_path: Path) -> None:
    # the carried config is the file's: a model_type transformers does not register, or an attention implementation
    # it does not have (a Hub kernel's name), is refused with the file named, and nothing stays registered
    from transformers.activations import SiLUActivation
    from transformers.models.jamba.modeling_jamba import JambaMambaMixer, JambaRMSNorm

    cases = {
        "no_such_model": (lambda c: c.__setitem__(1, "no_such_model"), "holds a config of model_type 'no_such_model', which transformers does not register"),
        "kernel": (lambda c: c[2]["dict"].append(["attn_implementation", "someone/kernel"]), "names the attention implementation 'someone/kernel'"),
    }
    for name, (change, message) in cases.items():
        def edit(manifest: Any, change: Any = change) -> None:
            (config,) = manifest["operators"][0]["state"]["configs"]
            config[2]["dict"] = [kv for kv in config[2]["dict"] if kv[0] != "attn_implementation"]
            change(config)

        _with_manifest(path, tmp_path / f"{name}.pt2", edit)
        before = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("pbp_")}
        with pytest.raises(ArtifactError, match=message) as refused:
            load_piece_by_piece(tmp_path / f"{name}.pt2", implementations=[JambaMambaMixer, JambaRMSNorm, SiLUActivation])
        assert refused.value.path == str(tmp_path / f"{name}.pt2")
        assert not {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("pbp_")} - before


def test_a_config_is_rebuilt_by_the_class_transformers_registers_for_its_type_and_no_other() -> None:
    pytest.importorskip("transformers")
    import _tiny_models as tiny
    from piece_by_piece_serialize.artifact._state import capture, rebuild

    mixer = tiny.jamba().model.layers[0].mamba
    state = capture(mixer)
    weights = {**dict(mixer.named_parameters()), **dict(mixer.named_buffers())}
    classes = {f"{type(m).__module__}.{type(m).__qualname__}": type(m) for m in mixer.modules()}
    rebuilt = rebuild(state, weights, classes, "jamba.pt2", "model.layers.0.mamba")
    assert type(rebuilt.config) is type(mixer.config) and rebuilt.config is not mixer.config
    assert rebuilt.config.to_dict() == mixer.config.to_dict() and rebuilt.config._attn_implementation == "eager"
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        assert torch.equal(rebuilt(x), mixer(x))
    (name, _, data), = state.configs
    other = dataclasses.replace(state, configs=((name, "no_such_model", data),))
    with pytest.raises(ArtifactError, match=r"holds a config of model_type 'no_such_model', which transformers does not register"):
        rebuild(other, weights, classes, "jamba.pt2", "model.layers.0.mamba")
    # an attention implementation transformers does not have would be looked up elsewhere (a Hub kernel) when read
    hub = dataclasses.replace(state, configs=((name, "jamba", {**data, "attn_implementation": "someone/kernel"}),))
    with pytest.raises(ArtifactError, match=r"names the attention implementation 'someone/kernel', which transformers does not register"):
        rebuild(hub, weights, classes, "jamba.pt2", "model.layers.0.mamba")


def test_a_carried_configs_float_tags_are_read_as_three_names_and_nothing_else(tmp_path: Path) -> None:
    # transformers' JSON writes inf as {"__float__": "Infinity"}; the loader reads back Infinity, -Infinity and NaN
    # only: another tag's text is never evaluated (nor given to float(): "1e999" would be inf), and a tag where the
    # config wants an int is refused by transformers' own validation, as an ArtifactError naming the file
    pytest.importorskip("transformers")
    import _tiny_models as tiny
    from piece_by_piece_serialize.artifact._state import capture, rebuild

    mixer = tiny.jamba().model.layers[0].mamba
    state = capture(mixer)
    weights = {**dict(mixer.named_parameters()), **dict(mixer.named_buffers())}
    classes = {f"{type(m).__module__}.{type(m).__qualname__}": type(m) for m in mixer.modules()}
    (name, model_type, data), = state.configs
    ran = tmp_path / "ran"
    for tag in (f"__import__('pathlib').Path({str(ran)!r}).touch()", "1e999", "Infinity", "NaN"):
        bad = dataclasses.replace(state, configs=((name, model_type, {**data, "hidden_size": {"__float__": tag}}),))
        with pytest.raises(ArtifactError, match=r"^jamba\.pt2: the piece model\.layers\.0\.mamba: its jamba config cannot be rebuilt: Validation error for field 'hidden_size'"):
            rebuild(bad, weights, classes, "jamba.pt2", "model.layers.0.mamba")
    assert not ran.exists()


def test_a_config_holding_an_infinite_float_is_rebuilt(tmp_path: Path) -> None:
    # Granite-MoE-hybrid's config holds time_step_limit=(0.0, inf), which transformers' JSON writes as
    # {"__float__": "Infinity"}; before: "its granitemoehybrid config cannot be rebuilt: Validation error for field
    # 'time_step_limit'" at load, for an archive the export wrote without complaint
    pytest.importorskip("transformers")
    import _tiny_models as tiny
    import _tiny_moe

    model = _tiny_moe.moe("granitemoehybrid")
    assert model.config.time_step_limit == (0.0, float("inf"))
    dims = {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=32)}
    layer = type(model.model.layers[0])
    result = export_piece_by_piece(model, (tiny.ids(6, 2),), {"use_cache": False}, dynamic_shapes={"input_ids": dims}, classes=layer)
    assert result.pieces["model.layers.0"].program is None  # its Mamba mixer pads to its chunk: no program of its own
    result.save(tmp_path / "granite.pt2")
    result.close()
    classes = list(dict.fromkeys(type(m) for m in model.model.layers[0].modules() if not type(m).__module__.startswith("torch.")))
    loaded = load_piece_by_piece(tmp_path / "granite.pt2", implementations=classes)
    x = tiny.ids(11, 3, seed=3)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x, use_cache=False).logits, model(x, use_cache=False).logits, rtol=0, atol=1e-5)
    loaded.close()
