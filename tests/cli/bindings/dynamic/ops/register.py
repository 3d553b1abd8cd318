"""Schemas a static read can only partly see: a module name assigned twice, and names built at run time."""

import torch

lib = torch.library.Library("dyn", "DEF")

GELU_SCHEMA = "gelu(Tensor x) -> Tensor"
GELU_SCHEMA = "gelu(Tensor x, str approximate='none') -> Tensor"
lib.define(GELU_SCHEMA)

for name in ("relu", "silu"):
    lib.define(f"{name}(Tensor x, int[2.5] window) -> Tensor")
    lib.define(f"{name}_backward(Tensor grad, Tensor x, int dim={name}) -> Tensor")

for ns, op in (("dyn", "scale"),):
    torch.library.define(f"{ns}::{op}", "(Tensor x, float factor=1e-05) -> Tensor")
    torch._C.parse_schema(f"{ns}::{op}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!")
