#include "cl/device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "cl/errors.h"
#include "cl/objects.h"
#include "common/error.h"
#include "common/log.h"
#include "common/process_lock.h"

namespace clgpu {
namespace {

constexpr const char* kInstallHint =
    "Install an OpenCL driver for your GPU (NVIDIA, AMD ROCm, Intel compute-runtime; on "
    "Debian/Ubuntu also ocl-icd-libopencl1), or for a CPU device: "
    "apt-get install ocl-icd-libopencl1 pocl-opencl-icd.";

std::string PlatformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (Cl().clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  Cl().clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (Cl().clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  Cl().clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T DeviceValue(cl_device_id d, cl_device_info what) {
  T v{};
  Cl().clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Higher is faster-looking: GPUs first, then by parallelism x clock.
double Score(const DeviceInfo& d) {
  double s = double(std::max(d.compute_units, 1)) * AssumedClockMhz(d);
  return d.type == "gpu" ? 1e12 + s : s;
}

// The profile's input. The vendor queries only where the vendor answers them.
DeviceFacts FactsOf(const DeviceInfo& d, cl_device_id id) {
  DeviceFacts f;
  f.vendor = d.vendor, f.name = d.name, f.platform = d.platform, f.type = d.type;
  f.extensions = DeviceString(id, CL_DEVICE_EXTENSIONS);
  f.host_unified_memory = d.host_unified_memory;
  const std::string v = Lower(d.vendor);
  if (v.find("nvidia") != std::string::npos) {
    // CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV / _MINOR_NV (cl_nv_device_attribute_query)
    f.nv_compute_major = static_cast<int>(DeviceValue<cl_uint>(id, 0x4000));
    f.nv_compute_minor = static_cast<int>(DeviceValue<cl_uint>(id, 0x4001));
  }
  if (v.find("advanced micro devices") != std::string::npos)
    f.amd_board = DeviceString(id, 0x4038);  // CL_DEVICE_BOARD_NAME_AMD
  return f;
}

}  // namespace

bool ProbeFp16(cl_platform_id platform, cl_device_id device) {
  const ClApi& cl = Cl();
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int err = CL_SUCCESS;
  Context ctx(cl.clCreateContext(props, 1, &device, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return false;
  const char* src =
      "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
      "__kernel void probe(__global half* a) { half x = a[0]; half y = x * (half)2.0f + x;"
      " a[get_global_id(0)] = y; }\n";
  Program prog(cl.clCreateProgramWithSource(ctx.get(), 1, &src, nullptr, &err));
  if (err != CL_SUCCESS) return false;
  return cl.clBuildProgram(prog.get(), 1, &device, "", nullptr, nullptr) == CL_SUCCESS;
}

std::vector<DeviceInfo> ListDevices(bool probe_fp16) {
  // Devices do not change within a process, and the FP16 probe costs a context
  // and a compile per device: list once per loaded OpenCL library.
  static std::mutex mutex;
  static const ClApi* listed_for = nullptr;
  static std::vector<DeviceInfo> cached[2];
  static bool have[2] = {false, false};
  const ClApi& cl = Cl();
  std::lock_guard<std::mutex> lock(mutex);
  if (listed_for != &cl) {
    listed_for = &cl;
    have[0] = have[1] = false;
  }
  if (!have[probe_fp16]) {
    WithDriverLock([&] { cached[probe_fp16] = ListDevicesUncached(probe_fp16); });
    have[probe_fp16] = true;
  }
  return cached[probe_fp16];
}

std::vector<DeviceInfo> ListDevicesUncached(bool probe_fp16) {
  const ClApi& cl = Cl();
  cl_uint np = 0;
  cl_int err = cl.clGetPlatformIDs(0, nullptr, &np);
  // The ICD loader reports "no platform" as CL_PLATFORM_NOT_FOUND_KHR (-1001);
  // any other error is a broken installation and is named as such.
  constexpr cl_int kPlatformNotFoundKhr = -1001;
  if (err == kPlatformNotFoundKhr || (err == CL_SUCCESS && np == 0)) return {};
  CheckCl(err, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(np);
  CheckCl(cl.clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");
  std::vector<DeviceInfo> out;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0)
      continue;
    std::vector<cl_device_id> ids(nd);
    CheckCl(cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id id : ids) {
      DeviceInfo d;
      d.index = static_cast<int>(out.size());
      d.platform_id = p;
      d.id = id;
      d.platform = PlatformString(p, CL_PLATFORM_NAME);
      d.name = DeviceString(id, CL_DEVICE_NAME);
      d.vendor = DeviceString(id, CL_DEVICE_VENDOR);
      auto type = DeviceValue<cl_device_type>(id, CL_DEVICE_TYPE);
      d.type = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
               : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
               : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                     : "other";
      d.version = DeviceString(id, CL_DEVICE_VERSION);
      d.driver_version = DeviceString(id, CL_DRIVER_VERSION);
      d.opencl_c_version = DeviceString(id, CL_DEVICE_OPENCL_C_VERSION);
      d.compute_units = static_cast<int>(DeviceValue<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
      d.max_clock_mhz = static_cast<int>(DeviceValue<cl_uint>(id, CL_DEVICE_MAX_CLOCK_FREQUENCY));
      d.global_mem_bytes = DeviceValue<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      d.local_mem_bytes = DeviceValue<cl_ulong>(id, CL_DEVICE_LOCAL_MEM_SIZE);
      d.max_alloc_bytes = DeviceValue<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d.max_work_group_size = DeviceValue<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      d.base_addr_align_bytes =
          std::max<size_t>(DeviceValue<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8, 4);
      // Deprecated in 2.0 but still answered by every driver we target.
      d.host_unified_memory = DeviceValue<cl_bool>(id, CL_DEVICE_HOST_UNIFIED_MEMORY) != 0;
      // CL_DEVICE_SVM_CAPABILITIES & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER (2.0 names, 1.2
      // headers); a 1.2 device rejects the query and the value stays 0.
      d.svm_coarse = (DeviceValue<cl_bitfield>(id, 0x1053) & 1) != 0;
      d.fp16_advertised =
          DeviceString(id, CL_DEVICE_EXTENSIONS).find("cl_khr_fp16") != std::string::npos;
      // The probe matters for GPUs (NVIDIA hides cl_khr_fp16). A CPU device that does
      // not advertise it cannot compile half arithmetic, and PoCL would print the
      // failed build to stderr, so it is not probed.
      const bool probe = probe_fp16 && (d.type != "cpu" || d.fp16_advertised);
      d.fp16 = probe ? ProbeFp16(p, id) : d.fp16_advertised;
      d.profile = MakeDeviceProfile(FactsOf(d, id));
      out.push_back(std::move(d));
    }
  }
  return out;
}

DeviceInfo SelectDevice(const std::string& spec_in) {
  // Selection needs no FP16 probe: it would only slow every delegate's creation.
  std::vector<DeviceInfo> devices = ListDevices(/*probe_fp16=*/false);
  if (devices.empty()) {
    throw NoDeviceError(std::string("No OpenCL platform or device was found (library: ") +
                        Cl().library_path + "). " + kInstallHint);
  }
  const std::string spec = Lower(spec_in.empty() ? "auto" : spec_in);
  auto best = [&](auto pred) -> const DeviceInfo* {
    const DeviceInfo* b = nullptr;
    for (const auto& d : devices)
      if (pred(d) && (!b || Score(d) > Score(*b))) b = &d;
    return b;
  };
  const DeviceInfo* pick = nullptr;
  if (spec == "auto") {
    pick = best([](const DeviceInfo&) { return true; });
    static std::once_flag warned;  // once per process, not per delegate
    if (pick->type != "gpu")
      std::call_once(warned, [&] {
        Log(LogLevel::kWarning, "no OpenCL GPU found; using " + pick->type + " device '" +
                                    pick->name + "' (" + pick->platform +
                                    "): expect CPU-like speed");
      });
  } else if (spec == "gpu" || spec == "cpu") {
    pick = best([&](const DeviceInfo& d) { return d.type == spec; });
  } else if (std::all_of(spec.begin(), spec.end(), ::isdigit)) {
    size_t i = std::strtoul(spec.c_str(), nullptr, 10);
    if (i < devices.size()) pick = &devices[i];
  } else {
    pick = best([&](const DeviceInfo& d) {
      return Lower(d.name).find(spec) != std::string::npos ||
             Lower(d.platform).find(spec) != std::string::npos;
    });
  }
  if (!pick) {
    std::string names;
    for (const auto& d : devices)
      names += "\n  " + std::to_string(d.index) + ": " + d.name + " (" + d.type + ", " +
               d.platform + ")";
    throw NoDeviceError("No OpenCL device matches device='" + Shown(spec_in) + "'. Available:" +
                        names + (spec == "gpu" ? std::string("\n") + kInstallHint : std::string()));
  }
  return *pick;
}

}  // namespace clgpu
