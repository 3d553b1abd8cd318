"""The printer's spelling of bodies and plain keys, against a character-by-character reference.

``encode_body`` and ``is_plain_key`` take shortcuts through ``str`` methods for the common ASCII cases (they run
in the canonical check of every decode); the spelling must stay exactly the one the grammar's comment defines,
or names printed before would stop being canonical. The reference below applies the rules one character at a
time.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from piece_by_piece_serialize.treespec_name._ast import encode_body, is_plain_key

LOWER_DIGIT = set("abcdefghijklmnopqrstuvwxyz0123456789")
ALNUM = LOWER_DIGIT | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def reference_body(s: str) -> str:
    out = []
    for i, ch in enumerate(s):
        inner = 0 < i < len(s) - 1
        if ch in ALNUM and ch != "Z":
            out.append(ch)
        elif ch == "_" and inner and s[i + 1] in LOWER_DIGIT:
            out.append("_")
        elif ch == "." and inner and s[i + 1] not in "_.":
            out.append("__")
        elif ch in {"_": "Zu", ".": "Zd", "Z": "Zz"}:
            out.append({"_": "Zu", ".": "Zd", "Z": "Zz"}[ch])
        else:
            cp = ord(ch)
            out.append(f"Zx{cp:02x}" if cp < 0x100 else f"Zy{cp:04x}" if cp < 0x10000 else f"Zw{cp:06x}")
    return "".join(out)


def reference_plain_key(s: str) -> bool:
    if not s or not ("a" <= s[0] <= "z"):
        return False
    for i, ch in enumerate(s):
        if ch == "_":
            if i + 1 == len(s) or s[i + 1] not in LOWER_DIGIT:
                return False
        elif ch not in ALNUM:
            return False
    return True


# Every string of up to 4 characters over an alphabet that hits each rule and each shortcut's guard.
ALPHABET = "aB0Z_.-é²"
EXHAUSTIVE = ["".join(p) for n in range(5) for p in itertools.product(ALPHABET, repeat=n)]


def test_exhaustive_short_strings() -> None:
    assert len(EXHAUSTIVE) == sum(len(ALPHABET) ** n for n in range(5)) == 7381
    body_mismatches = [s for s in EXHAUSTIVE if encode_body(s) != reference_body(s)]
    key_mismatches = [s for s in EXHAUSTIVE if is_plain_key(s) != reference_plain_key(s)]
    assert body_mismatches == [] and key_mismatches == []
    assert sum(map(is_plain_key, EXHAUSTIVE)) > 0  # the shortcut's True branch is exercised


@given(st.text(alphabet=st.sampled_from("abcXYZ019_.-é²١"), max_size=24))
def test_random_strings(s: str) -> None:
    assert encode_body(s) == reference_body(s)
    assert is_plain_key(s) == reference_plain_key(s)


def test_common_spellings() -> None:
    assert encode_body("torch.return_types.max") == "torch__return_types__max"
    assert encode_body("transformers.cache_utils.DynamicCache") == "transformers__cache_utils__DynamicCache"
    assert encode_body("a._b") == "aZd_b"  # "." before "_" is escaped; the "_" before "b" is literal
    assert encode_body("") == ""
    assert is_plain_key("input_ids") and not is_plain_key("input__ids") and not is_plain_key("x_Y")
