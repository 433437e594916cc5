// OpenCL device discovery, the device record shown to users, FP16 probing and
// the device-selection rule every part of the delegate uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cl/device_profile.h"
#include "cl/loader.h"

namespace clgpu {

struct DeviceInfo {
  int index = -1;                            // position in ListDevices(), stable within a process
  std::string platform, name, vendor, type;  // type: "gpu", "cpu", "accelerator", "other"
  std::string version, driver_version, opencl_c_version;
  int compute_units = 0;
  int max_clock_mhz = 0;
  uint64_t global_mem_bytes = 0, local_mem_bytes = 0, max_alloc_bytes = 0;
  size_t max_work_group_size = 0;
  size_t base_addr_align_bytes = 4;  // sub-buffer origins must be multiples of this
  bool host_unified_memory = false;
  bool svm_coarse = false;       // coarse-grained SVM buffers (OpenCL 2.0+)
  bool fp16_advertised = false;  // cl_khr_fp16 in the extension string
  bool fp16 = false;             // half arithmetic compiled (NVIDIA hides the extension)
  cl_platform_id platform_id = nullptr;
  cl_device_id id = nullptr;

  // Vendor, architecture, capabilities and the device-dependent choices (cl/device_profile.h).
  DeviceProfile profile;
};

// The clock the estimates assume: the device's highest, or where the driver reports none a
// usual one of its type, 2.5 GHz for a CPU and 1 GHz for the rest (Intel's CPU runtime answers
// 0, which read as 1 MHz made every fold budget a 2,500th of its size: no expand ever folded).
inline int AssumedClockMhz(const DeviceInfo& dev) {
  return dev.max_clock_mhz > 0 ? dev.max_clock_mhz : dev.type == "cpu" ? 2500 : 1000;
}

// The device's nominal arithmetic rate, GFLOP/s: 128 flops per compute unit and cycle at its
// assumed clock (what the cost model assumes before it measures, and the fold budgets' scale).
inline double NominalGflops(const DeviceInfo& dev) {
  return std::max(dev.compute_units, 1) * AssumedClockMhz(dev) * 128e-3;
}

// Every device of every platform (listed once per process). Throws NoDeviceError
// when no OpenCL library loads; returns an empty list when it has no platform.
std::vector<DeviceInfo> ListDevices(bool probe_fp16 = true);
std::vector<DeviceInfo> ListDevicesUncached(bool probe_fp16);

// `spec`: "auto" (fastest-looking GPU, else any device with a warning that it is
// not a GPU), "gpu", "cpu", a decimal index, or a case-insensitive substring of
// the device or platform name. Throws NoDeviceError with an install hint.
DeviceInfo SelectDevice(const std::string& spec);

// Compiles a tiny half-arithmetic kernel; true if the device accepts it.
bool ProbeFp16(cl_platform_id platform, cl_device_id device);

}  // namespace clgpu
