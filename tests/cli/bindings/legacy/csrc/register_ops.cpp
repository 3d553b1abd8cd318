// Shaped like extensions written for the legacy registration API (torch < 1.4 tutorials): schemas passed to
// RegisterOperators().op(...) and to RegisterOperators::options().schema(...).
#include <torch/script.h>

torch::Tensor warp_perspective(torch::Tensor image, torch::Tensor warp);
torch::Tensor my_relu(torch::Tensor x);

static auto registry =
    torch::RegisterOperators()
        .op("my_ops::warp_perspective(Tensor image, Tensor warp) -> Tensor", &warp_perspective)
        .op("my_ops::relu", &my_relu)  // a bare name: the schema is inferred from the function
        .op(torch::RegisterOperators::options()
                .schema("my_ops::pool(Tensor x, int[2.5] kernel) -> Tensor")
                .kernel<decltype(my_relu), &my_relu>(c10::DispatchKey::CPU));

struct Options {
  Options& op(const char* label);  // another class's op( elsewhere in the file is not a registration
};
