// clang-format off
TORCH_LIBRARY_FRAGMENT(fbgemm, m) {
  m.def("lookup_{{ optimizer }}(Tensor weights, {{ args | join(", ") }}) -> Tensor");
}
