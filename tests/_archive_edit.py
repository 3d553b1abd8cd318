"""Editing an archive the way an attacker who keeps it consistent would: after a program document is changed, the
manifest's digests (Note [program digests] in artifact/_archive.py) are those of the new documents, so that a test
reaches the check it is about rather than the digest's."""

from __future__ import annotations

import hashlib
import json
from typing import Any

MANIFEST = "extra/pbp_manifest.json"


def redigest(members: dict[str, bytes]) -> None:
    """Set the digests in ``members[MANIFEST]`` (members by their path inside the archive's folder) to those of the
    program documents in ``members``; a manifest that is not one (a test broke it on purpose) is left alone."""
    try:
        manifest: Any = json.loads(members[MANIFEST])
        entries = [manifest, *manifest["operators"]]
    except (KeyError, TypeError, ValueError):
        return
    entries += [e for op in manifest["operators"] if isinstance(op, dict) for e in op.get("by_size", []) if isinstance(e, dict)]
    for entry in entries:
        document = members.get(f"models/{entry.get('program')}.json") if isinstance(entry, dict) else None
        if document is not None and isinstance(entry.get("program_digest"), str):
            entry["program_digest"] = hashlib.sha256(document).hexdigest()
    members[MANIFEST] = json.dumps(manifest, indent=1).encode()
