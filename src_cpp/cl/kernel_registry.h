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

}  // namespace clgpu
