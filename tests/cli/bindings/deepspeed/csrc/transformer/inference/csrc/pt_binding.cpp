// Shaped like DeepSpeed's inference bindings: pybind11 functions, several of them named by a macro that
// stringizes its parameter. None of these is an operator schema.
#include <torch/extension.h>

template <typename T>
at::Tensor ds_softmax(at::Tensor& attn_scores, at::Tensor& attn_mask, bool triangular);
template <typename T>
at::Tensor ds_layer_norm(at::Tensor& input, at::Tensor& gamma, at::Tensor& beta, float epsilon);

// a binding macro defined at file level, used in the module below
#define DEF_NORM(_name, _dtype)                                                              \
    m.def("layer_norm_" #_name, &ds_layer_norm<_dtype>, "DeepSpeed layer norm with " #_name); \
    m.def("rms_norm_" #_name, &ds_layer_norm<_dtype>, "DeepSpeed rms norm with " #_name)

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.def("softmax_fp32", &ds_softmax<float>, "DeepSpeed SoftMax with fp32 (CUDA)");
    m.def("allocate_workspace(stays a pybind11 name)", &ds_softmax<float>, "even text that looks like a schema");
#define DEF_OPS(_name, _dtype)                                                                       \
    m.def("softmax_" #_name, &ds_softmax<_dtype>, "DeepSpeed SoftMax with " #_name " (CUDA)");      \
    m.def("softmax_context_" #_name, &ds_softmax<_dtype>, "DeepSpeed attention with " #_name);     \
    m.def("bias_gelu_" #_name, &ds_softmax<_dtype>, "DeepSpeed Gelu with " #_name " (CUDA)");       \
    m.def("bias_add_" #_name, &ds_softmax<_dtype>, "DeepSpeed Bias Add with " #_name " (CUDA)")

    DEF_OPS(fp32, float);
    DEF_OPS(fp16, __half);
    DEF_NORM(fp32, float);
}
