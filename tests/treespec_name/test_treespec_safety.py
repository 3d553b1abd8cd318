"""TreeSpec names on hostile or unencodable input: legacy pickle names, limits, imports, encoder errors.

Decoding must never run code: a legacy pickle name that would execute code is refused before anything is
unpickled, a name never imports the module of a type it mentions, and over-limit names (long, deep, huge
counts) fail with TreeSpecNameError before anything proportional to their counts is allocated.
"""

from __future__ import annotations

import base64
import builtins
import pickle
import subprocess
import sys
import zlib
from collections import defaultdict, namedtuple
from pathlib import Path

import corpus_inputs
import pytest
import torch.utils._pytree as pytree
from test_treespec_roundtrip import decode_cold

from piece_by_piece_serialize.errors import TreeSpecNameError
from piece_by_piece_serialize.treespec_name import (
    LEGACY_MESSAGE,
    NameLimits,
    pretty_name,
    tree_spec_as_name,
    tree_spec_from_legacy_name_unsafe,
    tree_spec_from_name,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "piece_by_piece_serialize"


def legacy_name(obj: object) -> str:
    """The original scheme, re-implemented from its description (tests and bench only)."""
    return "___" + base64.b32encode(zlib.compress(pickle.dumps(obj))).decode("ascii").replace("=", "_")


class _Exploit:
    def __reduce__(self) -> tuple:
        return (exec, ("import builtins; builtins._pbp_treespec_pwned = True",))


# ------------------------------------------------------------------------------------------ legacy names


def test_legacy_pickle_name_that_runs_code_is_refused_without_running_it() -> None:
    name = legacy_name((1, _Exploit()))
    assert name.isidentifier()
    for decode in (tree_spec_from_name, pretty_name):
        with pytest.raises(TreeSpecNameError) as info:
            decode(name)
        assert info.value.msg == LEGACY_MESSAGE and info.value.pos == 3
    assert not hasattr(builtins, "_pbp_treespec_pwned")


def test_legacy_opt_in_reads_a_trusted_legacy_name() -> None:
    leaves, spec = pytree.tree_flatten({"input_ids": 1, "attention_mask": 2})
    name = legacy_name((2, spec))
    with pytest.raises(TreeSpecNameError, match="^legacy pickle-based"):
        tree_spec_from_name(name)
    n, decoded = tree_spec_from_legacy_name_unsafe(name)
    assert n == 2 and decoded == spec
    assert tree_spec_as_name(decoded, n) == "___v1_D_input_ids_X_attention_mask_X_E"


def test_legacy_opt_in_refuses_v1_names() -> None:
    with pytest.raises(TreeSpecNameError, match="^not a legacy TreeSpec name"):
        tree_spec_from_legacy_name_unsafe("___v1_X")


def test_pickle_is_confined_to_the_legacy_function() -> None:
    for path in SRC.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "import pickle" in line or "pickle.load" in line:
                assert "legacy" in line, (path.name, line)
    decoder = (SRC / "treespec_name" / "__init__.py").read_text(encoding="utf-8")
    for word in ("eval(", "exec(", "importlib", "__import__", "import_module"):
        assert word not in decoder
    for module in ("treespec_name/_ast.py", "treespec_name/_transform.py"):
        text = (SRC / module).read_text(encoding="utf-8")
        assert "import pickle" not in text and "pickle." not in text and "importlib" not in text


# ------------------------------------------------------------------------------------------- no imports


_UNLOADED_CANDIDATES = [("xml.dom.minidom", "Node"), ("wsgiref.simple_server", "WSGIServer"), ("imaplib", "IMAP4"),
                        ("mailbox", "Mailbox"), ("ftplib", "FTP")]


def test_a_name_never_imports_the_module_it_mentions() -> None:
    module, cls = next((m, c) for m, c in _UNLOADED_CANDIDATES if m not in sys.modules)
    ref = module.replace(".", "__") + "__" + cls
    with pytest.raises(TreeSpecNameError, match=f"^unknown pytree node type '{module}.{cls}'"):
        tree_spec_from_name(f"___v1_C_{ref}_X_E")
    with pytest.raises(TreeSpecNameError, match="^unknown defaultdict factory"):
        tree_spec_from_name(f"___v1_DD_{ref}_D_E")
    with pytest.raises(TreeSpecNameError, match="^unknown namedtuple class"):
        tree_spec_from_name(f"___v1_NT_{ref}_X_E")
    assert module not in sys.modules


def test_lazy_module_attributes_are_not_triggered() -> None:
    import transformers

    # transformers resolves most top-level names lazily through a module __getattr__ that imports submodules.
    lazy_names = [n for n in dir(transformers) if n.endswith("Model") and n not in vars(transformers)]
    assert lazy_names, "transformers exposes no lazily imported model class"
    lazy = lazy_names[0]
    tree_spec_from_name("___v1_X")  # the parser itself (lark) is loaded before the snapshot
    before = set(sys.modules)
    with pytest.raises(TreeSpecNameError, match="^unknown namedtuple class"):
        tree_spec_from_name(f"___v1_NT_transformers__{lazy}_X_E")
    assert set(sys.modules) == before


def test_importing_the_module_imports_neither_torch_nor_lark() -> None:
    code = ("import sys, piece_by_piece_serialize.treespec_name as m; "
            "print(sorted(k for k in ('torch', 'lark', 'transformers') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------------------- limits


def test_over_long_name_fails_before_parsing() -> None:
    limits = NameLimits(max_length=20)
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_from_name("___v1_L_" + "X_L_E_" * 10 + "E", limits=limits)
    assert info.value.msg == "name is longer than the limit of 20 characters" and info.value.pos == 20


@pytest.mark.parametrize("count", ["999999999", "9" * 4000, "100001"])
def test_huge_leaf_count_is_refused_before_allocating(count: str) -> None:
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_from_name(f"___v1_L_X{count}_E")
    assert info.value.msg.startswith("name has more than the limit of 100000 nodes")
    assert info.value.pos == 8


def test_node_limit_counts_every_leaf_of_a_run() -> None:
    assert tree_spec_from_name("___v1_L_X9_E", limits=NameLimits(max_nodes=10))[0] == 9
    with pytest.raises(TreeSpecNameError, match="limit of 9 nodes"):
        tree_spec_from_name("___v1_L_X9_E", limits=NameLimits(max_nodes=9))


def test_depth_limit_is_exact_and_deep_names_fail_without_recursion() -> None:
    def nested(d: int) -> str:
        return "___v1_" + "T_" * d + "X" + "_E" * d

    assert tree_spec_from_name(nested(1000))[0] == 1
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_from_name(nested(1001))
    assert info.value.msg == "name nests deeper than the limit of 1000 levels"
    assert info.value.pos == len("___v1_") + 2 * 1000  # the 1001st opener
    # 30,000 levels: far beyond the recursion limit; refused cleanly (no RecursionError).
    with pytest.raises(TreeSpecNameError, match="deeper than the limit"):
        tree_spec_from_name(nested(30_000), limits=NameLimits(max_length=200_000))


@pytest.mark.parametrize("cut", range(1, 38))
def test_every_truncation_of_a_valid_name_is_refused(cut: int) -> None:
    name = "___v1_D_input_ids_X_attention_mask_X_E"
    with pytest.raises(TreeSpecNameError):
        tree_spec_from_name(name[:cut])


def test_encoder_applies_the_limits_too() -> None:
    _, spec = pytree.tree_flatten(corpus_inputs.nest(20, 0))
    with pytest.raises(TreeSpecNameError, match="^cannot encode this TreeSpec: name nests deeper"):
        tree_spec_as_name(spec, 1, limits=NameLimits(max_depth=10))
    with pytest.raises(TreeSpecNameError, match="would be longer than the limit of 30"):
        tree_spec_as_name(spec, 1, limits=NameLimits(max_length=30))


# -------------------------------------------------------------------------------------- encoder errors


def test_leaf_count_must_match() -> None:
    _, spec = pytree.tree_flatten((1, 2))
    with pytest.raises(ValueError, match=r"^n_elements=3 but the TreeSpec has 2 leaves$"):
        tree_spec_as_name(spec, 3)
    with pytest.raises(ValueError, match="n_elements=True"):
        tree_spec_as_name(pytree.tree_flatten(1)[1], True)


def test_leaf_count_defaults_to_the_specs() -> None:
    from piece_by_piece_serialize.treespec_name import name_leaf_count, tree_spec_from_name

    leaves, spec = pytree.tree_flatten({"a": (1, 2), "b": [3, {"c": 4}]})
    name = tree_spec_as_name(spec)
    assert name == tree_spec_as_name(spec, len(leaves)) == tree_spec_as_name(spec, n_elements=None)
    assert tree_spec_from_name(name) == (4, spec)
    assert name_leaf_count(name) == 4  # the same count from the name alone, without building the spec


def test_type_errors() -> None:
    with pytest.raises(TypeError, match="tree_spec must be a TreeSpec, got tuple"):
        tree_spec_as_name((1, 2), 2)
    with pytest.raises(TypeError, match="a TreeSpec name must be a str, got bytes"):
        tree_spec_from_name(b"___v1_X")


def test_local_namedtuple_error_names_it_and_the_fix() -> None:
    Local = namedtuple("Local", "a b")
    _, spec = pytree.tree_flatten(Local(1, 2))
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_as_name(spec, 2)
    msg = info.value.msg
    assert f"namedtuple class {__name__}.Local: it is not reachable" in msg and "_register_namedtuple" in msg
    assert info.value.text == f"{__name__}.Local"
    pytree._register_namedtuple(Local, serialized_type_name="tests.treespec.Local")
    try:
        name = tree_spec_as_name(spec, 2)
        assert name == "___v1_NT_tests__treespec__Local_X2_E"
        assert decode_cold(name)[1] == spec
    finally:
        pytree._deregister_pytree_node(Local)


def _make_list() -> list:
    return []


@pytest.mark.parametrize("factory", [lambda: 0, _make_list], ids=["lambda", "module_function"])
def test_defaultdict_factory_must_be_a_class(factory: object) -> None:
    _, spec = pytree.tree_flatten(defaultdict(factory, {"a": 1}))
    with pytest.raises(TreeSpecNameError, match="^cannot encode defaultdict factory .*: it is not a class; use a "
                                                "class defined at module level"):
        tree_spec_as_name(spec, 1)


@pytest.mark.parametrize("name", ["___v1_DD_posix__fork_D_E", "___v1_DD_exit_D_E", "___v1_DD_os__system_D_E"])
def test_decoded_factories_are_classes_only(name: str) -> None:
    # A function factory would run on the first missing key of the rebuilt defaultdict.
    with pytest.raises(TreeSpecNameError, match="^unknown defaultdict factory .*defines a class by that name"):
        tree_spec_from_name(name)


class _Unregistered:
    pass


class _OpaqueContext:
    def __init__(self, items: list) -> None:
        self.items = items


class _BadHooks:
    def __init__(self, items: list) -> None:
        self.items = items


pytree.register_pytree_node(_OpaqueContext, lambda o: (o.items, object()), lambda v, c: _OpaqueContext(list(v)),
                            serialized_type_name="tests.OpaqueContext")
pytree.register_pytree_node(_BadHooks, lambda o: (o.items, {"n": len(o.items)}), lambda v, c: _BadHooks(list(v)),
                            serialized_type_name="tests.BadHooks",
                            to_dumpable_context=lambda c: {"n": c["n"] + 1}, from_dumpable_context=lambda d: d)


def test_unregistered_node_type_error() -> None:
    spec = pytree.TreeSpec(_Unregistered, None, [])
    with pytest.raises(TreeSpecNameError) as info:
        tree_spec_as_name(spec, 0)
    assert "not a registered pytree node" in info.value.msg and "register_pytree_node" in info.value.msg
    assert info.value.text == f"{__name__}._Unregistered"


def test_context_that_is_not_a_plain_value() -> None:
    _, spec = pytree.tree_flatten(_OpaqueContext([1]))
    with pytest.raises(TreeSpecNameError, match="a value of type object is not a plain value.*to_dumpable_context"):
        tree_spec_as_name(spec, 1)


def test_hooks_that_do_not_round_trip() -> None:
    _, spec = pytree.tree_flatten(_BadHooks([1, 2]))
    with pytest.raises(TreeSpecNameError, match="does not give the context back"):
        tree_spec_as_name(spec, 2)


@pytest.mark.parametrize("key", [b"bytes", frozenset({1}), 1j, object()])
def test_unsupported_dict_key_types(key: object) -> None:
    _, spec = pytree.tree_flatten({key: 1})
    with pytest.raises(TreeSpecNameError, match=f"a value of type {type(key).__name__} is not a plain value"):
        tree_spec_as_name(spec, 1)
