#include "delegate/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "ops/fusion.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Rough sustained rates, calibrated on the H200 machine (16 host threads) with the
// benchmark models (bench/compare_cpu.py). XNNPACK ran 33 (MobileNetV2) to 90 (ResNet-50)
// GFLOP/s per thread, and each node costs its threads a few us of hand-off however small
// (LeNet-5: 9 nodes, 40 us). NVIDIA's OpenCL device took 4-10 us per small kernel; the
// host's ~3 us enqueue (no profiling events) overlaps with it, leaving short gaps between
// kernels (MobileNetV2: 84 launches in 0.64 ms). A partition must win by a margin: a wrong
// "keep" costs more than a wrong "decline".
constexpr double kCpuGflopsPerThread = 60.0;
constexpr double kCpuNodeUs = 5.0;          // per node, whatever its size
constexpr double kDeviceEfficiency = 0.25;  // of CU * clock * 128 FLOP/cycle
constexpr double kLaunchGapUs = 1.5;        // between kernels, the enqueue overlapping
constexpr double kMinKernelUs = 6.0;        // device time of even the smallest kernel
constexpr double kCopyUs = 2.0;             // a RESHAPE's buffer copy: no kernel, no arithmetic
constexpr double kSyncUs = 40.0;            // one clFinish + read-back per invoke
constexpr double kDiscreteGBps = 8.0;       // host <-> device copies (PCIe, pageable)
constexpr double kUnifiedGBps = 15.0;       // shared-memory devices
constexpr double kWinMargin = 0.8;          // device must be >= 20 % faster

// Ops the device runs as one buffer copy (no kernel), and each node's arithmetic: from
// its op's handler (ops/op.h).
bool IsCopy(int32_t op) {
  const OpHandler* h = FindOpHandler(op);
  return h && h->flat_copy;
}

double NodeFlops(const GraphView& g, const NodeInfo& n) {
  if (const OpHandler* h = FindOpHandler(n.op)) return NodeWork(g, *h, n);
  if (n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return 0;
  return double(NumElements(g.shape(n.outputs[0])));
}

}  // namespace

PartitionEstimate EstimatePartition(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                    const std::vector<int>& inputs, const std::vector<int>& outputs,
                                    const DeviceInfo& dev, bool fuse_add) {
  PartitionEstimate e;
  std::set<size_t> folded;  // ADDs that run inside their conv's kernel: compute, no launch
  if (fuse_add)
    for (const ResidualFusion& f :
         FindResidualFusions(g, nodes, std::set<int>(outputs.begin(), outputs.end())))
      folded.insert(f.add);
  const double dev_gflops =
      kDeviceEfficiency * std::max(dev.compute_units, 1) * std::max(dev.max_clock_mhz, 1) * 128e-3;
  double device_compute_ms = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    const double f = NodeFlops(g, n);
    e.flops += f;
    if (n.op == tfl::kDequantize) continue;
    if (folded.count(i)) {
      device_compute_ms += f / (dev_gflops * 1e9) * 1e3;
      continue;
    }
    ++e.kernels;
    device_compute_ms +=
        IsCopy(n.op) ? kCopyUs * 1e-3 : std::max(f / (dev_gflops * 1e9) * 1e3, kMinKernelUs * 1e-3);
  }
  for (int t : inputs)
    if (g.valid_tensor(t) && !g.IsConstant(t)) e.boundary_bytes += 4.0 * NumElements(g.shape(t));
  for (int t : outputs)
    if (g.valid_tensor(t)) e.boundary_bytes += 4.0 * NumElements(g.shape(t));

  const double threads = std::max(1u, std::thread::hardware_concurrency());
  e.cpu_ms =
      e.flops / (kCpuGflopsPerThread * threads * 1e9) * 1e3 + nodes.size() * kCpuNodeUs * 1e-3;
  const double gbps = dev.host_unified_memory ? kUnifiedGBps : kDiscreteGBps;
  e.device_ms = device_compute_ms + e.boundary_bytes / (gbps * 1e9) * 1e3 +
                (e.kernels * kLaunchGapUs + kSyncUs) * 1e-3;
  char buf[200];
  if (dev.type == "cpu") {
    e.keep = false;
    e.reason =
        "cost: the OpenCL device is the CPU itself, where the runtime's CPU kernels are faster";
  } else if (e.device_ms >= kWinMargin * e.cpu_ms) {
    e.keep = false;
    std::snprintf(buf, sizeof buf,
                  "cost: estimated %.3f ms on the device vs %.3f ms on the CPU (%.2f MFLOP, "
                  "%.0f KB transferred)",
                  e.device_ms, e.cpu_ms, e.flops / 1e6, e.boundary_bytes / 1e3);
    e.reason = buf;
  }
  return e;
}

}  // namespace clgpu
