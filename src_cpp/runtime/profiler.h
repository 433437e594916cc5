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

namespace clgpu {

struct KernelRecord {
  int partition = 0;
  int node = -1;  // TFLite node index
  std::string op, algorithm, kernel, shape;
  double flops = 0;  // per run
  double bytes = 0;  // per run: activations read + written + weights
  int64_t count = 0;
  double total_ns = 0;
};

struct PartitionRecord {
  int partition = 0;
  int64_t invokes = 0;
  double upload_ns = 0, compute_ns = 0, download_ns = 0;  // device time from events
  double wall_ns = 0;                                     // host time of the whole invoke
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

class Profiler {
 public:
  static constexpr size_t kMaxTraceEvents = 50000;

  void AddKernel(const KernelRecord& r, uint64_t start_ns, uint64_t end_ns);
  void AddTransfer(int partition, bool upload, int64_t bytes, uint64_t start_ns, uint64_t end_ns);
  void EndInvoke(int partition, double wall_ns, double enqueue_ns, double span_ns, int kernels);
  void Reset();

  std::vector<KernelRecord> kernels() const;
  std::vector<PartitionRecord> partitions() const;
  std::vector<TraceEvent> trace() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<int, int, std::string>, KernelRecord> kernels_;
  std::map<int, PartitionRecord> partitions_;
  std::deque<TraceEvent> trace_;
};

}  // namespace clgpu
