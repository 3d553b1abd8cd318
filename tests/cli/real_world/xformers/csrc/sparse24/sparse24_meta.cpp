#include <ATen/ATen.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/library.h>

namespace {

// Schemas of the ops whose meta kernels are registered from Python.
const c10::FunctionSchema& apply_schema() {
  static const c10::FunctionSchema schema = torch::jit::parseSchema(
      "xformers::sparse24_apply(Tensor input, str backend, Tensor threads_masks) -> (Tensor, Tensor)");
  return schema;
}

} // namespace
