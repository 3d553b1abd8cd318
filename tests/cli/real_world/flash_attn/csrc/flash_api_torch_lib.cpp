#include <torch/library.h>
#include <torch/nn/functional.h>

#define STRINGIFY_(x) #x
#define STRING(x) STRINGIFY_(x)

#ifndef DEFAULT_PAGE_SIZE
#define DEFAULT_PAGE_SIZE 256
#endif

TORCH_LIBRARY(flash_attn_3, m) {
  m.def("fwd(Tensor q, Tensor k, Tensor v, Tensor? out=None, float softmax_scale=1.0, bool is_causal=False, "
        "int page_size=" STRING(DEFAULT_PAGE_SIZE) ", "
        "int num_splits=1) -> (Tensor, Tensor)");
  m.def("get_scheduler_metadata(int batch_size, int max_seqlen_q, int max_seqlen_k, int num_heads, "
        "int num_heads_k, int headdim, Tensor seqused_k, bool is_causal=False, int num_splits=0) -> Tensor");
}
