#define DEF_UNARY(NAME) m.def("myops::" #NAME "(Tensor x) -> Tensor")
TORCH_LIBRARY(myops, m) {
  DEF_UNARY(relu);
  m.def("ok(Tensor x) -> Tensor");
}
