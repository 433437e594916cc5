#include "runtime/profiler.h"

namespace clgpu {

void Profiler::AddKernel(const KernelRecord& r, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard<std::mutex> l(mutex_);
  KernelRecord& k = kernels_[{r.partition, r.node, r.kernel}];
  if (k.count == 0) k = r;
  k.count += 1;
  k.total_ns += double(end_ns - start_ns);
  partitions_[r.partition].partition = r.partition;
  partitions_[r.partition].compute_ns += double(end_ns - start_ns);
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

}  // namespace clgpu
