#include "common/host_cache.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "common/env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace clgpu {
namespace {

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// "32768K", "105M" -> bytes; 0 when unreadable.
int64_t ParseSize(const std::string& s) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < s.size() ? s[used] : ' ';
  const int64_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : unit == 'G' ? 1 << 30 : 1;
  return v > 0 ? int64_t(v) * scale : 0;
}

// The highest cache level any CPU lists; each instance (its shared_cpu_list) counted once.
int64_t FromSysfs() {
  std::map<int, std::map<std::string, int64_t>> levels;  // level -> instance -> bytes
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/";
    if (ReadLine(dir + "index0/level").empty()) {
      if (cpu == 0) return 0;
      break;
    }
    for (int i = 0; i < 16; ++i) {
      const std::string idx = dir + "index" + std::to_string(i) + "/";
      const std::string level = ReadLine(idx + "level");
      if (level.empty()) break;
      if (ReadLine(idx + "type") == "Instruction") continue;
      const int64_t lv = ParseSize(level), bytes = ParseSize(ReadLine(idx + "size"));
      if (lv > 0 && bytes > 0) levels[int(lv)][ReadLine(idx + "shared_cpu_list")] = bytes;
    }
  }
  if (levels.empty()) return 0;
  int64_t total = 0;
  for (const auto& [instance, bytes] : levels.rbegin()->second) total += bytes;
  return total;
}

// Whether CPUID leaf 7 sets all of `ebx` and `edx` and the OS saves all of the `xcr0` register
// states (OSXSAVE, then XGETBV): the units exist and may be used, as XNNPACK's own checks ask.
bool CpuLeaf7WithOsState(unsigned ebx, unsigned edx, unsigned xcr0) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // no OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (b & ebx) != ebx || (d & edx) != edx)
    return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & xcr0) == xcr0;
#else
  (void)ebx, (void)edx, (void)xcr0;
  return false;
#endif
}

// AMX-INT8 and AMX-TILE (EDX 25, 24) with the tile states (17, 18).
bool CpuHasInt8Tiles() { return CpuLeaf7WithOsState(0, (1u << 25) | (1u << 24), 3u << 17); }

// AVX512F (EBX 16) with the SSE, AVX, opmask and upper-ZMM states (1, 2, 5-7).
bool CpuHasAvx512() { return CpuLeaf7WithOsState(1u << 16, 0, 0xE6u); }

}  // namespace

int HostFloatLanes() {
  const std::vector<double> v =
      EnvNumbers("CLGPU_CPU_FLOAT_LANES", 1, "a lane count (1-64)",
                 [](const std::vector<double>& x) { return x[0] >= 1 && x[0] <= 64; });
  if (!v.empty()) return int(v[0]);
  static std::once_flag once;
  static int lanes = 8;
  std::call_once(once, [] { lanes = CpuHasAvx512() ? 16 : 8; });
  return lanes;
}

bool HostInt8Tiles() {
  if (const std::optional<bool> v = EnvSwitch("CLGPU_CPU_INT8_TILES")) return *v;
  static std::once_flag once;
  static bool tiles = false;
  std::call_once(once, [] { tiles = CpuHasInt8Tiles(); });
  return tiles;
}

int64_t HostCacheBytes() {
  static std::once_flag once;
  static int64_t bytes = 0;
  std::call_once(once, [] { bytes = FromSysfs(); });
  return bytes;
}

int64_t WeightCacheBytes(int threads) {
  const std::vector<double> mb =
      EnvNumbers("CLGPU_CPU_CACHE_MB", 1, "a size in MB (0 <= MB < 1e6)",
                 [](const std::vector<double>& v) { return v[0] >= 0 && v[0] < 1e6; });
  if (!mb.empty()) return int64_t(mb[0] * 1024 * 1024);
  return std::min(HostCacheBytes(), kCacheShareBytesPerThread * std::max(threads, 1));
}

}  // namespace clgpu
