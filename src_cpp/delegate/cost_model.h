// Cost-aware partitioning: estimate whether a candidate partition runs faster on
// the device (compute + launches + boundary transfers + one sync) than on the
// CPU, so small or transfer-heavy partitions stay on the CPU.
#pragma once

#include <string>
#include <vector>

#include "cl/device.h"
#include "delegate/cpu_costs.h"
#include "fusion/pass.h"
#include "graph/graph.h"

namespace clgpu {

// The device side of the estimate. The defaults are the constants the model was first
// fitted with on the H200 machine (bench/compare_cpu.py); delegate/calibration.h measures
// them on the delegate's own device and queue.
struct DeviceCosts {
  double min_kernel_us = 6.0;  // device time of even the smallest kernel
  double launch_gap_us = 1.5;  // between kernels, the enqueue overlapping
  double copy_us = 2.0;        // a RESHAPE's buffer copy: no kernel, no arithmetic
  double sync_us = 40.0;       // one clFinish + read-back per invoke
  double gbps = 0;             // host <-> device copies; 0: 8 (PCIe, pageable), 15 (unified)
  // The same through a buffer over host memory, mapped and unmapped, as partitions transfer with
  // zero_copy (a DMA of pinned memory on NVIDIA's driver); 0: not measured, gbps stands for it.
  double mapped_gbps = 0;
  double gflops = 0;                 // arithmetic peak; 0: compute units x clock x 128 FLOP/cycle
  std::string source = "constants";  // "measured", "cache" (this process), "file", "constants"
  // min_kernel_us is the lower launch level's, over a longer window (RefinedDeviceCosts).
  bool refined = false;
};

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

// `c` with the host <-> device figure of the way partitions transfer: the mapped one where they
// map host-pointer buffers (zero_copy) and it was measured, else the pageable copies'.
DeviceCosts TransferCosts(DeviceCosts c, bool zero_copy);

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
