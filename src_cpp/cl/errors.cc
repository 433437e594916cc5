#include "cl/errors.h"

#include "common/error.h"

namespace clgpu {

std::string ClErrorName(int code) {
  size_t n = 0;
  const ClErrorEntry* names = ClErrorNames(&n);
  for (size_t i = 0; i < n; ++i) {
    if (names[i].code == code) return names[i].name;
  }
  return "CL_UNKNOWN_ERROR(" + std::to_string(code) + ")";
}

void CheckCl(int code, const char* call) {
  if (code != 0) throw ClError(call, code);
}

ClError::ClError(const std::string& call, int code, const std::string& detail)
    : Error(call + " failed: " + ClErrorName(code) + (detail.empty() ? "" : " (" + detail + ")")),
      call_(call),
      code_(code) {}

BuildError::BuildError(const std::string& program, const std::string& options,
                       const std::string& log)
    : Error("OpenCL program '" + program + "' failed to build with options [" + options + "]:\n" +
            log),
      log_(log) {}

}  // namespace clgpu
