#include <torch/library.h>
#include <torch/types.h>

namespace facebook::torchcodec {

// Video decoders travel through the dispatcher as opaque tensors (Tensor(a!) decoder).
TORCH_LIBRARY(torchcodec_ns, m) {
  m.impl_abstract_pystub("torchcodec._core.ops", "//pytorch/torchcodec:torchcodec");
  m.def("create_from_file(str filename, str? seek_mode=None) -> Tensor");
  m.def("create_from_tensor(Tensor video_tensor, str? seek_mode=None) -> Tensor");
  m.def(
      "add_video_stream(Tensor(a!) decoder, *, int? width=None, int? height=None, int? num_threads=None, "
      "str? dimension_order=None, int? stream_index=None, str device=\"cpu\", "
      "(Tensor, Tensor, Tensor)? custom_frame_mappings=None, str? color_conversion_library=None) -> ()");
  m.def("get_frames_by_pts_in_range(Tensor(a!) decoder, *, float start_seconds, float stop_seconds) -> (Tensor, Tensor, Tensor)");
  m.def("_get_key_frame_indices(Tensor(a!) decoder) -> Tensor");
  m.def("get_json_metadata(Tensor(a!) decoder) -> str");
  // exported programs never hold this op, so its '!' form never has to be printed back
  m.def("_write_frames_into(Tensor! frames, Tensor(a!) decoder) -> ()");  // pbp: ignore[no-roundtrip]
  m.def("scan_all_streams_to_update_metadata(Tensor(a!) decoder) -> ()");
}

} // namespace facebook::torchcodec
