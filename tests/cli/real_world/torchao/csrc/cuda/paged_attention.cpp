#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/types.h>

TORCH_LIBRARY_FRAGMENT(torchao, m) {
  m.impl_abstract_pystub("torchao.ops");
  // one literal continued over three lines with backslash splices
  m.def(
      "paged_attention(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, \
       float scale, Tensor block_tables, Tensor context_lens, \
       Tensor? attn_mask=None) -> ()");
}
