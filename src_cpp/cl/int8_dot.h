// Which 4 x int8 dot-product instruction the int8 kernels use on a device (kernels/quant.cl's
// dot4): "dp4a" (NVIDIA's PTX instruction through inline asm, which NVIDIA's OpenCL accepts but
// does not advertise), "khr" (cl_khr_integer_dot_product), or "portable" (four multiply-adds).
// Decided by compiling and running each candidate once per device, since an extension string
// may promise what a driver miscompiles, and NVIDIA's promises nothing.
#pragma once

#include <string>

#include "cl/device.h"

namespace clgpu {

// The path for `d` (cached per device for the process) and the build defines that select it
// ("-DQUANT_DOT_DP4A -DQUANT_PTX", "-DQUANT_DOT_KHR -cl-std=CL3.0" or "").
const std::string& Int8DotPath(const DeviceInfo& d);
std::string Int8DotDefines(const std::string& path);
// "-DQUANT_PTX" where the dp4a probe showed that inline PTX compiles and runs, else "": the sums
// that work-groups add for one another (kernels/quant.cl) then use PTX instructions.
std::string PtxDefines(const DeviceInfo& d);

}  // namespace clgpu
