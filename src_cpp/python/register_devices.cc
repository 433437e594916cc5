// devices(), select_device(): device records as dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>

#include "cl/device.h"
#include "cl/environment.h"
#include "cl/int8_dot.h"
#include "python/register.h"

namespace py = pybind11;

namespace clgpu::python {

py::dict DeviceDict(const DeviceInfo& d) {
  py::dict r;
  r["index"] = d.index;
  r["platform"] = d.platform;
  r["name"] = d.name;
  r["vendor"] = d.vendor;
  r["type"] = d.type;
  r["opencl_version"] = d.version;
  r["opencl_c_version"] = d.opencl_c_version;
  r["driver_version"] = d.driver_version;
  r["compute_units"] = d.compute_units;
  r["max_clock_mhz"] = d.max_clock_mhz;
  r["global_mem_bytes"] = d.global_mem_bytes;
  r["local_mem_bytes"] = d.local_mem_bytes;
  r["max_alloc_bytes"] = d.max_alloc_bytes;
  r["max_work_group_size"] = d.max_work_group_size;
  r["host_unified_memory"] = d.host_unified_memory;
  r["fp16_advertised"] = d.fp16_advertised;
  r["fp16"] = d.fp16;
  r["int8_dot"] = "";  // probed by devices() only (cl/int8_dot.h)
  return r;
}

void RegisterDevices(py::module_& m) {
  m.def(
      "devices",
      [](bool probe_fp16) {
        std::vector<DeviceInfo> list;
        {
          py::gil_scoped_release release;
          list = ListDevices(probe_fp16);
        }
        py::list out;
        for (const auto& d : list) {
          py::dict r = DeviceDict(d);
          if (probe_fp16) {
            py::gil_scoped_release release;
            const std::string path = Int8DotPath(d);
            py::gil_scoped_acquire acquire;
            r["int8_dot"] = path;
          }
          out.append(r);
        }
        return out;
      },
      py::arg("probe_fp16") = true,
      "Every OpenCL device of every platform; with probe_fp16, also FP16 and the int8 "
      "dot-product path probed by compiling.");
  m.def(
      "select_device",
      [](const std::string& spec) {
        DeviceInfo d;
        {
          py::gil_scoped_release release;
          d = SelectDevice(spec);
        }
        return DeviceDict(d);
      },
      py::arg("spec") = "auto", "The device a delegate with device=spec would use.");
  m.def(
      "warm_up",
      [](const std::string& spec) {
        py::gil_scoped_release release;
        const auto t0 = std::chrono::steady_clock::now();
        Environment::Pin(SelectDevice(spec));
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
            .count();
      },
      py::arg("spec") = "auto",
      "Lists the devices and creates the OpenCL context a delegate with device=spec will use "
      "and keeps it for the process; returns the milliseconds it took.");
  m.def(
      "opencl_library", []() { return Cl().library_path; },
      "Path of the OpenCL library that was loaded.");
  m.def("reset_opencl_for_testing", &ResetClForTesting,
        "Forget the loaded OpenCL library so the next call searches again (tests only).");
}

}  // namespace clgpu::python
