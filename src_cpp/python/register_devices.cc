// devices(), select_device(): device records as dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>

#include "cl/device.h"
#include "cl/environment.h"
#include "cl/int8_dot.h"
#include "ops/tuning.h"
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
  r["architecture"] = d.profile.architecture;
  r["tuning_keys"] = d.profile.tuning_keys;
  return r;
}

// The profile a device with these query answers would get, and the tuning table's tiles for it
// (tests: every vendor's entry without the device).
py::dict ProfileDict(const py::dict& facts_in, const std::vector<std::string>& tiles) {
  DeviceFacts f;
  auto str = [&](const char* k) {
    return facts_in.contains(k) ? py::str(facts_in[k]) : py::str("");
  };
  f.vendor = str("vendor"), f.name = str("name"), f.platform = str("platform");
  f.type = str("type"), f.extensions = str("extensions"), f.amd_board = str("amd_board");
  if (facts_in.contains("nv_compute")) {
    const auto cc = facts_in["nv_compute"].cast<std::pair<int, int>>();
    f.nv_compute_major = cc.first, f.nv_compute_minor = cc.second;
  }
  if (facts_in.contains("host_unified_memory"))
    f.host_unified_memory = facts_in["host_unified_memory"].cast<bool>();
  DeviceInfo d;
  d.profile = MakeDeviceProfile(f);
  const DeviceProfile& p = d.profile;
  py::dict r;
  r["vendor"] = VendorKey(p.vendor);
  r["architecture"] = p.architecture;
  r["gpu"] = p.gpu, r["cpu"] = p.cpu;
  r["integer_dot_product"] = p.integer_dot_product, r["subgroups"] = p.subgroups;
  r["unified_memory"] = p.unified_memory, r["gpu_plans"] = p.gpu_plans;
  r["zero_copy_io"] = p.zero_copy_io, r["auto_fp16"] = p.auto_fp16;
  r["shared_arena"] = p.shared_arena, r["decline_partitions"] = p.decline_partitions;
  r["nvidia_ptx"] = p.nvidia_ptx, r["tuning_keys"] = p.tuning_keys;
  py::dict t;
  for (const std::string& name : tiles) {
    const GemmTiles g = TilesFor(name, d);
    t[py::str(name)] =
        py::make_tuple(g.tile_m, g.tile_n, g.tile_k, g.wpt_m, g.wpt_n, g.dbuf, g.tmap, g.lpad);
  }
  r["tiles"] = t;
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
  m.def("_device_profile", &ProfileDict, py::arg("facts"),
        py::arg("tiles") = std::vector<std::string>{},
        "The profile (cl/device_profile.h) of a device whose queries answer `facts`, and the "
        "GEMM tiles the tuning table gives it for `tiles` (tests).");
  m.def(
      "opencl_library", []() { return Cl().library_path; },
      "Path of the OpenCL library that was loaded.");
  m.def("reset_opencl_for_testing", &ResetClForTesting,
        "Forget the loaded OpenCL library so the next call searches again (tests only).");
}

}  // namespace clgpu::python
