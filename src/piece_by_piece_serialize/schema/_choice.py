"""Which schema callbacks run: :mod:`._transform`, or its mypyc-compiled copy ``_transform_compiled``.

The copy is optional (``make accel``) and is used only while its stamp matches the sources it was compiled against,
with the ``PBP_ENGINE`` values of the engine's choice (Note [compiled engine] in :mod:`.._lalr.choice`, which
holds the choice logic; this module only names the two modules). ``parse`` is the chosen module's ``parse``.
"""

from __future__ import annotations

import os

from .._lalr import choice as _engine_choice
from . import _transform

__all__ = ["parse", "NAME"]


_CHOICE = os.environ.get("PBP_ENGINE", "")
_MODULE = _engine_choice.choose_copy(
    _CHOICE,
    None if _CHOICE == "python" else _engine_choice.optional_copy(f"{__package__}._transform_compiled"),
    _transform,
    lambda: _engine_choice.sources_sha256(_transform),
    "compiled copy of the schema callbacks",
    "schema/*.py or _lalr/engine.py",
)
TYPE_CHECKING = False  # not typing's (see the package's __init__)
if TYPE_CHECKING:
    from ._transform import parse  # the checker sees the source; the copy is it, compiled
else:
    parse = _MODULE.parse
# "python" or "compiled": which callbacks run (the benchmarks and tests report it)
NAME = "python" if _MODULE is _transform else "compiled"
