import torch

lib = torch.library.Library("myops", "FRAGMENT")
for bits in (4, 8):
    lib.define("quant{}(Tensor x) -> Tensor".format(bits))
    lib.define("dequant%d(Tensor x) -> Tensor" % bits)
    lib.define(SCHEMAS[bits])  # no literal here: nothing to read, nothing to note
