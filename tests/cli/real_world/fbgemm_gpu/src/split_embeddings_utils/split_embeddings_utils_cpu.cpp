#include <ATen/ATen.h>
#include <torch/library.h>

#include "fbgemm_gpu/utils/ops_utils.h"

using Tensor = at::Tensor;

namespace fbgemm_gpu {

std::tuple<int64_t, int64_t> get_infos_metadata_cpu(Tensor unused, int64_t B, int64_t T) {
  return {B * T, 26};
}

} // namespace fbgemm_gpu

TORCH_LIBRARY_FRAGMENT(fbgemm, m) {
  m.def(
      "transpose_embedding_input("
      "    Tensor hash_size_cumsum, "
      "    int total_hash_size_bits, "
      "    Tensor indices, "
      "    Tensor offsets, "
      "    bool nobag=False, "
      "    Tensor? vbe_b_t_map=None, "
      "    int info_B_num_bits=26, "
      "    int info_B_mask=0x2FFFFFF, "
      "    int total_unique_indices=-1, "
      "    bool is_index_select=False, "
      "    Tensor? total_L_offsets=None, "
      "    int fixed_L_per_warp=0, "
      "    int num_warps_per_feature=0"
      ") -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("get_infos_metadata(Tensor unused, int B, int T) -> (int, int)");
  m.def(torch::schema(
      "generate_vbe_metadata(Tensor B_offsets, Tensor B_offsets_rank_per_feature, "
      "Tensor output_offsets_feature_rank, Tensor D_offsets, int D, bool nobag, "
      "SymInt max_B_feature_rank, int info_B_num_bits, SymInt total_B) -> (Tensor, Tensor)",
      c10::AliasAnalysisKind::PURE_FUNCTION));
  // the schema is inferred from the C++ signature
  m.def("get_infos_metadata_stub", fbgemm_gpu::get_infos_metadata_cpu);
}
