"""Operator definitions; the CPU, CUDA and XPU backends register kernels for them elsewhere."""

from collections.abc import Sequence
from math import prod

import torch

_IS_TORCH_GTE_24 = hasattr(torch.library, "register_fake")
register_fake = torch.library.register_fake if _IS_TORCH_GTE_24 else torch.library.impl_abstract

# Int8 matmul with int32 accumulation
torch.library.define(
    "bitsandbytes::int8_linear_matmul",
    "(Tensor A, Tensor B) -> Tensor",
)


@register_fake("bitsandbytes::int8_linear_matmul")
def _(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    shapeC = (*A.shape[:-1], B.shape[0])
    return torch.empty(shapeC, device=A.device, dtype=torch.int32)


torch.library.define(
    "bitsandbytes::int8_vectorwise_quant",
    "(Tensor A, float threshold=0.0) -> (Tensor, Tensor, Tensor?)",
)

torch.library.define(
    "bitsandbytes::dequantize_4bit",
    "(Tensor A, Tensor absmax, int blocksize, str quant_type, int[] shape, ScalarType dtype) -> Tensor",
)


@register_fake("bitsandbytes::dequantize_4bit")
def _(A, absmax, blocksize: int, quant_type: str, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=A.device)


torch.library.define(
    "bitsandbytes::gemv_4bit",
    "(Tensor A, Tensor B, SymInt[] shapeB, Tensor absmax, Tensor code, int blocksize) -> Tensor",
)

# the optimizer step: the schema is written as adjacent literals
torch.library.define(
    "bitsandbytes::optimizer_update_8bit_blockwise",  # pbp: ignore[misread-number]
    "(str optimizer_name, Tensor g, Tensor p, Tensor(a!) state1, Tensor(b!)? state2, float beta1, float beta2, "
    "float beta3, float alpha, float eps, int step, float lr, Tensor(c!) qmap1, Tensor(d!)? qmap2, "
    "Tensor(e!) absmax1, Tensor(f!)? absmax2, float weight_decay, float gnorm_scale, bool skip_zeros=False) -> ()",
)


def _numel(shape: Sequence[int]) -> int:
    return prod(shape)
