import torch
from torch.library import custom_op

lib = torch.library.Library("myops", "FRAGMENT")
lib.define(f"plain(Tensor x) -> Tensor")
lib.define(
    f"mixed(Tensor x, "  # an f-string joined with a plain literal
    "str sep=\",\") -> Tensor"
)
lib.define(f"braces(Tensor x, str s=\"{{}}\") -> Tensor")


@custom_op("myops::k", mutates_args=(), schema=rf"(Tensor x, str sep='\\t') -> Tensor")
def k(x, sep="\t"):
    return x
