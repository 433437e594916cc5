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
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {
namespace {

constexpr char kHeader[] = "clgpu_delegate calibration 4";  // 4: mapped transfers
constexpr size_t kMaxFileBytes = 4096;

using Clock = std::chrono::steady_clock;

// The refinement's window (ms; a level lasts tens of ms) and most batches of each length; the
// lower level's distance below the mean of first readings (us; six H100 processes).
constexpr double kRefineWindowMs = 40, kLowerLevelUs = 1.0;
constexpr int kRefineMaxTries = 400;

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
    {"mapped_gbps", &DeviceCosts::mapped_gbps, 1e-3, 1e5},
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

namespace {

// What the calibration runs: four distinct small kernels launched in turn, as a partition's
// layers are (each reads what the one before wrote: the even kernels read a and write b, the odd
// ones the other way), a buffer copy, host round trips and an arithmetic kernel, each timed from
// the host.
class CalibrationRig {
 public:
  static constexpr int kSmallKernels = 4;
  static constexpr size_t kSmallItems = 4096, kSmallGroup = 64, kSmall = 4 << 10;

  CalibrationRig(Environment& env, cl_command_queue queue)
      : cl_(Cl()), queue_(queue), program_(env.programs().Get("calibration", "")) {
    const DeviceInfo& dev = env.device();
    for (int k = 0; k < kSmallKernels; ++k)
      small_[k] = CreateKernel(*program_, "calibration_small" + std::to_string(k));
    fma_ = CreateKernel(*program_, "calibration_fma");
    // Large enough that bandwidth, not latency, sets a copy's time; within any device's limit.
    large = std::min<size_t>(8 << 20, dev.max_alloc_bytes / 4) & ~size_t(4095);
    // Enough work-items to fill every compute unit many times over (a CPU core's SIMD lanes
    // need far fewer than a GPU's multiprocessor).
    fma_items = size_t(std::max(dev.compute_units, 1)) * dev.profile.fill_items_per_unit;
    if (large <= kSmall) throw Error("the device's largest allocation is too small to calibrate");
    small_a = env.CreateBuffer(kSmall), small_b_ = env.CreateBuffer(kSmall);
    layer_a_ = env.CreateBuffer(kSmallItems * sizeof(float));
    layer_b_ = env.CreateBuffer(kSmallItems * sizeof(float));
    big = env.CreateBuffer(large), work_ = env.CreateBuffer(fma_items * sizeof(float));
    host_.assign(large, 1);
    mapped_host_.assign(large, 1);
    cl_int err = CL_SUCCESS;
    cl_mem m = cl_.clCreateBuffer(env.context(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, large,
                                  mapped_host_.data(), &err);
    if (err != CL_SUCCESS) throw ClError("clCreateBuffer(CL_MEM_USE_HOST_PTR)", err);
    mapped_ = Buffer(m, large);
    const float zero = 0.0f;
    for (const Buffer* b : {&work_, &layer_a_, &layer_b_})
      CheckCl(cl_.clEnqueueFillBuffer(queue_, b->get(), &zero, sizeof zero, 0, b->bytes(), 0,
                                      nullptr, nullptr),
              "clEnqueueFillBuffer");
    const cl_mem ab[2] = {layer_a_.get(), layer_b_.get()};
    for (int k = 0; k < kSmallKernels; ++k)
      for (int i = 0; i < 2; ++i)
        CheckCl(cl_.clSetKernelArg(small_[k].get(), i, sizeof(cl_mem), &ab[(k & 1) ^ i]),
                "clSetKernelArg");
    cl_mem mem = work_.get();
    CheckCl(cl_.clSetKernelArg(fma_.get(), 0, sizeof mem, &mem), "clSetKernelArg");
  }

  void Finish() { CheckCl(cl_.clFinish(queue_), "clFinish"); }
  // n commands enqueued back to back, then one wait (us).
  template <typename F>
  double Batch(int n, F&& enqueue) {
    Finish();
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) enqueue();
    Finish();
    return UsSince(t0);
  }
  void LaunchSmall() {  // never the same kernel twice in a row
    CheckCl(cl_.clEnqueueNDRangeKernel(queue_, small_[launches_++ % kSmallKernels].get(), 1,
                                       nullptr, &kSmallItems, &kSmallGroup, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel");
  }
  void CopySmall() {
    CheckCl(cl_.clEnqueueCopyBuffer(queue_, small_a.get(), small_b_.get(), 0, 0, kSmall, 0, nullptr,
                                    nullptr),
            "clEnqueueCopyBuffer");
  }
  // Blocking host <-> device copies of `bytes` from buffer b, one each way (us for the pair).
  double RoundTrip(const Buffer& b, size_t bytes) {
    Finish();
    const auto t0 = Clock::now();
    CheckCl(cl_.clEnqueueWriteBuffer(queue_, b.get(), CL_TRUE, 0, bytes, host_.data(), 0, nullptr,
                                     nullptr),
            "clEnqueueWriteBuffer");
    CheckCl(cl_.clEnqueueReadBuffer(queue_, b.get(), CL_TRUE, 0, bytes, host_.data(), 0, nullptr,
                                    nullptr),
            "clEnqueueReadBuffer");
    return UsSince(t0);
  }
  // `bytes` into and out of the device as a zero-copy partition moves its inputs and outputs
  // (runtime/partition_invoke.cc): the host-pointer buffer mapped for writing and unmapped, then
  // mapped for reading after the device wrote it (a copy through `big` and back). us for the pair.
  double MappedRoundTrip(size_t bytes) {
    Finish();
    const auto t0 = Clock::now();
    const cl_mem m = mapped_.get();
    cl_int err = CL_SUCCESS;
    void* p = cl_.clEnqueueMapBuffer(queue_, m, CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION, 0, bytes,
                                     0, nullptr, nullptr, &err);
    CheckCl(err, "clEnqueueMapBuffer");
    CheckCl(cl_.clEnqueueUnmapMemObject(queue_, m, p, 0, nullptr, nullptr),
            "clEnqueueUnmapMemObject");
    CheckCl(cl_.clEnqueueCopyBuffer(queue_, m, big.get(), 0, 0, bytes, 0, nullptr, nullptr),
            "clEnqueueCopyBuffer");
    CheckCl(cl_.clEnqueueCopyBuffer(queue_, big.get(), m, 0, 0, bytes, 0, nullptr, nullptr),
            "clEnqueueCopyBuffer");
    p = cl_.clEnqueueMapBuffer(queue_, m, CL_TRUE, CL_MAP_READ, 0, bytes, 0, nullptr, nullptr,
                               &err);
    CheckCl(err, "clEnqueueMapBuffer");
    CheckCl(cl_.clEnqueueUnmapMemObject(queue_, m, p, 0, nullptr, nullptr),
            "clEnqueueUnmapMemObject");
    Finish();
    return UsSince(t0);
  }
  // A wait on an idle queue, then a one-float blocking read (us).
  double Sync() {
    Finish();
    const auto t0 = Clock::now();
    Finish();
    CheckCl(cl_.clEnqueueReadBuffer(queue_, small_a.get(), CL_TRUE, 0, sizeof(float), host_.data(),
                                    0, nullptr, nullptr),
            "clEnqueueReadBuffer");
    return UsSince(t0);
  }
  double RunFma(int iters) {
    CheckCl(cl_.clSetKernelArg(fma_.get(), 1, sizeof iters, &iters), "clSetKernelArg");
    return Batch(1, [&] {
      CheckCl(cl_.clEnqueueNDRangeKernel(queue_, fma_.get(), 1, nullptr, &fma_items, nullptr, 0,
                                         nullptr, nullptr),
              "clEnqueueNDRangeKernel");
    });
  }

  size_t large = 0, fma_items = 0;
  Buffer small_a, big;

 private:
  const ClApi& cl_;
  cl_command_queue queue_;
  std::shared_ptr<Program> program_;
  Kernel small_[kSmallKernels], fma_;
  std::vector<unsigned char> host_, mapped_host_;  // before mapped_, which outlives none of it
  Buffer small_b_, layer_a_, layer_b_, work_, mapped_;
  int launches_ = 0;
};

}  // namespace

DeviceCosts MeasureDeviceCosts(Environment& env, cl_command_queue queue) {
  CalibrationRig r(env, queue);
  auto small = [&](int n) { return r.Batch(n, [&] { r.LaunchSmall(); }); };
  auto copies = [&](int n) { return r.Batch(n, [&] { r.CopySmall(); }); };
  // First uses pay for lazy allocation and kernel upload; not what an invoke pays. The longer
  // arithmetic run also brings an idle GPU up from its lowest clocks, where the delegate's
  // kernels will not run.
  r.RunFma(4096);
  small(CalibrationRig::kSmallKernels);  // each kernel once
  copies(1);
  r.RoundTrip(r.big, r.large);
  r.RoundTrip(r.small_a, CalibrationRig::kSmall);
  r.MappedRoundTrip(r.large);  // the driver pins the host memory here, once
  r.RunFma(1);

  DeviceCosts c;
  // Slopes over the command count leave out the first command's start and the final wait.
  // Back to back, a small kernel's time includes the gap before the next one.
  c.min_kernel_us = (Best([&] { return small(64); }) - Best([&] { return small(8); })) / 56;
  c.launch_gap_us = 0;
  c.copy_us = (Best([&] { return copies(32); }) - Best([&] { return copies(8); })) / 24;
  c.sync_us = Best([&] { return r.Sync(); });
  const double small_us = Best([&] { return r.RoundTrip(r.small_a, CalibrationRig::kSmall); });
  const double large_us = Best([&] { return r.RoundTrip(r.big, r.large); });
  c.gbps = 2.0 * double(r.large - CalibrationRig::kSmall) / ((large_us - small_us) * 1e3);
  const double mapped_small_us = Best([&] { return r.MappedRoundTrip(CalibrationRig::kSmall); });
  const double mapped_large_us = Best([&] { return r.MappedRoundTrip(r.large); });
  c.mapped_gbps =
      2.0 * double(r.large - CalibrationRig::kSmall) / ((mapped_large_us - mapped_small_us) * 1e3);
  // Sized so the longer run is well above a launch's cost on a GPU; the slope between two
  // lengths leaves out the launch and the wait.
  constexpr int kIters = 1024;
  const double fma_us =
      Best([&] { return r.RunFma(2 * kIters); }) - Best([&] { return r.RunFma(kIters); });
  c.gflops = 8.0 * kIters * double(r.fma_items) / (fma_us * 1e3);
  c.source = "measured";
  if (!Plausible(c)) {
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "measured implausible figures (%g us/kernel, %g us/copy, %g us sync, %g GB/s, "
                  "%g GB/s mapped, %g GFLOP/s)",
                  c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.mapped_gbps, c.gflops);
    throw Error(buf);
  }
  return c;
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
    CalibrationRig r(env, queue);
    auto small = [&](int n) { return r.Batch(n, [&] { r.LaunchSmall(); }); };
    // Both lengths take turns, so that both meet the same levels; the fastest of each.
    double b64 = std::numeric_limits<double>::max(), b8 = b64;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRefineMaxTries && (i < 3 || UsSince(t0) < kRefineWindowMs * 1e3); ++i) {
      b64 = std::min(b64, small(64));
      b8 = std::min(b8, small(8));
    }
    const double lower = (b64 - b8) / 56;
    if (!(lower > 0 && lower < 1e5)) throw Error("an implausible figure");
    out.min_kernel_us = lower + kLowerLevelUs;
    out.refined = true;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "calibration refined for a close decision: %.2f us/kernel (was %.2f), in %.1f ms",
                  out.min_kernel_us, c.min_kernel_us, UsSince(t0) / 1e3);
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
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "calibration: %.2f us/kernel, %.2f us/copy, %.1f us sync, %.2f GB/s, "
                    "%.2f GB/s mapped, %.1f GFLOP/s, measured in %.1f ms on ",
                    c.min_kernel_us, c.copy_us, c.sync_us, c.gbps, c.mapped_gbps, c.gflops,
                    UsSince(t0) / 1e3);
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
