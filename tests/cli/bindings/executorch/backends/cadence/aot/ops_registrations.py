"""Shaped like executorch's quantized op registrations: a helper that takes the library, then the schema."""

from torch.library import Library

from executorch.exir.pass_base import bind_pattern_to_op

lib = Library("cadence", "DEF")

lib.define("quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor")


@bind_pattern_to_op(lib, "quantized_add(Tensor X, float X_scale, int X_zero_point, Tensor Y, float Y_scale, int Y_zero_point, float out_scale, int out_zero_point) -> Tensor")
def quantized_add(X, X_scale, X_zero_point, Y, Y_scale, Y_zero_point, out_scale, out_zero_point):
    return X


@bind_pattern_to_op(lib, schema="quantized_relu(Tensor X, Tensor X_zero_point, int out_zero_point, Tensor out_multiplier, Tensor out_shift, Tensor X_zero_point) -> Tensor")
def quantized_relu(X, X_zero_point, out_zero_point, out_multiplier, out_shift):
    return X
