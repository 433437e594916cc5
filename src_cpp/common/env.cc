#include "common/env.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/process_lock.h"

namespace clgpu {

std::optional<std::string> GetEnv(const char* name) {
  std::optional<std::string> out;
  WithDriverLock([&] {
    if (const char* v = std::getenv(name)) out = v;
  });
  return out;
}

std::vector<double> EnvNumbers(const char* name, size_t count, const char* expect,
                               const std::function<bool(const std::vector<double>&)>& valid) {
  const std::optional<std::string> value = GetEnv(name);
  if (!value || value->empty()) return {};
  const char* env = value->c_str();
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

std::optional<bool> EnvSwitch(const char* name) {
  const std::vector<double> v = EnvNumbers(
      name, 1, "0 or 1", [](const std::vector<double>& x) { return x[0] == 0 || x[0] == 1; });
  if (v.empty()) return std::nullopt;
  return v[0] == 1;
}

bool WholeAtLeast(const std::vector<double>& v, double lo) {
  for (double x : v)
    if (x < lo || x != std::floor(x) || x > 1e9) return false;
  return true;
}

}  // namespace clgpu
