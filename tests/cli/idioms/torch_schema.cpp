#include <torch/library.h>

TORCH_LIBRARY(myops, m) {
  m.def(torch::schema("pure(Tensor x) -> Tensor", c10::AliasAnalysisKind::PURE_FUNCTION));
  m.def(c10::schema("conservative(Tensor(a!) x) -> ()", c10::AliasAnalysisKind::CONSERVATIVE));
  m.def(torch::schema("generic(t x) -> t", c10::AliasAnalysisKind::FROM_SCHEMA, /*allow_typevars=*/true));
  auto s = schema("not_torch(Tensor x) -> Tensor");  // an unqualified schema( is some other function
}
