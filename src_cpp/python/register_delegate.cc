// _core.Delegate: owns one native TfLiteDelegate for the Python layer.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cl/int8_dot.h"
#include "common/error.h"
#include "delegate/delegate.h"
#include "ops/conv2d_selector.h"
#include "python/register.h"
#include "tflite/abi.h"

namespace py = pybind11;

namespace clgpu::python {
namespace {

class PyDelegate {
 public:
  explicit PyDelegate(const std::map<std::string, std::string>& options) {
    std::vector<std::pair<std::string, std::string>> kv(options.begin(), options.end());
    Options parsed = ParseOptions(kv);
    py::gil_scoped_release release;
    delegate_ = DelegateCore::Create(parsed);
  }
  ~PyDelegate() { Close(); }
  PyDelegate(const PyDelegate&) = delete;
  PyDelegate& operator=(const PyDelegate&) = delete;

  void Close() {
    DelegateCore::Destroy(delegate_);
    delegate_ = nullptr;
  }
  DelegateCore& core() const {
    if (!delegate_) throw Error("the delegate was closed");
    return *DelegateCore::From(delegate_);
  }
  uintptr_t pointer() const {
    core();
    return reinterpret_cast<uintptr_t>(delegate_);
  }
  bool closed() const { return delegate_ == nullptr; }

 private:
  TfLiteDelegate* delegate_ = nullptr;
};

// Sizes and offsets our ABI header declares (the layout test compares them with
// what the delegate observes inside each runtime).
py::typing::Dict<py::str, py::int_> AbiLayout() {
  py::typing::Dict<py::str, py::int_> r;
  r["sizeof_tensor"] = sizeof(TfLiteTensor);
  r["sizeof_node"] = sizeof(TfLiteNode);
  r["sizeof_registration"] = sizeof(TfLiteRegistration);
  r["sizeof_registration_passed"] = sizeof(TfLiteRegistrationPadded);
  r["sizeof_delegate"] = sizeof(TfLiteDelegate);
  r["sizeof_delegate_params"] = sizeof(TfLiteDelegateParams);
  r["sizeof_context"] = sizeof(TfLiteContext);
  r["offsetof_delegate_flags"] = offsetof(TfLiteDelegate, flags);
  r["offsetof_tensor_sparsity"] = offsetof(TfLiteTensor, sparsity);
  r["sizeof_sparsity"] = sizeof(TfLiteSparsity);
  r["sizeof_dimension_metadata"] = sizeof(TfLiteDimensionMetadata);
  r["offsetof_tensor_quantization"] = offsetof(TfLiteTensor, quantization);
  r["sizeof_quantization"] = sizeof(TfLiteQuantization);
  r["sizeof_affine_quantization"] = sizeof(TfLiteAffineQuantization);
  r["offsetof_affine_quantized_dimension"] =
      offsetof(TfLiteAffineQuantization, quantized_dimension);
  return r;
}

py::typing::Dict<py::int_, py::array_t<float>> Captured(const PyDelegate& d) {
  py::typing::Dict<py::int_, py::array_t<float>> out;
  for (auto& [tensor, c] : d.core().captured()) {
    std::vector<py::ssize_t> shape(c.shape.begin(), c.shape.end());
    py::array_t<float> a(shape);
    std::copy(c.data.begin(), c.data.end(), a.mutable_data());
    out[py::int_(tensor)] = a;
  }
  return out;
}

}  // namespace

void RegisterDelegate(py::module_& m) {
  py::class_<PyDelegate>(m, "Delegate")
      .def(py::init<const std::map<std::string, std::string>&>(), py::arg("options"))
      .def("pointer", &PyDelegate::pointer, "Address of the TfLiteDelegate.")
      .def("close", &PyDelegate::Close, "Release the delegate (kernels keep what they use).")
      .def_property_readonly("closed", &PyDelegate::closed)
      .def(
          "decisions",
          [](const PyDelegate& d, const py::typing::Dict<py::int_, py::str>& names) {
            std::vector<NodeDecision> out = d.core().decisions();
            for (NodeDecision& n : out) {
              if (!n.op_name.empty()) continue;
              const py::int_ code(n.op);
              n.op_name = names.contains(code) ? py::str(names[code]).cast<std::string>()
                                               : "op " + std::to_string(n.op);
            }
            return out;
          },
          py::arg("op_names") = py::dict(),
          "Per node of every subgraph prepared; `op_names` names the ops the core does not know "
          "(else 'op N').")
      .def("partitions", [](const PyDelegate& d) { return d.core().partitions(); })
      .def("partition_subgraphs",
           [](const PyDelegate& d) { return d.core().partition_subgraphs(); })
      .def("abi", [](const PyDelegate& d) { return d.core().abi(); })
      .def("stats", [](const PyDelegate& d) { return d.core().stats(); })
      .def(
          "_refine_calibration",
          [](const PyDelegate& d) {
            py::gil_scoped_release release;
            d.core().RefineDeviceCosts();
          },
          "Tests: what a close decision does to the cost model's kernel figure.")
      .def("profile",
           [](const PyDelegate& d) {
             return d.core().profiler().Snapshot(d.core().options().profiling);
           })
      .def("memory", [](const PyDelegate& d) { return d.core().memory(); })
      .def("captured", &Captured)
      .def("reset_profile", [](const PyDelegate& d) { d.core().profiler().Reset(); })
      .def(
          "wait_ready",
          [](const PyDelegate& d, double timeout) {
            py::gil_scoped_release release;
            return d.core().WaitReady(timeout);
          },
          py::arg("timeout") = -1.0)
      .def("device", [](const PyDelegate& d) {
        // The int8 dot-product path this delegate's int8 kernels use (probed once per device).
        return DeviceRecord(d.core().env().device(), Int8DotPath(d.core().env().device()));
      });
  m.def("abi_layout", &AbiLayout);
  m.def("option_keys", &OptionKeys);
  // The values of conv_algorithm that force one algorithm ("auto" aside), for the tests.
  m.def("conv_algorithms", &ConvAlgorithmNames);
}

}  // namespace clgpu::python
