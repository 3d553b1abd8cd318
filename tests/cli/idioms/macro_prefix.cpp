#define OPS_NS "myops::"
TORCH_LIBRARY_FRAGMENT(myops, m) {
  m.def(OPS_NS "add(Tensor a, Tensor b) -> Tensor");
}
