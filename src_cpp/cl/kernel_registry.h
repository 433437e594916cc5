// The kernels/*.cl files embedded at build time (cmake/ClgpuKernels.cmake).
#pragma once

#include <cstddef>
#include <string>

namespace clgpu {

struct KernelSource {
  const char* name;  // file stem, e.g. "conv2d_direct"
  const char* text;
  size_t size;
};

const KernelSource* EmbeddedKernels(size_t* count);

// The text of kernels/<name>.cl; throws Error if there is no such file.
std::string KernelText(const std::string& name);

// KernelText with each line `#include "other.cl"` replaced by that embedded file
// (kernels share helpers this way; the OpenCL compiler never sees a file path).
std::string KernelTextExpanded(const std::string& name, int depth = 0);

}  // namespace clgpu
