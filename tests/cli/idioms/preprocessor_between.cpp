TORCH_LIBRARY_FRAGMENT(xformers, m) {
  m.def("attn(Tensor q, "
#ifdef USE_ROCM
        "int wave_size, "
#endif
        "Tensor k) -> Tensor");
}
