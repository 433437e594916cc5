// _core.KernelRunner: runs one kernel from kernels/ on numpy arrays. Used by the
// kernel tests and the kernel benchmarks (bench_gemm, bench_conv2d), never by
// the delegate itself.
#include <dlfcn.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "cl/environment.h"
#include "cl/errors.h"
#include "common/error.h"
#include "python/register.h"

namespace py = pybind11;

namespace clgpu::python {
namespace {

class KernelRunner {
 public:
  explicit KernelRunner(const std::string& device)
      : env_(Environment::ForDevice(SelectDevice(device))), queue_(env_->CreateQueue(true)) {}

  // Builds kernels/<file>.cl (common.cl prepended) or raises BuildError.
  void Build(const std::string& file, const std::string& defines) {
    env_->programs().Get(file, defines);
  }
  void BuildSource(const std::string& source, const std::string& options) {
    env_->programs().GetSource("<source>", source, options);
  }
  // The compiler's log of kernels/<file>.cl built with `defines` (with
  // -cl-nv-verbose, NVIDIA reports registers and spills per kernel: tuning).
  std::string BuildLog(const std::string& file, const std::string& defines) {
    auto program = env_->programs().Get(file, defines);
    cl_device_id dev = env_->device().id;
    size_t n = 0;
    Cl().clGetProgramBuildInfo(program->get(), dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    if (n)
      Cl().clGetProgramBuildInfo(program->get(), dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
  }

  // args: numpy arrays (copied to device buffers and read back in place), ints
  // (cl_int) and floats (cl_float). Returns the kernel time in ns per run.
  double Run(const std::string& file, const std::string& kernel, const std::string& defines,
             const py::typing::List<py::object>& args, const std::vector<size_t>& global,
             const std::vector<size_t>& local, int repeat) {
    return RunProgram(*env_->programs().Get(file, defines), kernel, args, global, local, repeat);
  }
  // The same for a kernel of any source text (benchmarks of the device itself).
  double RunSource(const std::string& source, const std::string& kernel, const std::string& options,
                   const py::typing::List<py::object>& args, const std::vector<size_t>& global,
                   const std::vector<size_t>& local, int repeat) {
    return RunProgram(*env_->programs().GetSource("<source>", source, options), kernel, args,
                      global, local, repeat);
  }

  // C = A * B^T with CLBlast's SGEMM on this runner's queue (the comparison of
  // bench_gemm.py). Returns the mean wall time in ns over `repeat` calls after a
  // warm-up (CLBlast compiles on first use).
  double ClblastSgemm(const std::string& library, size_t m, size_t n, size_t k, int repeat) {
    void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw Error("cannot load " + library + ": " + dlerror());
    using Sgemm =
        int (*)(int, int, int, size_t, size_t, size_t, float, cl_mem, size_t, size_t, cl_mem,
                size_t, size_t, float, cl_mem, size_t, size_t, cl_command_queue*, cl_event*);
    auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "CLBlastSgemm"));
    if (!sgemm) throw Error(library + " has no CLBlastSgemm");
    std::vector<float> host(std::max({m * k, n * k}), 0.5f);
    Buffer a = env_->CreateBuffer(m * k * 4), b = env_->CreateBuffer(n * k * 4),
           c = env_->CreateBuffer(m * n * 4);
    CheckCl(Cl().clEnqueueWriteBuffer(queue_.get(), a.get(), CL_TRUE, 0, m * k * 4, host.data(), 0,
                                      nullptr, nullptr),
            "clEnqueueWriteBuffer");
    CheckCl(Cl().clEnqueueWriteBuffer(queue_.get(), b.get(), CL_TRUE, 0, n * k * 4, host.data(), 0,
                                      nullptr, nullptr),
            "clEnqueueWriteBuffer");
    constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
    cl_command_queue q = queue_.get();
    py::gil_scoped_release release;
    auto call = [&]() {
      const int status = sgemm(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0f, a.get(), 0, k, b.get(),
                               0, k, 0.0f, c.get(), 0, n, &q, nullptr);
      if (status != 0) throw Error("CLBlastSgemm returned " + std::to_string(status));
    };
    call();  // compiles CLBlast's kernels
    CheckCl(Cl().clFinish(q), "clFinish");
    // Wall time over back-to-back calls: CLBlast may run helper kernels (padding,
    // transposes) besides the GEMM, and all of them count.
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < std::max(repeat, 1); ++r) call();
    CheckCl(Cl().clFinish(q), "clFinish");
    const double total =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return total / std::max(repeat, 1);
  }

  DeviceRecord device() const { return DeviceRecord(env_->device()); }

 private:
  double RunProgram(const Program& program, const std::string& kernel,
                    const py::typing::List<py::object>& args, const std::vector<size_t>& global,
                    const std::vector<size_t>& local, int repeat) {
    if (global.empty() || global.size() > 3 || (!local.empty() && local.size() != global.size()))
      throw Error("global must have 1-3 dims and local the same count (or be empty)");
    Kernel k = CreateKernel(program, kernel);
    std::vector<Buffer> buffers;
    std::vector<py::array> arrays;
    for (size_t i = 0; i < args.size(); ++i) {
      py::handle a = args[i];
      cl_int err;
      if (py::isinstance<py::array>(a)) {
        auto arr = py::reinterpret_borrow<py::array>(a);
        if (!(arr.flags() & py::array::c_style) || !arr.writeable())
          throw Error("argument " + std::to_string(i) +
                      ": arrays must be C-contiguous and writeable");
        buffers.push_back(env_->CreateBuffer(arr.nbytes()));
        if (arr.nbytes())
          CheckCl(Cl().clEnqueueWriteBuffer(queue_.get(), buffers.back().get(), CL_TRUE, 0,
                                            arr.nbytes(), arr.data(), 0, nullptr, nullptr),
                  "clEnqueueWriteBuffer");
        arrays.push_back(arr);
        cl_mem mem = buffers.back().get();
        err = Cl().clSetKernelArg(k.get(), i, sizeof mem, &mem);
      } else if (py::isinstance<py::bool_>(a) || py::isinstance<py::int_>(a)) {
        cl_int v = a.cast<cl_int>();
        err = Cl().clSetKernelArg(k.get(), i, sizeof v, &v);
      } else if (py::isinstance<py::float_>(a)) {
        cl_float v = a.cast<cl_float>();
        err = Cl().clSetKernelArg(k.get(), i, sizeof v, &v);
      } else {
        throw Error("argument " + std::to_string(i) + ": expected ndarray, int or float");
      }
      CheckCl(err, "clSetKernelArg");
    }
    double total_ns = 0;
    {
      py::gil_scoped_release release;
      for (int r = 0; r < std::max(repeat, 1); ++r) {
        cl_event ev = nullptr;
        CheckCl(Cl().clEnqueueNDRangeKernel(queue_.get(), k.get(), global.size(), nullptr,
                                            global.data(), local.empty() ? nullptr : local.data(),
                                            0, nullptr, &ev),
                "clEnqueueNDRangeKernel");
        Event event(ev);
        CheckCl(Cl().clWaitForEvents(1, &ev), "clWaitForEvents");
        const auto [t0, t1] = EventTimes(ev);
        total_ns += double(t1 - t0);
      }
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
      if (!arrays[i].nbytes()) continue;
      CheckCl(
          Cl().clEnqueueReadBuffer(queue_.get(), buffers[i].get(), CL_TRUE, 0, arrays[i].nbytes(),
                                   arrays[i].mutable_data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
    }
    return total_ns / std::max(repeat, 1);
  }

  std::shared_ptr<Environment> env_;
  Queue queue_;
};

}  // namespace

void RegisterKernels(py::module_& m) {
  py::class_<KernelRunner>(m, "KernelRunner")
      .def(py::init<const std::string&>(), py::arg("device") = "auto")
      .def("build", &KernelRunner::Build, py::arg("file"), py::arg("defines") = "")
      .def("build_log", &KernelRunner::BuildLog, py::arg("file"), py::arg("defines") = "")
      .def("build_source", &KernelRunner::BuildSource, py::arg("source"), py::arg("options") = "")
      .def("run", &KernelRunner::Run, py::arg("file"), py::arg("kernel"), py::arg("defines"),
           py::arg("args"), py::arg("global_size"), py::arg("local_size") = std::vector<size_t>{},
           py::arg("repeat") = 1)
      .def("run_source", &KernelRunner::RunSource, py::arg("source"), py::arg("kernel"),
           py::arg("options"), py::arg("args"), py::arg("global_size"),
           py::arg("local_size") = std::vector<size_t>{}, py::arg("repeat") = 1)
      .def("clblast_sgemm", &KernelRunner::ClblastSgemm, py::arg("library"), py::arg("m"),
           py::arg("n"), py::arg("k"), py::arg("repeat") = 5)
      .def_property_readonly("device", &KernelRunner::device);
}

}  // namespace clgpu::python
