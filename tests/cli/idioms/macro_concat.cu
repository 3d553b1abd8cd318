#define STRING(x) #x
TORCH_LIBRARY(flash, m) {
  m.def("fwd(Tensor q, int page_size=" STRING(DEFAULT_PAGE_SIZE) ") -> Tensor");
}
