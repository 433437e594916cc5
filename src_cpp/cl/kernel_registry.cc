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

std::string KernelTextExpanded(const std::string& name, int depth) {
  if (depth > 8) throw Error("kernels/" + name + ".cl: #include nested too deeply");
  const std::string text = KernelText(name);
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const std::string prefix = "#include \"";
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() + 4 &&
        line.compare(line.size() - 4, 4, ".cl\"") == 0) {
      const std::string stem = line.substr(prefix.size(), line.size() - prefix.size() - 4);
      out += KernelTextExpanded(stem, depth + 1);
    } else {
      out += line;
    }
    out += '\n';
    pos = end + 1;
  }
  return out;
}

}  // namespace clgpu
