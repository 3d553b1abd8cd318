"""A program of flat tensors run as the model: the model's own arguments in, its own output out.

Both the result of an export and a loaded artifact hand the user this module. It flattens a call as the
operators do (Note [call keys] in :mod:`..custom_op`), refuses a call whose structure is not the one the
program was exported for, runs the program, and rebuilds the output, writing the caches back into the
caller's objects (Note [write back]).

Imports: :mod:`..custom_op` (the call structure, its sites); torch.
"""

from __future__ import annotations

from typing import Any

import torch

from ..custom_op._calls import Call, describe_call, difference, finish_call
from ..custom_op._sites import Sites


class CallStructureError(ValueError):
    """A call of a runnable program whose structure is not the example's."""

    __module__ = "piece_by_piece_serialize.artifact"


class FlatProgramModule(torch.nn.Module):
    """``program`` (a ``torch.export.ExportedProgram`` of flat tensors) called with the model's own arguments."""

    def __init__(self, program: Any, call: Call, key: str, owner: Any, name: str) -> None:
        super().__init__()
        self.program = program.module()
        # plain attributes: the structure, and whatever keeps the program's operators registered
        self.__dict__["call"] = call
        self.__dict__["key"] = key
        self.__dict__["owner"] = owner
        self.__dict__["name"] = name
        self.__dict__["sites"] = Sites(name)  # Note [call sites]: the example's structure, matched not described

    call: Call
    key: str
    owner: Any
    name: str
    sites: Sites

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        found = self.sites.match(args, kwargs)
        if found is None:
            call, tensors, key = describe_call(self.name, args, kwargs)
            if key != self.key:
                raise CallStructureError(
                    f"{self.name}: {difference(self.call, call)}; every call must pass the same arguments, the same ones "
                    f"None and the same scalar values as the example (the example's call: {self.key}; this one: {key})"
                )
            self.sites.add(args, kwargs, self.call, key)
        else:
            tensors = found[1]
        domain = self.__dict__.get("domain")
        if domain is not None and not domain.holds([tuple(t.shape) for t in tensors]):
            sizes = ", ".join("x".join(map(str, t.shape)) for t in tensors)
            raise ValueError(
                f"{self.name}: the sizes of this call ({sizes}) are outside those the program was exported for (its guards "
                "and ranges, which torch checks too: Note [the file's sizes] in onnx_export): export from examples of these sizes"
            )
        out = self.program(*(t.contiguous() for t in tensors))  # as it was exported (export/_job.py, _contiguous)
        return finish_call(self.call, list(out), [*args, *kwargs.values()])
