import torch

lib = torch.library.Library("fbgemm", "FRAGMENT")
lib.define("{{ op_name }}_lookup(Tensor weights, Tensor indices) -> Tensor")
