// Cost-aware partitioning: estimate whether a candidate partition runs faster on
// the device (compute + launches + boundary transfers + one sync) than on the
// CPU, so small or transfer-heavy partitions stay on the CPU.
#pragma once

#include <string>
#include <vector>

#include "cl/device.h"
#include "graph/graph.h"

namespace clgpu {

struct PartitionEstimate {
  double flops = 0;
  double boundary_bytes = 0;  // partition inputs + outputs copied per invoke
  int kernels = 0;
  double device_ms = 0, cpu_ms = 0;
  bool keep = true;
  std::string reason;  // why it was declined
};

// `nodes`: the partition's node records; inputs/outputs: its boundary tensors. fuse_add: ADDs
// that fold into their conv (ops/fusion.h) cost no launch of their own.
PartitionEstimate EstimatePartition(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                    const std::vector<int>& inputs, const std::vector<int>& outputs,
                                    const DeviceInfo& dev, bool fuse_add = true);

}  // namespace clgpu
