// The delegate's counters and reports (delegate/delegate.h): what stats(), memory(), captured()
// and abi() return, filled by its partitions through PartitionHost, under report_mutex_.
#include <algorithm>
#include <string>
#include <vector>

#include "delegate/delegate.h"

namespace clgpu {

AbiObservation DelegateCore::abi() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  return abi_;
}
DelegateStats DelegateCore::stats() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  return stats_;
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
}
void DelegateCore::DropMemoryReport(int partition) {
  std::lock_guard<std::mutex> l(report_mutex_);
  memory_.erase(partition);
}
std::map<int, MemoryReport> DelegateCore::memory() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  return memory_;
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
}
void DelegateCore::CountFp16Overflow(const std::vector<int>& nodes, bool fell_back) {
  std::lock_guard<std::mutex> l(report_mutex_);
  std::vector<int>& to = fell_back ? stats_.fp32_fallback_nodes : stats_.fp16_saturated_nodes;
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
