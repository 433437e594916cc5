// devices(), select_device(): the Device record, bound from the core's DeviceInfo.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <array>
#include <chrono>

#include "cl/device.h"
#include "cl/environment.h"
#include "cl/int8_dot.h"
#include "common/env.h"
#include "common/error.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm.h"
#include "ops/tuning.h"
#include "python/record.h"
#include "python/register.h"

namespace py = pybind11;

namespace clgpu::python {

namespace {

void BindDevice(py::module_& m) {
  using D = DeviceRecord;
  Record<D>(m, "Device", "One OpenCL device as the delegate sees it.")
      .field("index", &DeviceInfo::index, "The position in devices(), stable within a process.")
      .field("platform", &DeviceInfo::platform)
      .field("name", &DeviceInfo::name)
      .field("vendor", &DeviceInfo::vendor)
      .field("type", &DeviceInfo::type, "'gpu', 'cpu', 'accelerator' or 'other'.")
      .field("opencl_version", &DeviceInfo::version)
      .field("opencl_c_version", &DeviceInfo::opencl_c_version)
      .field("driver_version", &DeviceInfo::driver_version)
      .field("compute_units", &DeviceInfo::compute_units)
      .field("max_clock_mhz", &DeviceInfo::max_clock_mhz)
      .field("global_mem_bytes", &DeviceInfo::global_mem_bytes)
      .field("local_mem_bytes", &DeviceInfo::local_mem_bytes)
      .field("max_alloc_bytes", &DeviceInfo::max_alloc_bytes)
      .field("max_work_group_size", &DeviceInfo::max_work_group_size)
      .field("host_unified_memory", &DeviceInfo::host_unified_memory)
      .field("fp16_advertised", &DeviceInfo::fp16_advertised, "cl_khr_fp16 in its extensions.")
      .field("fp16", &DeviceInfo::fp16,
             "Half arithmetic compiled when probed (NVIDIA does not advertise cl_khr_fp16).")
      .field("int8_dot", &D::int8_dot,
             "The int8 kernels' dot product: 'dp4a' (NVIDIA PTX), 'khr' "
             "(cl_khr_integer_dot_product), 'portable'; probed by compiling and running each ('' "
             "when devices() did not probe).")
      .computed(
          "architecture", [](const D& d) { return d.profile.architecture; },
          "The vendor's architecture as the device profile reads it ('sm_90', 'gfx1100', "
          "'valhall', 'adreno7xx'; '' when unknown).")
      .computed(
          "tuning_keys", [](const D& d) { return d.profile.tuning_keys; },
          "The tuning table's keys the device looks up, most specific first "
          "(src_cpp/cl/device_profile.h).")
      .done();
}

}  // namespace

// The profile a device with these query answers would get, and the tuning table's tiles for it
// (tests: every vendor's entry without the device).
py::typing::Dict<py::str, py::object> ProfileDict(
    const py::typing::Dict<py::str, py::object>& facts_in, const std::vector<std::string>& tiles,
    const std::vector<std::pair<int, std::string>>& split_plans,
    const std::vector<std::array<int, 4>>& dw_gemms) {
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
  if (facts_in.contains("compute_units")) d.compute_units = facts_in["compute_units"].cast<int>();
  const DeviceProfile& p = d.profile;
  py::typing::Dict<py::str, py::object> r;
  r["vendor"] = VendorKey(p.vendor);
  r["architecture"] = p.architecture;
  r["gpu"] = p.gpu, r["cpu"] = p.cpu;
  r["integer_dot_product"] = p.integer_dot_product, r["subgroups"] = p.subgroups;
  r["unified_memory"] = p.unified_memory, r["gpu_plans"] = p.gpu_plans;
  r["zero_copy_io"] = p.zero_copy_io, r["auto_fp16"] = p.auto_fp16;
  r["shared_arena"] = p.shared_arena, r["decline_partitions"] = p.decline_partitions;
  r["nvidia_ptx"] = p.nvidia_ptx, r["tuning_keys"] = p.tuning_keys;
  r["launch_us"] = std::vector<double>(p.launch_us.begin(), p.launch_us.end());
  r["expand_chain_cap"] = p.expand_chain_cap, r["expand_chain_cap_int8"] = p.expand_chain_cap_int8;
  r["block_item_products"] = p.block_item_products, r["split_k_last_max"] = p.split_k_last_max;
  r["split_k_last_us"] = p.split_k_last_us;
  r["split_k_last_ns_per_sum"] = p.split_k_last_ns_per_sum;
  r["ds_grid_stage_us"] = p.ds_grid_stage_us, r["ds_grid_step_us"] = p.ds_grid_step_us;
  r["dense_grid_stage_us"] = p.dense_grid_stage_us, r["dense_grid_gbps"] = p.dense_grid_gbps;
  r["dense_grid_hidden_us"] = p.dense_grid_hidden_us, r["dense_grid_max_mb"] = p.dense_grid_max_mb;
  py::dict t;
  for (const std::string& name : tiles) {
    const GemmTiles g = TilesFor(name, d);
    t[py::str(name)] =
        py::make_tuple(g.tile_m, g.tile_n, g.tile_k, g.wpt_m, g.wpt_n, g.dbuf, g.tmap, g.lpad);
  }
  r["tiles"] = t;
  // What a split GEMM's one-launch form adds for the cost model, per (splits, tiles) plan.
  // There is no device to probe for PTX here: $CLGPU_SPLITK_LAST_MAX must say where it is offered.
  if (!split_plans.empty() && !GetEnv("CLGPU_SPLITK_LAST_MAX"))
    throw Error("_device_profile: split_plans needs $CLGPU_SPLITK_LAST_MAX (no device to probe)");
  std::vector<double> one_launch;
  for (const auto& [splits, name] : split_plans) {
    GemmPlan plan;
    plan.splits = splits, plan.tiles = TilesFor(name, d);
    one_launch.push_back(SplitKLastUs(d, plan));
  }
  r["one_launch_us"] = one_launch;
  // A folded depthwise's GEMM tiles (rows, columns) per (OH, OW, C, OC) layer of `dw_gemms`.
  std::vector<std::pair<int, int>> dw_tiles;
  for (const auto& [oh, ow, c, oc] : dw_gemms) {
    ConvGeometry g;
    g.n = 1, g.h = g.oh = oh, g.w = g.ow = ow, g.c = g.oc = c, g.kh = g.kw = 3;
    const GemmTiles t = DepthwiseGemmTiles(d, g, oc);
    dw_tiles.emplace_back(t.tile_m, t.tile_n);
  }
  r["dw_gemm_tiles"] = dw_tiles;
  return r;
}

void RegisterDevices(py::module_& m) {
  BindDevice(m);
  m.def(
      "devices",
      [](bool probe_fp16) {
        std::vector<DeviceInfo> list;
        {
          py::gil_scoped_release release;
          list = ListDevices(probe_fp16);
        }
        std::vector<DeviceRecord> out;
        py::gil_scoped_release release;
        for (const auto& d : list) out.emplace_back(d, probe_fp16 ? Int8DotPath(d) : "");
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
        return DeviceRecord(d);
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
        py::arg("split_plans") = std::vector<std::pair<int, std::string>>{},
        py::arg("dw_gemms") = std::vector<std::array<int, 4>>{},
        "The profile (cl/device_profile.h) of a device whose queries answer `facts` "
        "(compute_units among them), the GEMM tiles the tuning table gives it for `tiles`, what "
        "the one-launch form adds (us) to each (splits, tiles name) plan of `split_plans`, and "
        "the tiles (rows, columns) of a folded 3x3 depthwise's GEMM for each (OH, OW, C, OC) "
        "of `dw_gemms` (tests).");
  m.def(
      "opencl_library", []() { return Cl().library_path; },
      "Path of the OpenCL library that was loaded.");
  m.def("reset_opencl_for_testing", &ResetClForTesting,
        "Forget the loaded OpenCL library so the next call searches again (tests only).");
}

}  // namespace clgpu::python
