TORCH_LIBRARY_FRAGMENT(fbgemm, m) {
  m.def("backward(Tensor grad, "
{%- if weighted %}
        "Tensor indice_weights, "
{%- endif %}
        "Tensor indices) -> Tensor");
}
