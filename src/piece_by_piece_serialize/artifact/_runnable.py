"""A program of flat tensors run as the model: the model's own arguments in, its own output out.

Both the result of an export and a loaded artifact hand the user this module. It flattens a call as the
operators do (Note [call keys] in :mod:`..custom_op`), refuses a call whose structure is not the one the
program was exported for, runs the program, and rebuilds the output, writing the caches back into the
caller's objects (Note [write back]).

Note [one check of the sizes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``program.module()`` checks its inputs on every call (torch's ``_check_input_constraints_pre_hook``): each
size against its placeholder's symbol and range, in sympy, about 0.3 ms per program call of a tiny decoder
layer; in a loaded 8-layer decode step it was 70% of the call's time, which then took 4.4x eager's. A program's
domain (Note [domains] in :mod:`..domains`) holds the same conditions, and the inputs' ranks, evaluated on plain
integers in microseconds. So where the domain reads, a loaded program is checked by it alone and torch's check
is turned off with the module's own switch (``validate_inputs``); where it does not read, torch's check stays.
The domain compares its ``size == constant`` and ``size == size`` conditions as tuples and its ranges as one
``low <= size <= high`` per size (a top program's 130 range conditions at 32 layers; the 33 domains of a loaded
32-layer decode step went from 0.48 to 0.24 ms a call); only what is left is walked as expressions.

Note [flat graphs]
~~~~~~~~~~~~~~~~~
A piece's program is called once per call of its operator, with the flat tensors the operator got, in the order
of its placeholders. ``program.module()`` takes them through torch's pytree (flattened against the program's input
spec, the outputs rebuilt from its output spec) and through three hooks around its ``forward``: the input check the
domain replaces, and a registration of the module classes among the example's inputs, of which a program of flat
tensors has none. So where the domain is the check, the operator runs a copy of the module's graph generated
without pytree, a module of the same attributes (its constants) with nothing around its graph: the same nodes, in
the same order, on the same tensors. Its generated ``forward`` is called as it is: ``Module.__call__`` would only find
no hook to run.

A piece's own program is checked on its shapes and ranges, as torch checked it, not on its guards: torch runs a
loaded program without them (Note [guard cost]), and the export judged the program without them at the points
of the declared ranges (Note [every declared range] in ..export), where a hint's guard (a size other than 1)
refuses sizes the program computes right (one new token). The top program's domain and the programs by size's
hold their guards too (Note [the file's sizes] in ..onnx_export, Note [programs by size]).

Imports: :mod:`..custom_op` (the call structure, its sites), :mod:`..domains`; torch.
"""

from __future__ import annotations

from typing import Any

import torch

from ..custom_op._calls import Call, describe_call, difference, finish_call
from ..custom_op._sites import Sites
from ..domains import Domain, DomainError, domain_of


def sizes_text(tensors: Any) -> str:
    """The sizes of ``tensors`` as errors name them: ``2x5x8, 2x1``."""
    return ", ".join("x".join(map(str, t.shape)) for t in tensors)


def checked_runner(program: Any, guards: bool = True) -> tuple[Domain | None, Any]:
    """``program``'s domain, with its guards or not (None where it holds a form :mod:`..domains` does not read),
    and what runs it: where the domain reads, its graph on flat tensors without torch's check of its inputs (the
    caller checks the domain: Note [one check of the sizes]); elsewhere its module."""
    runner = program.module()
    try:
        domain = domain_of(program, guards)
    except DomainError:
        return None, runner
    return domain, _flat_graph(runner)


def _flat_graph(module: Any) -> Any:
    """``module``'s graph as a function of flat tensors in and out (Note [flat graphs]): the generated ``forward``
    of a module holding the graph, bound to it."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    return torch.fx.GraphModule(module, graph).forward


class CallStructureError(ValueError):
    """A call of a runnable program whose structure is not the example's."""

    __module__ = "piece_by_piece_serialize.artifact"


class FlatProgramModule(torch.nn.Module):
    """``program`` (a ``torch.export.ExportedProgram`` of flat tensors) called with the model's own arguments."""

    def __init__(self, program: Any, call: Call, key: str, owner: Any, name: str, domain: Domain | None = None) -> None:
        """``domain``: the program's, checked on every call instead of torch's own check (Note [one check of the
        sizes]); None keeps torch's check."""
        super().__init__()
        self.program = program.module()
        if domain is not None:
            self.program.validate_inputs = False
        self.__dict__["domain"] = domain
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
    domain: Domain | None

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
        domain = self.domain
        if domain is not None and not domain.holds(shapes := [tuple(t.shape) for t in tensors]):
            raise ValueError(
                f"{self.name}: the sizes of this call ({sizes_text(tensors)}) are outside those the program was exported for (its guards "
                f"and ranges, which torch checks too: Note [the file's sizes] in onnx_export): {domain.why_not(shapes)} (inputs "
                "numbered from 0 as listed); export from examples of these sizes"
            )
        out = self.program(*(t.contiguous() for t in tensors))  # as it was exported (export/_job.py, _contiguous)
        return finish_call(self.call, list(out), [*args, *kwargs.values()])
