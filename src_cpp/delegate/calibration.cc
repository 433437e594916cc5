#include "delegate/calibration.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

#include "cl/errors.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {
namespace {

constexpr char kHeader[] = "clgpu_delegate calibration 4";  // 4: mapped transfers
constexpr size_t kMaxFileBytes = 4096;

// The refinement's window (ms; a level lasts tens of ms) and most batches of each length; the
// lower level's distance below the mean of first readings (us; six H100 processes).
constexpr double kRefineWindowMs = 40, kLowerLevelUs = 1.0;
constexpr int kRefineMaxTries = 400;

// One line per field; newlines in driver strings would break the format.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// What a stored file must match (format, version, device, driver); this process's key too.
std::string FileKey(const DeviceInfo& dev) {
  return std::string(kHeader) + "\nversion " + CLGPU_VERSION + "\nplatform " +
         OneLine(dev.platform) + "\ndevice " + OneLine(dev.name) + "\ndriver " +
         OneLine(dev.driver_version) + "\n";
}

struct Field {
  const char* name;
  double DeviceCosts::*value;
  double lo, hi;  // a figure outside is not a measurement of this device
};
const Field kFields[] = {
    {"min_kernel_us", &DeviceCosts::min_kernel_us, 1e-3, 1e6},
    {"launch_gap_us", &DeviceCosts::launch_gap_us, 0, 1e6},
    {"copy_us", &DeviceCosts::copy_us, 1e-3, 1e6},
    {"sync_us", &DeviceCosts::sync_us, 1e-3, 1e6},
    {"gbps", &DeviceCosts::gbps, 1e-3, 1e5},
    {"mapped_gbps", &DeviceCosts::mapped_gbps, 0, 1e5},  // 0: not measured
    {"gflops", &DeviceCosts::gflops, 1e-3, 1e7},
};

bool Plausible(const DeviceCosts& c) {
  for (const Field& f : kFields) {
    const double v = c.*f.value;
    if (!std::isfinite(v) || v < f.lo || v > f.hi) return false;
  }
  return true;
}

// The stored figures, or false when there is no file or it is a link, oversized, malformed,
// for another device, driver or version, or implausible.
bool ReadFile(const std::string& path, const DeviceInfo& dev, DeviceCosts* out) {
  // O_NONBLOCK: a FIFO planted under the name is opened at once (and refused below).
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) <= kMaxFileBytes) {
    text.resize(kMaxFileBytes + 1);
    const ssize_t n = read(fd, text.data(), text.size());
    text.resize(n > 0 ? size_t(n) : 0);
  }
  close(fd);
  const std::string key = FileKey(dev);
  if (text.size() > kMaxFileBytes || text.compare(0, key.size(), key) != 0) return false;
  std::istringstream lines(text.substr(key.size()));
  std::string line;
  DeviceCosts c;
  for (const Field& f : kFields) {
    if (!std::getline(lines, line)) return false;
    const std::string prefix = std::string(f.name) + " ";
    if (line.compare(0, prefix.size(), prefix) != 0) return false;
    const char* v = line.c_str() + prefix.size();
    char* end = nullptr;
    c.*f.value = std::strtod(v, &end);
    if (end == v || *end != '\0') return false;
  }
  if (std::getline(lines, line) || !Plausible(c)) return false;
  c.source = "file";
  *out = c;
  return true;
}

// Atomic (temp file + rename, like the program cache): readers see the old file or the new
// one. rename() replaces a link itself, never what it points to.
void WriteFile(const std::string& path, const std::string& dir, const DeviceInfo& dev,
               const DeviceCosts& c) {
  mkdir(dir.c_str(), 0755);  // one level, as the program cache (options.cc)
  std::string text = FileKey(dev);
  char buf[80];
  for (const Field& f : kFields) {
    std::snprintf(buf, sizeof buf, "%s %.9g\n", f.name, c.*f.value);
    text += buf;
  }
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  FILE* f = std::fopen(tmp.c_str(), "wbx");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    Log(LogLevel::kWarning, "could not write the calibration file " + path);
  }
}

enum class Mode { kAuto, kOff, kForce };

Mode ModeFromEnv() {
  const std::string v = GetEnv("CLGPU_CALIBRATION").value_or("");
  if (v.empty() || v == "auto") return Mode::kAuto;
  if (v == "off") return Mode::kOff;
  if (v == "force") return Mode::kForce;
  Log(LogLevel::kWarning,
      std::string("CLGPU_CALIBRATION=") + v + " is not one of auto, off, force; using auto");
  return Mode::kAuto;
}

}  // namespace

std::string CalibrationPath(const DeviceInfo& dev, const std::string& dir) {
  const std::string key = FileKey(dev);
  char name[48];
  std::snprintf(name, sizeof name, "calibration-%016llx.txt",
                static_cast<unsigned long long>(HashBytes(key.data(), key.size())));
  return dir + "/" + name;
}

DeviceCosts RefinedDeviceCosts(Environment& env, cl_command_queue queue, const std::string& dir,
                               const DeviceCosts& c) {
  if (c.refined || (c.source != "measured" && c.source != "cache")) return c;
  static std::mutex mutex;
  static std::map<std::string, DeviceCosts> refined;  // by device and driver
  std::lock_guard<std::mutex> l(mutex);
  const DeviceInfo& dev = env.device();
  const std::string key = FileKey(dev);
  if (auto it = refined.find(key); it != refined.end()) return it->second;
  DeviceCosts out = c;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const double lower = LowerLaunchLevelUs(env, queue, kRefineWindowMs, kRefineMaxTries);
    if (!(lower > 0 && lower < 1e5)) throw Error("an implausible figure");
    out.min_kernel_us = lower + kLowerLevelUs;
    out.refined = true;
    char buf[160];
    std::snprintf(
        buf, sizeof buf,
        "calibration refined for a close decision: %.2f us/kernel (was %.2f), in %.1f ms",
        out.min_kernel_us, c.min_kernel_us,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    Log(LogLevel::kInfo, buf);
  } catch (const std::exception& e) {
    Log(LogLevel::kInfo, std::string("calibration not refined: ") + e.what());
  }
  refined[key] = out;
  if (out.refined && !dir.empty()) WriteFile(CalibrationPath(dev, dir), dir, dev, out);
  return out;
}

DeviceCosts CalibratedDeviceCosts(Environment& env, cl_command_queue queue,
                                  const std::string& dir) {
  const Mode mode = ModeFromEnv();
  const DeviceInfo& dev = env.device();
  if (mode == Mode::kOff || (mode == Mode::kAuto && !dev.profile.measure_costs)) return {};
  static std::mutex mutex;
  static std::map<std::string, DeviceCosts> measured;  // by device and driver
  std::lock_guard<std::mutex> l(mutex);  // one measurement per device, however many delegates
  const std::string key = FileKey(dev);
  const std::string path = dir.empty() ? std::string() : CalibrationPath(dev, dir);
  DeviceCosts c, stored;
  const bool have_file = !path.empty() && ReadFile(path, dev, &stored);
  if (auto it = measured.find(key); it != measured.end()) {
    if (it->second.source == "constants") return {};  // measuring failed here before
    c = it->second;
    c.source = "cache";
  } else if (have_file) {
    c = stored;
  } else {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      // A busy host can make one slope negative: measure again before giving up.
      for (int attempt = 0;; ++attempt) {
        try {
          c = MeasureDeviceCosts(env, queue);
          if (!Plausible(c)) {
            char buf[240];
            std::snprintf(buf, sizeof buf,
                          "measured implausible figures (%g us/kernel, %g us/copy, %g us sync, "
                          "%g GB/s, %g GB/s mapped, %g GFLOP/s)",
                          c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.mapped_gbps, c.gflops);
            throw Error(buf);
          }
          break;
        } catch (const Error&) {
          if (attempt == 2) throw;
        }
      }
      char buf[240];
      std::snprintf(
          buf, sizeof buf,
          "calibration: %.2f us/kernel, %.2f us/copy, %.1f us sync, %.2f GB/s, "
          "%.2f GB/s mapped, %.1f GFLOP/s, measured in %.1f ms on ",
          c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.mapped_gbps, c.gflops,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      Log(LogLevel::kInfo, buf + dev.name);
    } catch (const std::exception& e) {
      Log(LogLevel::kWarning,
          std::string("could not calibrate the cost model on this device; using its constants: ") +
              e.what());
      measured[key] = {};  // once per process: a later delegate would fail the same way
      return {};
    }
  }
  if (c.source != "cache") measured[key] = c;
  if (!path.empty() && !have_file) WriteFile(path, dir, dev, c);
  return c;
}

}  // namespace clgpu
