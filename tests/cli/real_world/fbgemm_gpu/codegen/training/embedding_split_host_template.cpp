/*
 * Host-side registration of the split table-batched-embedding lookup, one
 * rendering per optimizer (the generator fills in the Jinja fields below).
 */

// clang-format off
#include <ATen/ATen.h>
#include <torch/library.h>

using Tensor = at::Tensor;

{%- for nobag in [True, False] %}
{%- set ndesc = "_nobag" if nobag else "" %}
Tensor split_embedding{{ ndesc }}_lookup_{{ optimizer }}(
    const Tensor& dev_weights,
    const Tensor& indices,
    {{ args.split_function_args | join(", ") }});
{%- endfor %}

TORCH_LIBRARY_FRAGMENT(fbgemm, m) {
  m.def("split_embedding_lookup_{{ optimizer }}(Tensor dev_weights, Tensor indices, "
        "{{ args.split_function_schemas | join(", ") }}, int output_dtype=0) -> Tensor");
  m.def("split_embedding_grad_indice_weights(Tensor grad_output, Tensor dev_weights, "
{%- if vbe %}
        "Tensor vbe_row_output_offsets, "
{%- endif %}
        "Tensor indices) -> Tensor");
  // the same in every rendering: checked as written
  m.def("get_unique_indices(Tensor linear_indices, int max_indices, bool compute_count=False) -> (Tensor, Tensor, Tensor?)");
}
