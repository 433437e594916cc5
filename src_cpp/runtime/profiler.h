// Per-kernel and per-transfer timings from OpenCL events, aggregated over
// invokes, plus a bounded trace of individual events for Chrome/Perfetto.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cl/objects.h"

namespace clgpu {

class Environment;

struct KernelRecord {
  int partition = 0;
  int node = -1;  // TFLite node index
  std::string op, algorithm, kernel, shape;
  double flops = 0;  // per run
  double bytes = 0;  // per run: activations read + written + weights
  int64_t count = 0;
  double total_ns = 0;  // event times less the per-event overhead (Profiler::event_overhead_ns)
  double raw_ns = 0;    // event times as the driver reports them
};

struct PartitionRecord {
  int partition = 0;
  int64_t invokes = 0;
  double upload_ns = 0, compute_ns = 0, download_ns = 0;  // device time from events
  double compute_raw_ns = 0;  // compute_ns before the per-event overhead came off
  double wall_ns = 0;         // host time of the whole invoke
  // Where the rest of the wall time goes: host time until the last command was
  // enqueued, and the device's span from the first command's start to the last one's end
  // (span - upload - compute - download = the device idle between commands).
  double enqueue_ns = 0, span_ns = 0;
  int64_t upload_bytes = 0, download_bytes = 0;
  int kernels_per_invoke = 0;
};

struct TraceEvent {
  std::string name, category;  // kernel name / "upload" / "download"; op type or "transfer"
  int partition = 0, node = -1;
  uint64_t start_ns = 0, end_ns = 0;  // device clock
};

// What profile() returns: the records so far, copied.
struct ProfileSnapshot {
  bool enabled = false;  // the delegate's option `profiling`
  double event_overhead_ns = 0;
  std::vector<KernelRecord> kernels;
  std::vector<PartitionRecord> partitions;
  std::vector<TraceEvent> trace;
};

class Profiler {
 public:
  static constexpr size_t kMaxTraceEvents = 50000;

  void AddKernel(const KernelRecord& r, uint64_t start_ns, uint64_t end_ns);
  void AddTransfer(int partition, bool upload, int64_t bytes, uint64_t start_ns, uint64_t end_ns);
  void EndInvoke(int partition, double wall_ns, double enqueue_ns, double span_ns, int kernels);
  void Reset();
  // What one event adds to the kernel time it reports on this device; every kernel
  // record is that much shorter (not below 0). Transfers keep their event times.
  void set_event_overhead_ns(double ns) { event_overhead_ns_ = ns; }
  double event_overhead_ns() const { return event_overhead_ns_; }

  std::vector<KernelRecord> kernels() const;
  std::vector<PartitionRecord> partitions() const;
  std::vector<TraceEvent> trace() const;
  ProfileSnapshot Snapshot(bool enabled) const {
    return {enabled, event_overhead_ns_, kernels(), partitions(), trace()};
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<int, int, std::string>, KernelRecord> kernels_;
  std::map<int, PartitionRecord> partitions_;
  std::deque<TraceEvent> trace_;
  double event_overhead_ns_ = 0;
};

// What an event adds to the kernel time it reports on env's device, measured on the
// profiling `queue` by the first profiling delegate of the process and kept (a few ms).
// On NVIDIA GPUs events add enough per kernel to be a sizeable part of a many-kernel invoke
// (docs/performance.md). The true time is the slope of
// wall time over back-to-back runs of a kernel long enough to keep the device busy (no
// events); the event time is the median over timed runs; the smallest of three such
// estimates is kept, so host noise cannot inflate it. $CLGPU_EVENT_OVERHEAD_US sets the
// value instead (0 turns the correction off). Never throws: a failure gives 0.
double EventOverheadNs(Environment& env, cl_command_queue queue);

}  // namespace clgpu
