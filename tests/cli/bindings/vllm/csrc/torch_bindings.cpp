// Shaped like vllm's csrc/torch_bindings.cpp: one schema declares the same argument twice.
#include "registration.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def(
      "paged_attention_v1("
      "    Tensor! out, Tensor query, Tensor key_cache,"
      "    Tensor value_cache, int num_kv_heads, float scale,"
      "    Tensor block_tables, Tensor seq_lens, int block_size) -> ()");
  ops.impl("paged_attention_v1", torch::kCUDA, &paged_attention_v1);

  ops.def(
      "mla_decode_kvcache(Tensor! out, Tensor q, Tensor kv_cache, Tensor q_seqlens,"
      "    float scale, Tensor block_table, Tensor seq_lens, Tensor q_seqlens) -> ()");
  ops.impl("mla_decode_kvcache", torch::kCUDA, &mla_decode_kvcache);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
