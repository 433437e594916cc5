// The delegate object: decides which nodes to claim (Prepare) and owns the
// backend state (device environment, queue) that its partition kernels share.
//
// Lifetime: the TfLiteDelegate struct lives inside DelegateCore. Destroy() drops
// the owner's reference; kernels hold their own, so destroy may run before the
// kernels are freed (interpreter shutdown with module-level globals) safely.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cl/environment.h"
#include "delegate/calibration.h"
#include "delegate/cost_model.h"
#include "delegate/options.h"
#include "graph/graph.h"
#include "runtime/partition_host.h"
#include "runtime/profiler.h"
#include "tflite/abi.h"

namespace clgpu {

// delegate/claim.h, which includes this header
struct PartitionPreview;
struct ClaimPlan;

struct OpHandler;

// Why each node was or was not delegated at the last Prepare of its subgraph.
struct NodeDecision {
  int subgraph = 0;  // in the order TFLite prepares them: the primary one first
  int node = -1;
  int32_t op = -1;
  std::string op_name;  // ours, or "" for ops we do not know (Python maps the code)
  bool claimed = false;
  std::string reason;  // empty when claimed
  std::string note;    // how a claimed node runs, when notable (in chunks)
};

// What the delegate observed of the host runtime's ABI (layout test).
struct AbiObservation {
  size_t tensors_size = 0;
  long node_to_registration = 0;  // bytes from a node to its registration
  long node_stride = 0;           // bytes between consecutive node records
  int nodes_seen = 0;
  std::vector<std::string> params_read;  // "node 3 CONV_2D padding=1 stride=1,1 ..."
};

// The delegate's counters since it was created: what stats() returns, bound field by field as
// the Python record (python/register_records.cc, where each field's meaning is written).
struct DelegateStats {
  int prepares = 0;
  int kernels_created = 0;
  int invokes = 0;
  int plans = 0;
  int binds = 0;
  InvokeCounts transfers;
  int warmups = 0, warming = 0, cpu_invokes = 0;
  std::vector<int> fp32_fallback_ops, fp16_saturated_ops;
  // Filled when stats() takes the snapshot: the device environment's and the disk cache's
  // counters, and the cost model's device figures.
  int64_t driver_setup_us = 0;
  int64_t buffers_created = 0;
  int64_t programs_built = 0, program_cache_hits = 0, program_binary_loads = 0;
  int64_t program_build_us = 0, program_cubins_stored = 0;
  DeviceCosts calibration;
  bool disk_cache = false;
  int64_t disk_cache_hits = 0, disk_cache_misses = 0, disk_cache_rejected = 0;
  int64_t disk_cache_driver_rejected = 0, disk_cache_stored = 0;
};

// memory(): each live partition's report and their sums (the base's fields; partition -1).
struct MemorySummary : MemoryReport {
  std::vector<MemoryReport> partitions;
};

class DelegateCore final : public PartitionHost {
 public:
  // Throws NoDeviceError / OptionError / ClError.
  static TfLiteDelegate* Create(const Options& options);
  static void Destroy(TfLiteDelegate* delegate);  // NULL-safe
  static DelegateCore* From(TfLiteDelegate* d) { return static_cast<DelegateCore*>(d->data_); }

  explicit DelegateCore(const Options& options);
  TfLiteDelegate* tflite_delegate() { return &tfl_; }
  // A reference for a partition kernel (valid until the kernel is freed).
  std::shared_ptr<DelegateCore> shared() const { return self_; }
  const Options& options() const { return options_; }
  Environment& env() override { return *env_; }
  int64_t driver_setup_us() const { return driver_setup_us_; }
  // The cost model's device figures (delegate/calibration.h), measured at construction and
  // refined at most once, for a close decision (RefineDeviceCosts).
  const DeviceCosts& device_costs() const { return device_costs_; }
  // The kernel figure measured again over the driver's lower launch level (RefinedDeviceCosts);
  // Prepare calls it for a partition too close to call, tests through the Python binding.
  void RefineDeviceCosts();
  cl_command_queue queue() const override { return queue_.get(); }
  std::mutex& queue_mutex() { return queue_mutex_; }
  // fp16 storage: activations and weights are half on the device.
  bool half_storage() const override { return half_storage_; }
  std::string storage_defines() const { return half_storage_ ? "-DSTORAGE_HALF" : ""; }
  size_t storage_bytes() const override { return half_storage_ ? 2 : 4; }
  const RuntimeSettings& settings() const override { return settings_; }
  OpContext MakeOpContext() const override;
  BinaryCache* disk_cache() const { return disk_.get(); }
  // The largest single buffer: the device's limit, or the lower max_alloc_bytes, and
  // never more than 2^31 - 1 elements (our kernels index buffers with 32-bit ints;
  // larger tensors are split like those over the device's limit).
  size_t max_alloc_bytes() const {
    const size_t dev =
        std::min<size_t>(env_->device().max_alloc_bytes, size_t(INT32_MAX) * storage_bytes());
    return options_.max_alloc_bytes ? std::min<size_t>(dev, options_.max_alloc_bytes) : dev;
  }
  // "auto": on where the device shares the host's memory, and on NVIDIA GPUs too: there
  // a host-pointer buffer is pinned once, so each transfer is one DMA instead of the
  // driver's staging copy of pageable memory, which made every zoo model's invoke faster
  // on the H200 (docs/performance.md).
  bool zero_copy() const override {
    if (options_.zero_copy != ZeroCopy::kAuto) return options_.zero_copy == ZeroCopy::kOn;
    return env_->device().profile.zero_copy_io;
  }

  TfLiteStatus Prepare(TfLiteContext* ctx);
  // Prepare's steps (delegate.cc): one node's claim decision; whether the device builds a first
  // program (else every claim is withdrawn, with the reason).
  NodeDecision DecideNode(const GraphView& graph, const NodeInfo& n, const std::string& whole,
                          const std::map<int, std::string>& sparse_refused,
                          AbiObservation* abi) const;
  bool DeviceBuilds(TfLiteContext* ctx, ClaimPlan* claim);
  // "" or why a node cannot run within the device's largest allocation, even with
  // its large tensors in pieces and its work in chunks (runtime/split.h).
  // *note says when it will (tensors in pieces, work in chunks).
  std::string CheckAllocationLimit(const GraphView& g, const NodeInfo& n, const OpHandler& h,
                                   std::string* note) const;

  // Snapshot of the last Prepare of each subgraph, in subgraph order (thread-safe copies).
  std::vector<NodeDecision> decisions() const;
  std::vector<std::vector<int>> partitions() const;
  std::vector<int> partition_subgraphs() const;  // the subgraph of each of partitions()
  AbiObservation abi() const;
  DelegateStats stats() const;
  void CountKernelCreated() override;
  int NextPartitionId() override { return next_partition_id_++; }
  TensorRoom& tensor_room() override { return tensor_room_; }
  void Capture(int tensor, CapturedTensor c) override;
  std::map<int, CapturedTensor> captured() const;
  void SetMemoryReport(int partition, const MemoryReport& r) override;
  void DropMemoryReport(int partition) override;
  MemorySummary memory() const;
  Profiler& profiler() override { return profiler_; }
  void CountInvoke(const InvokeCounts& counts) override;
  void CountPlan() override;
  void CountBind() override;
  void WarmupStarted() override;
  void WarmupEnded() override;
  void CountCpuInvoke() override;
  void CountFp16Overflow(const std::vector<int>& nodes, bool fell_back) override;
  // Until no partition builds in the background (cpu_warmup) or `timeout_s` (< 0: no limit)
  // has passed; whether none does.
  bool WaitReady(double timeout_s);

  // Folded DEQUANTIZE outputs -> sources of the graph being prepared; read by
  // kernel init, which runs inside Prepare on the same thread.
  const GraphView* current_graph() const override { return current_graph_; }

 private:
  // The cost model's estimate of a partition to claim; a close call refines the figures first.
  PartitionEstimate EstimateClaim(const GraphView& graph, const std::vector<NodeInfo>& ops,
                                  const PartitionPreview& p, const CpuCosts& cpu);

  Options options_;
  RuntimeSettings settings_;
  bool half_storage_ = false;
  std::unique_ptr<BinaryCache> disk_;
  std::shared_ptr<Environment> env_;
  int64_t driver_setup_us_ = 0;
  DeviceCosts device_costs_;
  Queue queue_;
  std::mutex queue_mutex_;
  mutable std::mutex report_mutex_;
  std::condition_variable warm_cv_;  // with report_mutex_: stats_.warming reached 0
  // Per subgraph index: a model with control flow or an init subgraph (CALL_ONCE) has several;
  // one the delegate was not applied to (yet) is empty.
  struct SubgraphClaims {
    std::vector<NodeDecision> decisions;
    std::vector<std::vector<int>> partitions;
  };
  // Records one subgraph's claims (report_mutex_ held).
  void RecordClaims(TfLiteContext* ctx, std::vector<NodeDecision> decisions,
                    std::vector<std::vector<int>> partitions);
  std::vector<SubgraphClaims> subgraphs_;
  AbiObservation abi_;
  DelegateStats stats_;
  const GraphView* current_graph_ = nullptr;
  Profiler profiler_;
  std::map<int, MemoryReport> memory_;
  std::map<int, CapturedTensor> captured_;
  std::atomic<int> next_partition_id_{0};
  TensorRoom tensor_room_;
  TfLiteDelegate tfl_{};
  std::shared_ptr<DelegateCore> self_;  // the delegate struct's own reference
};

// The registration of our partition kernels (delegate/kernel.cc).
TfLiteRegistration PartitionKernelRegistration();

}  // namespace clgpu
