#include "common/env.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.h"

namespace clgpu {

std::vector<double> EnvNumbers(const char* name, size_t count, const char* expect,
                               const std::function<bool(const std::vector<double>&)>& valid) {
  const char* env = std::getenv(name);
  if (!env || !*env) return {};
  std::vector<double> v;
  const char* at = env;
  bool ok = true;
  while (ok && v.size() < count) {
    if (!v.empty()) ok = *at++ == ',';
    char* end = nullptr;
    // strtod skips leading blanks; a number must start right here.
    const double x = ok && *at && *at != ' ' && *at != '\t' ? std::strtod(at, &end) : 0;
    ok = ok && end && end != at && std::isfinite(x);
    if (ok) v.push_back(x), at = end;
  }
  if (!ok || *at || (valid && !valid(v)))
    throw Error(std::string(name) + " must be " + expect + ", not '" + env + "'");
  return v;
}

bool WholeAtLeast(const std::vector<double>& v, double lo) {
  for (double x : v)
    if (x < lo || x != std::floor(x) || x > 1e9) return false;
  return true;
}

}  // namespace clgpu
