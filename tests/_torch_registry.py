"""The operator schemas torch itself ships, read in a clean interpreter.

Tests register custom operators (``torch.library``), so ``torch._C._jit_get_all_schemas()`` called late in
a session also lists those. The oracle tests want exactly what torch registers on import: this module reads
the list once, in a subprocess that imports nothing but torch.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

# torch 2.13.0+cpu registers this many schemas on import (the figure the issues and docs quote).
TORCH_2_13_REGISTERED = 4374

_SCRIPT = "import json, torch; print(json.dumps([str(s) for s in torch._C._jit_get_all_schemas()]))"


@functools.lru_cache(maxsize=1)
def shipped_schemas() -> tuple[str, ...]:
    """Every schema torch registers on import, printed by torch, in registry order."""
    out = subprocess.run([sys.executable, "-c", _SCRIPT], check=True, capture_output=True, text=True).stdout
    return tuple(json.loads(out))
