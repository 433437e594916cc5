#include "cl/kernel_registry.h"

#include "common/error.h"

namespace clgpu {

std::string KernelText(const std::string& name) {
  size_t n = 0;
  const KernelSource* sources = EmbeddedKernels(&n);
  for (size_t i = 0; i < n; ++i) {
    if (name == sources[i].name) return std::string(sources[i].text, sources[i].size);
  }
  throw Error("no embedded kernel file named '" + name + ".cl'");
}

}  // namespace clgpu
