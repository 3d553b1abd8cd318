"""Shaped like executorch's TOSA dialect: schemas registered through the project's own decorator."""

import torch
from executorch.backends.arm.tosa.dialect.ops_registration import register_fake_tosa_op
from executorch.backends.arm.tosa.specification import TosaSpecification


@register_fake_tosa_op(
    "EQUAL(Tensor input1, Tensor input2) -> Tensor",
    TosaSpecification.all_versions_and_profiles(),
)
def EQUAL(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(input1, dtype=torch.bool)


@register_fake_tosa_op(
    "CONV2D(Tensor input, "
    "Tensor weight, "
    "Tensor bias, "
    "int[2] stride, "
    "SymInt[4] pad, "
    "int[2] dilation) -> Tensor",  # schema
    TosaSpecification.all_versions_and_profiles(),  # target TOSA specifications
)
def CONV2D(x, weight, bias, stride, pad, dilation):
    return x


@register_fake_tosa_op(
    "RESCALE(Tensor input, ScalarType dtype, float[] scale, int in_zp, int out_zp) -> tensor",
    TosaSpecification.all_versions_and_profiles(),
)
def RESCALE(x, dtype, scale, in_zp, out_zp):
    return x
