// NVIDIA machine code for serialization_dir. NVIDIA's OpenCL hands out a program's binary as
// PTX, which the driver must compile again (ptxas) each time it is loaded, serially, whenever
// its own compute cache is off or empty; its clCreateProgramWithBinary also takes a cubin,
// which loads at once. The CUDA driver library (libcuda, part of every NVIDIA driver) links
// PTX into a cubin, and does so on several threads at a time.
#pragma once

#include <string>
#include <vector>

#include "cl/device.h"

namespace clgpu {

// CLGPU_NV_CUBIN=1: the stored binaries should be cubins (opt-in: see PtxToCubin's definition).
bool NvCubinRequested();

// With CLGPU_NV_CUBIN=1, the cubin of `ptx` for `dev`'s architecture; empty otherwise or when it
// cannot be had (not an NVIDIA device, no libcuda, no compute capability from OpenCL, a link
// error).
// Thread-safe; the CUDA primary context it links in is created on the first call and kept
// for the process (the driver shares it with any CUDA user of the process).
std::vector<unsigned char> PtxToCubin(const DeviceInfo& dev, const std::vector<unsigned char>& ptx,
                                      std::string* why_not = nullptr);

}  // namespace clgpu
