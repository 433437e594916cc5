// Cost-aware partitioning: estimate whether a candidate partition runs faster on
// the device (compute + launches + boundary transfers + one sync) than on the
// CPU, so small or transfer-heavy partitions stay on the CPU.
#pragma once

#include <string>
#include <vector>

#include "cl/device.h"
#include "fusion/pass.h"
#include "graph/graph.h"

namespace clgpu {

// The device side of the estimate. The defaults are the constants the model was first
// fitted with on the H200 machine (bench/compare_cpu.py); delegate/calibration.h measures
// them on the delegate's own device and queue.
struct DeviceCosts {
  double min_kernel_us = 6.0;        // device time of even the smallest kernel
  double launch_gap_us = 1.5;        // between kernels, the enqueue overlapping
  double copy_us = 2.0;              // a RESHAPE's buffer copy: no kernel, no arithmetic
  double sync_us = 40.0;             // one clFinish + read-back per invoke
  double gbps = 0;                   // host <-> device copies; 0: 8 (PCIe, pageable), 15 (unified)
  double gflops = 0;                 // arithmetic peak; 0: compute units x clock x 128 FLOP/cycle
  std::string source = "constants";  // "measured", "cache" (this process), "file", "constants"
  // min_kernel_us is the lower launch level's, over a longer window (RefinedDeviceCosts).
  bool refined = false;
};

// The CPU side: XNNPACK on the interpreter's threads, as the cost model figures them.
struct CpuCosts {
  int threads = 1;
  double gflops = 0, gbps = 0;  // over those threads
  double node_us = 0;           // per node, whatever its size: the hand-off between the threads
  // A model's weights read from the host's last-level cache (cache_bytes, 0: unknown) when all
  // of them fit in it, at cached_gbps instead of gbps.
  double cached_gbps = 0, cache_bytes = 0;
};

// num_threads: TfLiteContext::recommended_num_threads, what the interpreter gives XNNPACK
// (-1 on tflite_runtime and 1 on ai_edge_litert when the user sets none: one thread, no pool);
// counted up to the host's cores.
CpuCosts CpuCostsFor(int num_threads);
// At `threads`, whatever the host's cores.
CpuCosts CpuCostsAt(int threads);

struct PartitionEstimate {
  double flops = 0;
  double boundary_bytes = 0;  // partition inputs + outputs copied per invoke
  int kernels = 0;
  double device_ms = 0, cpu_ms = 0;
  bool keep = true;
  double margin_ratio = 0;  // device_ms / (win margin x cpu_ms): kept below 1
  std::string reason;       // why it was declined
  std::string figures;      // the estimate in words, kept or not (inspect's note)
};

// `nodes`: the partition's node records; inputs/outputs: its boundary tensors. folded_nodes:
// the partition's nodes evaluated at Prepare (FLOAT16 / sparse weights, shape computations),
// which the CPU still runs as nodes. fuse: the fold passes applied (fusion/pass.h, option
// `fuse`): the nodes they fold away cost no launch of their own.
PartitionEstimate EstimatePartition(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                    const std::vector<int>& inputs, const std::vector<int>& outputs,
                                    const DeviceInfo& dev, const DeviceCosts& costs,
                                    const CpuCosts& cpu,
                                    const std::vector<std::string>& fuse = FusionPassNames(),
                                    int folded_nodes = 0);

// "" when the device should run `n`, a type conversion at the model's edge (claim.h,
// LeaveEdgeConversionsToCpu), else why the CPU runs it: it converts the tensor in less time
// than a kernel costs the device (a launch and its host side, `costs`).
std::string EdgeConversionCost(const GraphView& g, const NodeInfo& n, const DeviceCosts& costs,
                               const CpuCosts& cpu);

// Whether the estimate counts each launch by its kind (the device profile's costs, or
// $CLGPU_LAUNCH_US), not by the calibration's small kernel: a close call then has no figure
// to measure again.
bool LaunchCostsByKind(const DeviceInfo& dev);

}  // namespace clgpu
