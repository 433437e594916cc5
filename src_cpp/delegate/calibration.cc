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
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <vector>

#include "cl/errors.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {
namespace {

constexpr char kHeader[] = "clgpu_delegate calibration 3";  // 3: kernels in turn
constexpr size_t kMaxFileBytes = 4096;

using Clock = std::chrono::steady_clock;

double UsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// The smallest of three tries: a loaded host only ever adds time.
template <typename F>
double Best(F&& f) {
  double best = std::numeric_limits<double>::max();
  for (int i = 0; i < 3; ++i) best = std::min(best, f());
  return best;
}

// One line per field; newlines in driver strings would break the format.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// What a stored file must match exactly: format, project version, device and driver.
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
  const char* v = std::getenv("CLGPU_CALIBRATION");
  if (!v || !*v || std::string(v) == "auto") return Mode::kAuto;
  if (std::string(v) == "off") return Mode::kOff;
  if (std::string(v) == "force") return Mode::kForce;
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

DeviceCosts MeasureDeviceCosts(Environment& env, cl_command_queue queue) {
  const auto& cl = Cl();
  const DeviceInfo& dev = env.device();
  const std::shared_ptr<Program> program = env.programs().Get("calibration", "");
  // Four distinct small kernels launched in turn, as a partition's layers are; each reads what
  // the one before it wrote (two buffers: the even kernels read a and write b, the odd ones the
  // other way).
  constexpr int kSmallKernels = 4;
  Kernel small[kSmallKernels];
  for (int k = 0; k < kSmallKernels; ++k)
    small[k] = CreateKernel(*program, "calibration_small" + std::to_string(k));
  Kernel fma = CreateKernel(*program, "calibration_fma");
  constexpr size_t kSmallItems = 4096, kSmallGroup = 64, kSmall = 4 << 10;
  // Large enough that bandwidth, not latency, sets a copy's time; within any device's limit.
  const size_t large = std::min<size_t>(8 << 20, dev.max_alloc_bytes / 4) & ~size_t(4095);
  // Enough work-items to fill every compute unit many times over (a CPU core's SIMD lanes
  // need far fewer than a GPU's multiprocessor).
  const size_t fma_items = size_t(std::max(dev.compute_units, 1)) * dev.profile.fill_items_per_unit;
  if (large <= kSmall) throw Error("the device's largest allocation is too small to calibrate");
  Buffer small_a = env.CreateBuffer(kSmall), small_b = env.CreateBuffer(kSmall);
  Buffer layer_a = env.CreateBuffer(kSmallItems * sizeof(float));
  Buffer layer_b = env.CreateBuffer(kSmallItems * sizeof(float));
  Buffer big = env.CreateBuffer(large), work = env.CreateBuffer(fma_items * sizeof(float));
  std::vector<unsigned char> host(large, 1);
  const float zero = 0.0f;
  CheckCl(cl.clEnqueueFillBuffer(queue, work.get(), &zero, sizeof zero, 0, work.bytes(), 0, nullptr,
                                 nullptr),
          "clEnqueueFillBuffer");
  for (const Buffer* b : {&layer_a, &layer_b})
    CheckCl(cl.clEnqueueFillBuffer(queue, b->get(), &zero, sizeof zero, 0, b->bytes(), 0, nullptr,
                                   nullptr),
            "clEnqueueFillBuffer");
  const cl_mem ab[2] = {layer_a.get(), layer_b.get()};
  for (int k = 0; k < kSmallKernels; ++k)
    for (int i = 0; i < 2; ++i)
      CheckCl(cl.clSetKernelArg(small[k].get(), i, sizeof(cl_mem), &ab[(k & 1) ^ i]),
              "clSetKernelArg");
  cl_mem mem = work.get();
  CheckCl(cl.clSetKernelArg(fma.get(), 0, sizeof mem, &mem), "clSetKernelArg");
  auto finish = [&] { CheckCl(cl.clFinish(queue), "clFinish"); };

  // n commands enqueued back to back, then one wait (us).
  auto batch = [&](int n, auto&& enqueue) {
    finish();
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) enqueue();
    finish();
    return UsSince(t0);
  };
  int launches = 0;  // never the same kernel twice in a row
  auto launch_small = [&] {
    CheckCl(cl.clEnqueueNDRangeKernel(queue, small[launches++ % kSmallKernels].get(), 1, nullptr,
                                      &kSmallItems, &kSmallGroup, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel");
  };
  auto copy_small = [&] {
    CheckCl(cl.clEnqueueCopyBuffer(queue, small_a.get(), small_b.get(), 0, 0, kSmall, 0, nullptr,
                                   nullptr),
            "clEnqueueCopyBuffer");
  };
  // Blocking host <-> device copies of `bytes` from buffer b, one each way (us for the pair).
  auto round_trip = [&](const Buffer& b, size_t bytes) {
    finish();
    const auto t0 = Clock::now();
    CheckCl(cl.clEnqueueWriteBuffer(queue, b.get(), CL_TRUE, 0, bytes, host.data(), 0, nullptr,
                                    nullptr),
            "clEnqueueWriteBuffer");
    CheckCl(
        cl.clEnqueueReadBuffer(queue, b.get(), CL_TRUE, 0, bytes, host.data(), 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
    return UsSince(t0);
  };
  auto run_fma = [&](int iters) {
    CheckCl(cl.clSetKernelArg(fma.get(), 1, sizeof iters, &iters), "clSetKernelArg");
    return batch(1, [&] {
      CheckCl(cl.clEnqueueNDRangeKernel(queue, fma.get(), 1, nullptr, &fma_items, nullptr, 0,
                                        nullptr, nullptr),
              "clEnqueueNDRangeKernel");
    });
  };

  // First uses pay for lazy allocation and kernel upload; not what an invoke pays. The longer
  // arithmetic run also brings an idle GPU up from its lowest clocks, where the delegate's
  // kernels will not run.
  run_fma(4096);
  batch(kSmallKernels, launch_small);  // each kernel once
  batch(1, copy_small);
  round_trip(big, large);
  round_trip(small_a, kSmall);
  run_fma(1);

  DeviceCosts c;
  // Slopes over the command count leave out the first command's start and the final wait.
  // Back to back, a small kernel's time includes the gap before the next one.
  c.min_kernel_us = (Best([&] { return batch(64, launch_small); }) -
                     Best([&] { return batch(8, launch_small); })) /
                    56;
  c.launch_gap_us = 0;
  c.copy_us =
      (Best([&] { return batch(32, copy_small); }) - Best([&] { return batch(8, copy_small); })) /
      24;
  c.sync_us = Best([&] {
    finish();
    const auto t0 = Clock::now();
    finish();
    CheckCl(cl.clEnqueueReadBuffer(queue, small_a.get(), CL_TRUE, 0, sizeof(float), host.data(), 0,
                                   nullptr, nullptr),
            "clEnqueueReadBuffer");
    return UsSince(t0);
  });
  const double small_us = Best([&] { return round_trip(small_a, kSmall); });
  const double large_us = Best([&] { return round_trip(big, large); });
  c.gbps = 2.0 * double(large - kSmall) / ((large_us - small_us) * 1e3);
  // Sized so the longer run is well above a launch's cost on a GPU; the slope between two
  // lengths leaves out the launch and the wait.
  constexpr int kIters = 1024;
  c.gflops =
      8.0 * kIters * double(fma_items) /
      ((Best([&] { return run_fma(2 * kIters); }) - Best([&] { return run_fma(kIters); })) * 1e3);
  c.source = "measured";
  if (!Plausible(c)) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "measured implausible figures (%g us/kernel, %g us/copy, %g us sync, %g GB/s, "
                  "%g GFLOP/s)",
                  c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.gflops);
    throw Error(buf);
  }
  return c;
}

DeviceCosts CalibratedDeviceCosts(Environment& env, cl_command_queue queue,
                                  const std::string& dir) {
  const Mode mode = ModeFromEnv();
  const DeviceInfo& dev = env.device();
  if (mode == Mode::kOff || (mode == Mode::kAuto && !dev.profile.measure_costs)) return {};
  static std::mutex mutex;
  static std::map<std::string, DeviceCosts> measured;  // by device and driver
  std::lock_guard<std::mutex> l(mutex);  // one measurement per device, however many delegates
  const std::string key = dev.platform + "\n" + dev.name + "\n" + dev.driver_version;
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
      const auto t0 = Clock::now();
      // A busy host can make one slope negative: measure again before giving up.
      for (int attempt = 0;; ++attempt) {
        try {
          c = MeasureDeviceCosts(env, queue);
          break;
        } catch (const Error&) {
          if (attempt == 2) throw;
        }
      }
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "calibration: %.2f us/kernel, %.2f us/copy, %.1f us sync, %.2f GB/s, "
                    "%.1f GFLOP/s, measured in %.1f ms on ",
                    c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.gflops, UsSince(t0) / 1e3);
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
