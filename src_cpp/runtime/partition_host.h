// What a partition needs from the delegate that owns it: the device and its queue, the
// settings it runs with, and where it reports. The delegate (delegate/delegate.h)
// implements it, so the runtime depends on this interface and not on the delegate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cl/environment.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "runtime/profiler.h"
#include "runtime/tensor_room.h"

namespace clgpu {

// Device memory of one partition (bytes).
struct MemoryReport {
  int partition = -1;            // the delegate's partition id (set by SetMemoryReport)
  size_t naive_bytes = 0;        // every activation its own buffer
  size_t lower_bound_bytes = 0;  // max over time of live activation bytes
  size_t allocated_bytes = 0;    // activation buffers actually allocated
  size_t weight_bytes = 0;       // weights and other constants
  size_t staging_bytes = 0;      // float32 transfer copies (fp16 storage)
  size_t scratch_bytes = 0;      // op scratch (Winograd transformed tiles)
  // Zero-copy: partition inputs/outputs used in place in TFLite's host memory, outside
  // the figures above (a discrete GPU's driver may still mirror them on the device).
  size_t host_wrapped_bytes = 0;
  int buffers = 0;
  // "sub-buffers" / "svm": views into one arena; "shared": shared whole buffers;
  // "own": a buffer per tensor (sharing would exceed the largest allocation).
  std::string arena;
  // Larger than the largest allocation (runtime/split.h): activations kept in
  // pieces (own buffers, not in the figures above), ops run in chunks, and the
  // staging buffers the chunks copy their boxes through.
  int split_tensors = 0, split_pieces = 0;
  size_t split_bytes = 0;
  int chunked_ops = 0, chunks = 0;
  size_t chunk_staging_bytes = 0;
};

// An activation read back for check_precision (capture_tensors).
struct CapturedTensor {
  Shape shape;
  std::vector<float> data;
};

// What one invoke did beyond its kernels: host waits and boundary transfers.
struct InvokeCounts {
  int64_t host_syncs = 0;
  int64_t uploads = 0, downloads = 0;
  int64_t upload_bytes = 0, download_bytes = 0;
  // Host time of the invoke until its last command was enqueued, then waiting for the device
  // (with no profiling events: a host-bound invoke spends most of it enqueueing).
  int64_t enqueue_ns = 0, wait_ns = 0;
  // Invokes that ran the launch form with fewer launches (runtime/launch_forms.h).
  int64_t fewer_launch_invokes = 0;
  // The launch-form pairs this invoke completed, and the sum of their ln(fewer / shorter): what
  // the partitions' trials measured, beside the form they kept (bench/never_slower.py).
  int64_t form_pairs = 0;
  double form_pair_log_ratio = 0;
};

// The delegate options a partition runs with.
struct RuntimeSettings {
  bool profiling = false;
  bool capture_tensors = false;
  bool fuse_add = true;
  std::vector<std::string> fuse;  // the fold passes applied, by name (fusion/pass.h)
  bool cpu_warmup = false;        // runtime/cpu_fallback.h
  // precision auto with fp16 storage: a partition whose values leave fp16's range runs in
  // float32 from then on (runtime/partition_overflow.cc); explicit fp16 only warns.
  bool fp16_fallback = false;
};

class PartitionHost {
 public:
  virtual ~PartitionHost() = default;

  virtual Environment& env() = 0;
  virtual cl_command_queue queue() const = 0;
  virtual const RuntimeSettings& settings() const = 0;
  // The one way to build an op context (ops, weights and storage of this delegate).
  virtual OpContext MakeOpContext() const = 0;
  virtual bool half_storage() const = 0;
  virtual size_t storage_bytes() const = 0;
  virtual bool zero_copy() const = 0;
  // The graph of the Prepare in progress (kernel init runs inside it), or null.
  virtual const GraphView* current_graph() const = 0;
  virtual Profiler& profiler() = 0;
  virtual int NextPartitionId() = 0;
  // cpu_warmup: what is known of the room in the context's tensor list, one for all partitions
  // (each probing on its own doubled the list per partition).
  virtual TensorRoom& tensor_room() = 0;

  virtual void CountKernelCreated() = 0;
  virtual void CountPlan() = 0;
  virtual void CountBind() = 0;
  // cpu_warmup: a partition's setup thread started / ended; an invoke ran on the CPU kernels.
  virtual void WarmupStarted() = 0;
  virtual void WarmupEnded() = 0;
  virtual void CountCpuInvoke() = 0;
  virtual void CountInvoke(const InvokeCounts& counts) = 0;
  // A partition's values left fp16's range in these nodes (their inputs or outputs were
  // saturated): they now run in float32 (`fell_back`, precision auto: these are added to the
  // nodes that do), or (precision fp16) it only says so.
  virtual void CountFp16Overflow(const std::vector<int>& nodes, bool fell_back) = 0;
  virtual void Capture(int tensor, CapturedTensor c) = 0;
  virtual void SetMemoryReport(int partition, const MemoryReport& r) = 0;
  virtual void DropMemoryReport(int partition) = 0;
};

}  // namespace clgpu
