#include "delegate/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "ops/fusion.h"
#include "ops/group_rewrite.h"
#include "ops/matmul_views.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The CPU side: rough sustained rates from the H200 machine (16 host threads) with the
// benchmark models (bench/compare_cpu.py): XNNPACK's GFLOP/s per thread, and each node's
// hand-off between its threads, however small the node. The CPU that runs XNNPACK cannot be
// measured cheaply from inside the delegate. The device side comes in DeviceCosts: measured
// on the device (delegate/calibration.h) or the constants it defaults to. A partition must
// win by a margin: a wrong "keep" costs more than a wrong "decline".
constexpr double kCpuGflopsPerThread = 60.0;
constexpr double kCpuNodeUs = 5.0;          // per node, whatever its size
constexpr double kCpuInt8Speedup = 1.5;     // XNNPACK's int8 kernels over its float ones
constexpr double kDeviceEfficiency = 0.25;  // of the device's arithmetic peak
constexpr double kDiscreteGBps = 8.0;       // host <-> device copies (PCIe, pageable)...
constexpr double kUnifiedGBps = 15.0;       // ...and on shared-memory devices, unmeasured
constexpr double kWinMargin = 0.8;          // device must be >= 20 % faster
// A layer's kernel costs more than the calibration's small kernel (its own arguments, a
// larger grid), fitted on the real models of bench/results/plans-*. Added, not scaled: the
// calibrated figure itself varies between processes (the host's side of each launch), and a
// factor would double that (docs/partitioning.md).
constexpr double kLayerKernelExtraUs = 1.0;  // per kernel, on top of min_kernel_us...
constexpr double kLayerGapExtraUs = 1.0;     // ...and of launch_gap_us

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
                                    const DeviceInfo& dev, const DeviceCosts& costs, bool fuse_add,
                                    int folded_nodes) {
  PartitionEstimate e;
  // ADDs, clamp activations and depthwise convolutions that run inside another op's kernel:
  // compute, no launch.
  std::set<size_t> folded;
  if (fuse_add) {
    const std::set<int> outs(outputs.begin(), outputs.end());
    for (const ResidualFusion& f : FindResidualFusions(g, nodes, outs)) folded.insert(f.add);
    for (const ClampFusion& f : FindClampFusions(g, nodes, outs)) folded.insert(f.act);
    for (const EpilogueFusion& f : FindEpilogueFusions(g, nodes, outs))
      folded.insert(f.absorbed.begin(), f.absorbed.end());
    for (const ViewFusion& f : FindViewFusions(g, nodes, outs))
      folded.insert(f.absorbed.begin(), f.absorbed.end());
    for (size_t d : FindDepthwiseFolds(g, nodes, outs)) folded.insert(d);
    for (const GroupRewrite& r : FindGroupRewrites(g, nodes, outs))
      folded.insert(r.nodes.begin(), r.nodes.end() - 1);  // one launch for the group
    // A RESHAPE keeps its input's storage, or its input the output's (the partition's
    // AliasFlatCopies), unless both are boundary tensors: no copy.
    std::set<int> written;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeInfo& n = nodes[i];
      if (IsCopy(n.op) && !n.inputs.empty() && n.outputs.size() == 1 &&
          (written.count(n.inputs[0]) || !outs.count(n.outputs[0])))
        folded.insert(i);
      written.insert(n.outputs.begin(), n.outputs.end());
    }
  }
  const double peak_gflops =
      costs.gflops > 0 ? costs.gflops
                       : std::max(dev.compute_units, 1) * std::max(dev.max_clock_mhz, 1) * 128e-3;
  const double dev_gflops = kDeviceEfficiency * peak_gflops;
  const double min_kernel_us = costs.min_kernel_us + kLayerKernelExtraUs;
  const double launch_gap_us = costs.launch_gap_us + kLayerGapExtraUs;
  double device_compute_ms = 0;
  // int8 nodes count 1 / kCpuInt8Speedup: the CPU's integer kernels are faster, by less than 2x
  // on most models (docs/partitioning.md).
  double cpu_flops = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    const double f = NodeFlops(g, n);
    e.flops += f;
    const bool int8 = !n.outputs.empty() && g.valid_tensor(n.outputs[0]) &&
                      IsQuantized(g.value_type(n.outputs[0]));
    cpu_flops += int8 ? f / kCpuInt8Speedup : f;
    // A folded FLOAT16 weight runs nothing (an int8 DEQUANTIZE is a kernel).
    if (n.op == tfl::kDequantize && !n.outputs.empty() && g.IsFoldedDequantizeOutput(n.outputs[0]))
      continue;
    if (folded.count(i)) {
      device_compute_ms += f / (dev_gflops * 1e9) * 1e3;
      continue;
    }
    ++e.kernels;
    device_compute_ms += IsCopy(n.op)
                             ? costs.copy_us * 1e-3
                             : std::max(f / (dev_gflops * 1e9) * 1e3, min_kernel_us * 1e-3);
  }
  auto bytes = [&](int t) {
    return double(HostElementBytes(g.value_type(t))) * double(NumElements(g.shape(t)));
  };
  for (int t : inputs)
    if (g.valid_tensor(t) && !g.IsConstant(t)) e.boundary_bytes += bytes(t);
  for (int t : outputs)
    if (g.valid_tensor(t)) e.boundary_bytes += bytes(t);

  const double threads = std::max(1u, std::thread::hardware_concurrency());
  // The CPU runs the nodes the device folds away too: fp16-weight models' CPU times fit
  // counting their DEQUANTIZE nodes as nodes (face and hand detectors, selfie segmentation).
  e.cpu_ms = cpu_flops / (kCpuGflopsPerThread * threads * 1e9) * 1e3 +
             (nodes.size() + std::max(folded_nodes, 0)) * kCpuNodeUs * 1e-3;
  const double gbps = costs.gbps > 0            ? costs.gbps
                      : dev.host_unified_memory ? kUnifiedGBps
                                                : kDiscreteGBps;
  e.device_ms = device_compute_ms + e.boundary_bytes / (gbps * 1e9) * 1e3 +
                (e.kernels * launch_gap_us + costs.sync_us) * 1e-3;
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "estimated %.3f ms on the device (%d kernels) vs %.3f ms on the CPU (%zu nodes; "
                "%.2f MFLOP, %.0f KB transferred; device: %.1f us/kernel, %.0f us sync, %.1f GB/s "
                "%s)",
                e.device_ms, e.kernels, e.cpu_ms, nodes.size() + std::max(folded_nodes, 0),
                e.flops / 1e6, e.boundary_bytes / 1e3, min_kernel_us + launch_gap_us, costs.sync_us,
                gbps, costs.source == "constants" ? "assumed" : "measured");
  e.figures = buf;
  if (dev.type == "cpu") {
    e.keep = false;
    e.reason =
        "cost: the OpenCL device is the CPU itself, where the runtime's CPU kernels are faster";
  } else if (e.device_ms >= kWinMargin * e.cpu_ms) {
    e.keep = false;
    e.reason = "cost: " + e.figures;
  }
  return e;
}

}  // namespace clgpu
