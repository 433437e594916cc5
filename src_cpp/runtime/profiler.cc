#include "runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>

#include "cl/environment.h"
#include "cl/errors.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace clgpu {

void Profiler::AddKernel(const KernelRecord& r, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard<std::mutex> l(mutex_);
  const double raw = double(end_ns - start_ns);
  const double net = std::max(raw - event_overhead_ns_, 0.0);
  KernelRecord& k = kernels_[{r.partition, r.node, r.kernel}];
  if (k.count == 0) k = r;
  k.count += 1;
  k.total_ns += net;
  k.raw_ns += raw;
  PartitionRecord& p = partitions_[r.partition];
  p.partition = r.partition;
  p.compute_ns += net;
  p.compute_raw_ns += raw;
  if (trace_.size() >= kMaxTraceEvents) trace_.pop_front();
  trace_.push_back({r.kernel, r.op, r.partition, r.node, start_ns, end_ns});
}

void Profiler::AddTransfer(int partition, bool upload, int64_t bytes, uint64_t start_ns,
                           uint64_t end_ns) {
  std::lock_guard<std::mutex> l(mutex_);
  PartitionRecord& p = partitions_[partition];
  p.partition = partition;
  (upload ? p.upload_ns : p.download_ns) += double(end_ns - start_ns);
  (upload ? p.upload_bytes : p.download_bytes) += bytes;
  if (trace_.size() >= kMaxTraceEvents) trace_.pop_front();
  trace_.push_back({upload ? "upload" : "download", "transfer", partition, -1, start_ns, end_ns});
}

void Profiler::EndInvoke(int partition, double wall_ns, double enqueue_ns, double span_ns,
                         int kernels) {
  std::lock_guard<std::mutex> l(mutex_);
  PartitionRecord& p = partitions_[partition];
  p.partition = partition;
  p.invokes += 1;
  p.wall_ns += wall_ns;
  p.enqueue_ns += enqueue_ns;
  p.span_ns += span_ns;
  p.kernels_per_invoke = kernels;
}

void Profiler::Reset() {
  std::lock_guard<std::mutex> l(mutex_);
  kernels_.clear();
  partitions_.clear();
  trace_.clear();
}

std::vector<KernelRecord> Profiler::kernels() const {
  std::lock_guard<std::mutex> l(mutex_);
  std::vector<KernelRecord> out;
  for (const auto& [key, r] : kernels_) out.push_back(r);
  return out;
}

std::vector<PartitionRecord> Profiler::partitions() const {
  std::lock_guard<std::mutex> l(mutex_);
  std::vector<PartitionRecord> out;
  for (const auto& [key, r] : partitions_) out.push_back(r);
  return out;
}

std::vector<TraceEvent> Profiler::trace() const {
  std::lock_guard<std::mutex> l(mutex_);
  return {trace_.begin(), trace_.end()};
}

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The smallest of three estimates; throws on an OpenCL error.
double Measure(Environment& env, cl_command_queue queue) {
  const auto& cl = Cl();
  Kernel kernel = CreateKernel(*env.programs().Get("event_calibration", ""), "event_calibration");
  const size_t global = size_t(std::max(env.device().compute_units, 1)) * 256;
  Buffer buf = env.CreateBuffer(global * sizeof(float));
  const float zero = 0.0f;
  CheckCl(cl.clEnqueueFillBuffer(queue, buf.get(), &zero, sizeof zero, 0, global * sizeof zero, 0,
                                 nullptr, nullptr),
          "clEnqueueFillBuffer");
  cl_mem mem = buf.get();
  CheckCl(cl.clSetKernelArg(kernel.get(), 0, sizeof mem, &mem), "clSetKernelArg");
  // Wall ns of n back-to-back runs; with `events`, each run's event time too.
  auto run = [&](int iters, int n, std::vector<double>* events) {
    CheckCl(cl.clSetKernelArg(kernel.get(), 1, sizeof iters, &iters), "clSetKernelArg");
    CheckCl(cl.clFinish(queue), "clFinish");
    std::vector<Event> evs(events ? n : 0);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      cl_event e = nullptr;
      CheckCl(cl.clEnqueueNDRangeKernel(queue, kernel.get(), 1, nullptr, &global, nullptr, 0,
                                        nullptr, events ? &e : nullptr),
              "clEnqueueNDRangeKernel");
      if (events) evs[i] = Event(e);
    }
    CheckCl(cl.clFinish(queue), "clFinish");
    const double wall =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; events && i < evs.size(); ++i) {
      const auto [a, b] = EventTimes(evs[i].get());
      events->push_back(b >= a ? double(b - a) : 0.0);
    }
    return wall;
  };
  // Long enough that the device, not the host's enqueue (~5 us per kernel on NVIDIA,
  // ~13 with an event), sets the pace of back-to-back runs.
  const double target_ns = env.device().profile.event_target_ns;
  int iters = 16;
  for (int grow = 0; grow < 24; ++grow) {
    std::vector<double> ev;
    run(iters, 3, &ev);
    const double t = Median(ev);
    if (t >= target_ns || iters >= (1 << 24)) break;
    const double scale = t > 0 ? 1.2 * target_ns / t : 16.0;
    iters = int(std::min<double>(1 << 24, iters * std::clamp(scale, 2.0, 16.0)));
  }
  double overhead = std::numeric_limits<double>::max();
  for (int round = 0; round < 3; ++round) {
    // The slope of wall time over the run count leaves out the first launch and the sync.
    double few = std::numeric_limits<double>::max(), many = few;
    for (int rep = 0; rep < 3; ++rep) {
      few = std::min(few, run(iters, 4, nullptr));
      many = std::min(many, run(iters, 16, nullptr));
    }
    const double per_kernel = (many - few) / 12.0;
    std::vector<double> ev;
    run(iters, 16, &ev);
    // Bounded: a loaded host must not make it more than half of a kernel's time.
    overhead = std::min(overhead,
                        std::clamp(Median(ev) - per_kernel, 0.0, 0.5 * std::max(per_kernel, 0.0)));
  }
  return overhead;
}

}  // namespace

double EventOverheadNs(Environment& env, cl_command_queue queue) {
  const std::optional<std::string> value = GetEnv("CLGPU_EVENT_OVERHEAD_US");
  if (const char* v = value ? value->c_str() : nullptr; v && *v) {
    char* end = nullptr;
    const double us = std::strtod(v, &end);
    if (end != v && *end == '\0' && us >= 0) return us * 1e3;
    Log(LogLevel::kWarning, std::string("CLGPU_EVENT_OVERHEAD_US=") + v +
                                " is not a number >= 0; measuring the event overhead instead");
  }
  static std::mutex mutex;
  static std::map<int, double> measured;  // by device index, stable within a process
  std::lock_guard<std::mutex> l(mutex);
  if (auto it = measured.find(env.device().index); it != measured.end()) return it->second;
  double overhead = 0.0;
  try {
    overhead = Measure(env, queue);
    Log(LogLevel::kInfo, "profiling: an event adds " + std::to_string(overhead / 1e3) +
                             " us to the kernel time it reports on this device");
  } catch (const std::exception& e) {
    overhead = 0.0;
    Log(LogLevel::kWarning,
        std::string("profiling: could not measure what an event adds to a kernel's time; "
                    "kernel times are the events' own: ") +
            e.what());
  }
  measured[env.device().index] = overhead;
  return overhead;
}

}  // namespace clgpu
