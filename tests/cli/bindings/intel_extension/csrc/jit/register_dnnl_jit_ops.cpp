// Shaped like intel-extension-for-pytorch's TorchScript operators: torch::jit::Operator entries of a
// RegisterOperators list, under `using namespace torch::jit`.
#include <torch/csrc/jit/runtime/custom_operator.h>
#include <torch/csrc/jit/runtime/operator.h>

namespace torch {
namespace jit {

c10::AliasAnalysisKind aliasAnalysisFromSchema() {
  return c10::AliasAnalysisKind::FROM_SCHEMA;
}

RegisterOperators op({
    Operator(
        "ipex::linear_relu(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
        [](const Node* node) -> Operation {
          return [](Stack* stack) { /* ... */ };
        },
        aliasAnalysisFromSchema()),
    Operator(
        "ipex::conv2d_sum(Tensor input, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, "
        "int[2] dilation, int groups, Tensor(a!) accumu, *, Scalar? alpha) -> Tensor(a!)",
        [](const Node* node) -> Operation {
          return [](Stack* stack) { /* ... */ };
        },
        aliasAnalysisFromSchema()),
    // Operator("ipex::disabled(Tensor x) -> Tensor", ...),  commented out: not read
    Operator(
        "ipex::layer_norm(Tensor a, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps=1e-5, "
        "bool cudnn_enable=True, int groups=0x10) -> Tensor",
        [](const Node* node) -> Operation {
          return [](Stack* stack) { /* ... */ };
        },
        aliasAnalysisFromSchema()),
    torch::jit::Operator(
        "ipex::shuffle(Tensor input, int[] view_shape, int dim0, int dim1) -> Tensor",
        [](const Node* node) -> Operation {
          return [](Stack* stack) { /* ... */ };
        },
        aliasAnalysisFromSchema()),
    Operator(
        c10::Symbol::fromQualString("ipex::fusion_group"),  // a symbol, not a schema: nothing to read
        [](const Node* node) -> Operation {
          return [](Stack* stack) { /* ... */ };
        },
        c10::AliasAnalysisKind::PURE_FUNCTION),
});

} // namespace jit
} // namespace torch
