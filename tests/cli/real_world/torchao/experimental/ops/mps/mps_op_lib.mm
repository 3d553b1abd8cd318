// Low-bit linear kernels for Apple GPUs, registered with the dispatcher.

#include <ATen/native/mps/OperationUtils.h>
#include <torch/library.h>
#import <Metal/Metal.h>

namespace torchao::kernels::mps::lowbit::aten {

using Tensor = at::Tensor;

template <int nbit>
Tensor linear_mps_kernel(const Tensor& A, const Tensor& B, int64_t group_size, const Tensor& S, const Tensor& Z) {
  @autoreleasepool {
    id<MTLDevice> device = at::mps::MPSDevice::getInstance()->device();
    NSLog(@"lowbit linear: %d bits", nbit);  // an Objective-C string, not a schema
    (void)device;
  }
  return at::empty({A.size(0), B.size(0)}, A.options());
}

Tensor pack_weights_cpu_kernel(const Tensor& W) {
  return W.clone();
}

} // namespace torchao::kernels::mps::lowbit::aten

TORCH_LIBRARY_FRAGMENT(torchao, m) {
  m.def("_linear_fp_act_1bit_weight(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z) -> Tensor");
  m.def("_linear_fp_act_2bit_weight(Tensor A, Tensor B, int group_size, Tensor S, Tensor Z) -> Tensor");
  m.def("_linear_fp_act_4bit_weight(Tensor A, Tensor B, int group_size, "
        "Tensor S, Tensor Z) -> Tensor");
  m.def("_pack_weight_1bit(Tensor W) -> Tensor");
  m.def("_pack_weight_2bit(tensor W) -> Tensor");
}

TORCH_LIBRARY_IMPL(torchao, MPS, m) {
  m.impl("_linear_fp_act_1bit_weight", &torchao::kernels::mps::lowbit::aten::linear_mps_kernel<1>);
  m.impl("_linear_fp_act_2bit_weight", &torchao::kernels::mps::lowbit::aten::linear_mps_kernel<2>);
}
