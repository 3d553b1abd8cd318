#import <Metal/Metal.h>
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(mps_ops, m) {
  NSString* label = @"mps_ops";  // not a schema
  m.def("int4mm(Tensor A, Tensor B, int group_size, "
        "Tensor SZ) -> Tensor");
  m.def("int8mm(Tensor A, Tensor B, Tensor scales) -> Tensor");
}
