#include <torch/csrc/jit/frontend/function_schema_parser.h>

using namespace torch::jit;

static const c10::FunctionSchema a = torch::jit::parseSchema("myops::a(t x) -> t");
static const c10::FunctionSchema b = parseSchema("myops::b(Tensor x) -> Tensor", /*allow_typevars=*/false);
static const auto c = torch::jit::parseSchemaOrName("myops::c");
