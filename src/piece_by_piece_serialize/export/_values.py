"""Whether an export has values to compare: a model on the ``meta`` device or under ``FakeTensorMode`` has none.

Note [exports without values]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A model built on the ``meta`` device (``with torch.device("meta"):``) or under torch's ``FakeTensorMode`` has
parameters that carry shapes, dtypes and devices but no values: a 70B-shaped model costs nothing to build that
way, and ``torch.export`` traces it as it traces real weights. Piece by piece, everything that learns from eager
calls still works on such tensors: the recording runs the model on the tracing path (Note [the tracing path]),
where transformers avoids the data-dependent branches it takes eagerly, and meta and fake kernels give every
output's shape, dtype and device, which is all the operators learn (Note [learned shapes] in
:mod:`..custom_op`). What needs values does not: comparing the program or a piece with eager. Those checks
then compare shapes and dtypes only, and the report says, in its text, its Markdown and its dict, that the
comparison of values was not run and why (never a silent 0).

Imports: :mod:`..artifact` (what a tensor without values is, as the writer tells it); torch on use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..artifact._write import is_valueless

__all__ = ["is_valueless", "why_no_values"]


def why_no_values(model: Any, tensors: Iterable[Any]) -> str | None:
    """Why the values of an export cannot be compared with eager (Note [exports without values]), or None."""
    from torch._subclasses.fake_tensor import FakeTensor

    weights = [*model.parameters(), *model.buffers()]
    for what, group in (("the model's weights are", weights), ("the example's tensors are", list(tensors))):
        if any(isinstance(t, FakeTensor) for t in group):
            return f"{what} fake tensors (FakeTensorMode): no values to compare"
        if any(getattr(t, "is_meta", False) for t in group):
            return f"{what} on the meta device: no values to compare"
    return None
