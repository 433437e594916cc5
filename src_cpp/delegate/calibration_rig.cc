// The calibration's measurements (delegate/calibration.h): small kernels in turn, a buffer
// copy, host round trips (pageable and through a mapped host-pointer buffer) and an arithmetic
// kernel, each timed from the host. Keeping, reading and refining the figures is calibration.cc's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cl/errors.h"
#include "common/error.h"
#include "delegate/calibration.h"

namespace clgpu {
namespace {

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
    // A device that refuses the host-pointer buffer keeps the pageable figure (MappedGbps).
    mapped_host_.assign(large, 1);
    cl_int err = CL_SUCCESS;
    cl_mem m = cl_.clCreateBuffer(env.context(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, large,
                                  mapped_host_.data(), &err);
    if (err == CL_SUCCESS) mapped_ = Buffer(m, large);
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
  // Host <-> device GB/s through the host-pointer buffer, from the slope between a small and a
  // large round trip; 0 (the pageable figure stands for it) where the device refused the buffer,
  // a map failed or the slope came out negative, so that the other figures are still measured.
  double MappedGbps() {
    if (!mapped_) return 0;
    try {
      MappedRoundTrip(large);  // the driver pins the host memory here, once
      const double small_us = Best([&] { return MappedRoundTrip(kSmall); });
      const double large_us = Best([&] { return MappedRoundTrip(large); });
      const double gbps = 2.0 * double(large - kSmall) / ((large_us - small_us) * 1e3);
      return std::isfinite(gbps) && gbps > 0 ? gbps : 0;
    } catch (const ClError&) {
      Finish();
      return 0;
    }
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
  c.mapped_gbps = r.MappedGbps();
  // Sized so the longer run is well above a launch's cost on a GPU; the slope between two
  // lengths leaves out the launch and the wait.
  constexpr int kIters = 1024;
  const double fma_us =
      Best([&] { return r.RunFma(2 * kIters); }) - Best([&] { return r.RunFma(kIters); });
  c.gflops = 8.0 * kIters * double(r.fma_items) / (fma_us * 1e3);
  c.source = "measured";
  return c;
}

double LowerLaunchLevelUs(Environment& env, cl_command_queue queue, double window_ms,
                          int max_tries) {
  CalibrationRig r(env, queue);
  auto small = [&](int n) { return r.Batch(n, [&] { r.LaunchSmall(); }); };
  // Both lengths take turns, so that both meet the same levels; the fastest of each.
  double b64 = std::numeric_limits<double>::max(), b8 = b64;
  const auto t0 = Clock::now();
  for (int i = 0; i < max_tries && (i < 3 || UsSince(t0) < window_ms * 1e3); ++i) {
    b64 = std::min(b64, small(64));
    b8 = std::min(b8, small(8));
  }
  return (b64 - b8) / 56;
}

}  // namespace clgpu
