// The delegate's counters and reports (delegate/delegate.h): what stats(), memory(), captured()
// and abi() return, filled by its partitions through PartitionHost, under report_mutex_.
#include <algorithm>
#include <string>
#include <vector>

#include "cl/binary_cache.h"
#include "delegate/delegate.h"

namespace clgpu {

AbiObservation DelegateCore::abi() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  return abi_;
}
DelegateStats DelegateCore::stats() const {
  DelegateStats s;
  {
    std::lock_guard<std::mutex> l(report_mutex_);
    s = stats_;
  }
  s.driver_setup_us = driver_setup_us_;
  s.buffers_created = env_->buffers_created();
  const auto& programs = env_->programs();
  s.programs_built = programs.builds();
  s.program_cache_hits = programs.hits();
  s.program_binary_loads = programs.binary_loads();
  s.program_build_us = programs.build_us();
  s.program_cubins_stored = programs.cubins_stored();
  s.calibration = device_costs_;
  if (disk_) {
    s.disk_cache = true;
    s.disk_cache_hits = disk_->hits.load();
    s.disk_cache_misses = disk_->misses.load();
    s.disk_cache_rejected = disk_->rejected.load();
    s.disk_cache_driver_rejected = disk_->driver_rejected.load();
    s.disk_cache_stored = disk_->stored.load();
  }
  return s;
}
void DelegateCore::CountKernelCreated() {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.kernels_created;
}
void DelegateCore::Capture(int tensor, CapturedTensor c) {
  std::lock_guard<std::mutex> l(report_mutex_);
  captured_[tensor] = std::move(c);
}
std::map<int, CapturedTensor> DelegateCore::captured() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  return captured_;
}
void DelegateCore::SetMemoryReport(int partition, const MemoryReport& r) {
  std::lock_guard<std::mutex> l(report_mutex_);
  memory_[partition] = r;
  memory_[partition].partition = partition;
}
void DelegateCore::DropMemoryReport(int partition) {
  std::lock_guard<std::mutex> l(report_mutex_);
  memory_.erase(partition);
}
MemorySummary DelegateCore::memory() const {
  MemorySummary sum;
  std::lock_guard<std::mutex> l(report_mutex_);
  for (const auto& [partition, m] : memory_) {
    sum.partitions.push_back(m);
    sum.naive_bytes += m.naive_bytes;
    sum.lower_bound_bytes += m.lower_bound_bytes;
    sum.allocated_bytes += m.allocated_bytes;
    sum.weight_bytes += m.weight_bytes;
    sum.staging_bytes += m.staging_bytes;
    sum.scratch_bytes += m.scratch_bytes;
    sum.host_wrapped_bytes += m.host_wrapped_bytes;
    sum.buffers += m.buffers;
    sum.split_tensors += m.split_tensors;
    sum.split_pieces += m.split_pieces;
    sum.split_bytes += m.split_bytes;
    sum.chunked_ops += m.chunked_ops;
    sum.chunks += m.chunks;
    sum.chunk_staging_bytes += m.chunk_staging_bytes;
  }
  return sum;
}
void DelegateCore::CountInvoke(const InvokeCounts& c) {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.invokes;
  InvokeCounts& t = stats_.transfers;
  t.host_syncs += c.host_syncs;
  t.uploads += c.uploads;
  t.downloads += c.downloads;
  t.upload_bytes += c.upload_bytes;
  t.download_bytes += c.download_bytes;
  t.enqueue_ns += c.enqueue_ns;
  t.wait_ns += c.wait_ns;
  t.fewer_launch_invokes += c.fewer_launch_invokes;
  t.form_pairs += c.form_pairs;
  t.form_pair_log_ratio += c.form_pair_log_ratio;
}
void DelegateCore::CountFp16Overflow(const std::vector<int>& nodes, bool fell_back) {
  std::lock_guard<std::mutex> l(report_mutex_);
  std::vector<int>& to = fell_back ? stats_.fp32_fallback_ops : stats_.fp16_saturated_ops;
  // Sorted, once each: precision auto adds a partition's ops a few at a time.
  to.insert(to.end(), nodes.begin(), nodes.end());
  std::sort(to.begin(), to.end());
  to.erase(std::unique(to.begin(), to.end()), to.end());
}
void DelegateCore::CountPlan() {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.plans;
}
void DelegateCore::CountBind() {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.binds;
}
void DelegateCore::WarmupStarted() {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.warmups;
  ++stats_.warming;
}
void DelegateCore::WarmupEnded() {
  std::lock_guard<std::mutex> l(report_mutex_);
  if (--stats_.warming == 0) warm_cv_.notify_all();
}
void DelegateCore::CountCpuInvoke() {
  std::lock_guard<std::mutex> l(report_mutex_);
  ++stats_.cpu_invokes;
}
bool DelegateCore::WaitReady(double timeout_s) {
  std::unique_lock<std::mutex> l(report_mutex_);
  auto ready = [&] { return stats_.warming == 0; };
  if (timeout_s < 0) {
    warm_cv_.wait(l, ready);
    return true;
  }
  return warm_cv_.wait_for(l, std::chrono::duration<double>(timeout_s), ready);
}

}  // namespace clgpu
