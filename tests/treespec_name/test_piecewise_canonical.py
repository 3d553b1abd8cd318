"""The piecewise canonical check (Note [piecewise canonical check] in ``_treespec_transform``) against re-printing.

A decode skips re-printing the name when the checking callbacks found every piece canonical. That shortcut is
only sound if it never accepts what the printer would spell differently; it is only fast if it accepts every
canonical name. Both are checked here on the corpora, the fuzz seeds, names encoded from the realistic inputs,
and mutants of all of them (deleted, doubled and replaced characters, and spellings of the same values that the
grammar allows but the printer does not write).
"""

from __future__ import annotations

import random
from pathlib import Path

from corpus_inputs import build_corpus

from piece_by_piece_serialize.treespec_name._ast import print_name
from piece_by_piece_serialize.treespec_name._transform import parse, parse_if_canonical
from piece_by_piece_serialize.errors import TreeSpecNameError

ROOT = Path(__file__).resolve().parents[2]
# Spellings the grammar accepts for a value the printer writes otherwise, spliced into the mutants.
RESPELLINGS = ["_I05", "_Im0", "_DQ_I01_X_E", "_Sabc", "_Sa_b", "_SZx41", "_SZy0041", "_SaZd", "_SaZub",
               "_C_torch__Size_K_N_E", "_NT_aZdb_E", "_MaZzb", "_S", "_Im00", "_I0"]


def _texts() -> list[str]:
    import torch.utils._pytree as pytree

    from piece_by_piece_serialize.treespec_name import tree_spec_as_name

    texts = []
    for folder in (ROOT / "tests" / "corpus" / "treespec", ROOT / "fuzz" / "corpus" / "treespec_name"):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in ("", ".name"):
                try:
                    texts.append(path.read_text(encoding="utf-8").rstrip("\n"))
                except UnicodeDecodeError:
                    continue
    for tree in build_corpus().values():
        leaves, spec = pytree.tree_flatten(tree)
        texts.append(tree_spec_as_name(spec, len(leaves)))
    return [t for t in dict.fromkeys(texts) if t]


def _mutants(texts: list[str], count: int) -> list[str]:
    rng = random.Random(7)
    alphabet = sorted(set("".join(texts)))
    out = []
    for _ in range(count):
        text = rng.choice(texts)
        i = rng.randrange(len(text))
        kind = rng.randrange(4)
        if kind == 0:
            out.append(text[:i] + text[i + 1:])
        elif kind == 1:
            out.append(text[:i] + text[i] + text[i:])
        elif kind == 2:
            out.append(text[:i] + rng.choice(alphabet) + text[i + 1:])
        else:  # a respelling at a token boundary: after a dict key "_D", or as a tuple item
            piece = rng.choice(RESPELLINGS)
            out.append(rng.choice(["___v1_D", "___v1_T_C_a_K", "___v1_O"]) + piece + "_X_E")
            out.append("___v1_T_NT_a" + piece.replace("_S", "_X_S", 1) + "_E")
            out.append(text.replace("_X_E", piece + "_X_E", 1))
    return out


def test_shortcut_agrees_with_reprinting() -> None:
    texts = _texts()
    assert len(texts) >= 300
    tally = {"accepted": 0, "non-canonical": 0, "malformed": 0}
    for text in texts + _mutants(texts, 6_000):
        try:
            slow = parse(text)
        except TreeSpecNameError as slow_error:
            try:
                fast = parse_if_canonical(text)
            except TreeSpecNameError as fast_error:
                assert (fast_error.msg, fast_error.pos) == (slow_error.msg, slow_error.pos), text
            else:  # a non-canonical piece came before the fault: the caller parses again and gets the error
                assert fast is None, f"the checked parse did not refuse {text!r}"
            tally["malformed"] += 1
            continue
        fast = parse_if_canonical(text)
        canonical = str(slow) == text
        if canonical:
            assert fast is not None, f"a canonical name falls back to re-printing: {text!r}"
            assert print_name(fast) == text if type(fast) is not type(slow) or len(text) > 2000 else fast == slow
            tally["accepted"] += 1
        else:
            assert fast is None, f"the shortcut accepts a non-canonical name: {text!r}, canonical {str(slow)!r}"
            tally["non-canonical"] += 1
    assert min(tally.values()) >= 500, tally
