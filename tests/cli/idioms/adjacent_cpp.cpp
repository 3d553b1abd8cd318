TORCH_LIBRARY(myops, m) {
  m.def("attn(Tensor q, Tensor k, Tensor v, "  // the query, key and value
        /* softmax scale */ u8"float scale=1.0, "
        R"(str mode="fast") -> Tensor)");
  m.def("name_only", &name_only_impl);
}
