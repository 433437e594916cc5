// _core.Delegate: owns one native TfLiteDelegate for the Python layer.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>

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

py::list Decisions(const PyDelegate& d) {
  py::list out;
  for (const NodeDecision& n : d.core().decisions()) {
    py::dict r;
    r["subgraph"] = n.subgraph;
    r["node"] = n.node;
    r["op"] = n.op;
    r["op_name"] = n.op_name;
    r["delegated"] = n.claimed;
    r["reason"] = n.reason;
    r["note"] = n.note;
    out.append(r);
  }
  return out;
}

py::dict Abi(const PyDelegate& d) {
  AbiObservation a = d.core().abi();
  py::dict r;
  r["tensors_size"] = a.tensors_size;
  r["node_to_registration"] = a.node_to_registration;
  r["node_stride"] = a.node_stride;
  r["nodes_seen"] = a.nodes_seen;
  r["params_read"] = a.params_read;
  return r;
}

py::dict Stats(const PyDelegate& d) {
  DelegateStats s = d.core().stats();
  py::dict r;
  r["prepares"] = s.prepares;
  r["kernels_created"] = s.kernels_created;
  r["invokes"] = s.invokes;
  r["plans"] = s.plans;
  r["binds"] = s.binds;
  r["warmups"] = s.warmups;
  r["warming"] = s.warming;
  r["cpu_invokes"] = s.cpu_invokes;
  r["fp32_fallback_ops"] = s.fp32_fallback_nodes;
  r["fp16_saturated_ops"] = s.fp16_saturated_nodes;
  r["host_syncs"] = s.transfers.host_syncs;
  r["uploads"] = s.transfers.uploads;
  r["downloads"] = s.transfers.downloads;
  r["upload_bytes"] = s.transfers.upload_bytes;
  r["download_bytes"] = s.transfers.download_bytes;
  r["host_enqueue_us"] = s.transfers.enqueue_ns / 1000;
  r["host_wait_us"] = s.transfers.wait_ns / 1000;
  r["buffers_created"] = d.core().env().buffers_created();
  r["driver_setup_us"] = d.core().driver_setup_us();
  r["programs_built"] = d.core().env().programs().builds();
  r["program_cache_hits"] = d.core().env().programs().hits();
  r["program_binary_loads"] = d.core().env().programs().binary_loads();
  r["program_build_us"] = d.core().env().programs().build_us();
  r["program_cubins_stored"] = d.core().env().programs().cubins_stored();
  const DeviceCosts& c = d.core().device_costs();
  r["calibration_source"] = c.source;
  r["calibration_kernel_us"] = c.min_kernel_us + c.launch_gap_us;
  r["calibration_copy_us"] = c.copy_us;
  r["calibration_sync_us"] = c.sync_us;
  // None: the model's constant for the kind of memory / compute units x clock.
  r["calibration_gbps"] = c.gbps > 0 ? py::object(py::float_(c.gbps)) : py::none();
  r["calibration_gflops"] = c.gflops > 0 ? py::object(py::float_(c.gflops)) : py::none();
  if (BinaryCache* disk = d.core().disk_cache()) {
    r["disk_cache_hits"] = disk->hits.load();
    r["disk_cache_misses"] = disk->misses.load();
    r["disk_cache_rejected"] = disk->rejected.load();
    r["disk_cache_driver_rejected"] = disk->driver_rejected.load();
    r["disk_cache_stored"] = disk->stored.load();
  }
  return r;
}

// Sizes and offsets our ABI header declares (the layout test compares them with
// what the delegate observes inside each runtime).
py::dict AbiLayout() {
  py::dict r;
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

py::dict Captured(const PyDelegate& d) {
  py::dict out;
  for (auto& [tensor, c] : d.core().captured()) {
    std::vector<py::ssize_t> shape(c.shape.begin(), c.shape.end());
    py::array_t<float> a(shape);
    std::copy(c.data.begin(), c.data.end(), a.mutable_data());
    out[py::int_(tensor)] = a;
  }
  return out;
}

py::list Memory(const PyDelegate& d) {
  py::list out;
  for (const auto& [partition, m] : d.core().memory()) {
    py::dict r;
    r["partition"] = partition;
    r["naive_bytes"] = m.naive_bytes;
    r["lower_bound_bytes"] = m.lower_bound_bytes;
    r["allocated_bytes"] = m.allocated_bytes;
    r["weight_bytes"] = m.weight_bytes;
    r["staging_bytes"] = m.staging_bytes;
    r["scratch_bytes"] = m.scratch_bytes;
    r["host_wrapped_bytes"] = m.host_wrapped_bytes;
    r["buffers"] = m.buffers;
    r["arena"] = m.arena;
    r["split_tensors"] = m.split_tensors;
    r["split_pieces"] = m.split_pieces;
    r["split_bytes"] = m.split_bytes;
    r["chunked_ops"] = m.chunked_ops;
    r["chunks"] = m.chunks;
    r["chunk_staging_bytes"] = m.chunk_staging_bytes;
    out.append(r);
  }
  return out;
}

py::dict Profile(const PyDelegate& d) {
  Profiler& p = d.core().profiler();
  py::list kernels, partitions, trace;
  for (const KernelRecord& k : p.kernels()) {
    py::dict r;
    r["partition"] = k.partition;
    r["node"] = k.node;
    r["op"] = k.op;
    r["algorithm"] = k.algorithm;
    r["kernel"] = k.kernel;
    r["shape"] = k.shape;
    r["flops"] = k.flops;
    r["bytes"] = k.bytes;
    r["count"] = k.count;
    r["total_ns"] = k.total_ns;
    r["raw_ns"] = k.raw_ns;
    kernels.append(r);
  }
  for (const PartitionRecord& q : p.partitions()) {
    py::dict r;
    r["partition"] = q.partition;
    r["invokes"] = q.invokes;
    r["upload_ns"] = q.upload_ns;
    r["compute_ns"] = q.compute_ns;
    r["compute_raw_ns"] = q.compute_raw_ns;
    r["download_ns"] = q.download_ns;
    r["wall_ns"] = q.wall_ns;
    r["enqueue_ns"] = q.enqueue_ns;
    r["span_ns"] = q.span_ns;
    r["upload_bytes"] = q.upload_bytes;
    r["download_bytes"] = q.download_bytes;
    r["kernels_per_invoke"] = q.kernels_per_invoke;
    partitions.append(r);
  }
  for (const TraceEvent& e : p.trace()) {
    trace.append(py::make_tuple(e.name, e.category, e.partition, e.node, e.start_ns, e.end_ns));
  }
  py::dict r;
  r["enabled"] = d.core().options().profiling;
  r["event_overhead_ns"] = p.event_overhead_ns();
  r["kernels"] = kernels;
  r["partitions"] = partitions;
  r["trace"] = trace;
  return r;
}

}  // namespace

void RegisterDelegate(py::module_& m) {
  py::class_<PyDelegate>(m, "Delegate")
      .def(py::init<const std::map<std::string, std::string>&>(), py::arg("options"))
      .def("pointer", &PyDelegate::pointer, "Address of the TfLiteDelegate.")
      .def("close", &PyDelegate::Close, "Release the delegate (kernels keep what they use).")
      .def_property_readonly("closed", &PyDelegate::closed)
      .def("decisions", &Decisions)
      .def("partitions", [](const PyDelegate& d) { return d.core().partitions(); })
      .def("partition_subgraphs",
           [](const PyDelegate& d) { return d.core().partition_subgraphs(); })
      .def("abi", &Abi)
      .def("stats", &Stats)
      .def("profile", &Profile)
      .def("memory", &Memory)
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
        py::dict r = DeviceDict(d.core().env().device());
        r["int8_dot"] = Int8DotPath(d.core().env().device());
        return r;
      });
  m.def("abi_layout", &AbiLayout);
  m.def("option_keys", &OptionKeys);
  // The values of conv_algorithm that force one algorithm ("auto" aside), for the tests.
  m.def("conv_algorithms", &ConvAlgorithmNames);
}

}  // namespace clgpu::python
