// Shaped like Torch-TensorRT's TorchScript class registration: torch::class_ methods, some named by a macro.
// Method names, never schemas; the one operator defined here is.
#include <torch/custom_class.h>
#include <torch/library.h>

namespace torch_tensorrt {
namespace {

#define ADD_FIELD_GET_SET_REGISTRATION(registry, class_name, field_name) \
  (registry).def("_set_" #field_name, &class_name::set_##field_name);    \
  (registry).def("_get_" #field_name, &class_name::get_##field_name);

static auto TORCHTRT_UNUSED TRTEngineTSRegistration =
    torch::class_<TRTEngine>("tensorrt", "Engine")
        .def(torch::init<std::vector<std::string>>())
        .def("__str__", &TRTEngine::to_str)
        .def("__repr__", &TRTEngine::to_str)
        .def("enable_profiling", &TRTEngine::enable_profiling)
        .def_pickle(
            [](const c10::intrusive_ptr<TRTEngine>& self) -> std::vector<std::string> { return self->serialize(); },
            [](std::vector<std::string> seralized_info) -> c10::intrusive_ptr<TRTEngine> {
              return c10::make_intrusive<TRTEngine>(std::move(seralized_info));
            });

void RegisterSettings() {
  static auto TORCHTRT_UNUSED setting_registry = torch::class_<CompileSpec>("tensorrt", "CompileSpec").def(torch::init<>());
  ADD_FIELD_GET_SET_REGISTRATION(setting_registry, CompileSpec, workspace_size);
}

TORCH_LIBRARY(tensorrt, m) {
  m.def("execute_engine(Tensor[] input_tensors, __torch__.torch.classes.tensorrt.Engine engine) -> Tensor[]", execute_engine);
}

} // namespace
} // namespace torch_tensorrt
