#include "delegate/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "common/env.h"
#include "fusion/pass.h"
#include "ops/conv2d_selector.h"
#include "ops/group_rewrite.h"
#include "ops/matmul_views.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr double kDeviceEfficiency = 0.25;  // of the device's arithmetic peak
constexpr double kDiscreteGBps = 8.0;       // host <-> device copies (PCIe, pageable)...
constexpr double kUnifiedGBps = 15.0;       // ...and on shared-memory devices, unmeasured
// A layer's kernel costs more than the calibration's small kernel (its own arguments, a
// larger grid), fitted on the real models of bench/results/plans-*. Added, not scaled: the
// calibrated figure itself varies between processes (the host's side of each launch), and a
// factor would double that (docs/partitioning.md).
constexpr double kLayerKernelExtraUs = 1.0;  // per kernel, on top of min_kernel_us...
constexpr double kLayerGapExtraUs = 1.0;     // ...and of launch_gap_us

// A partition must win by a margin (device_ms < win_margin x cpu_ms), and an int8 kernel costs
// more than the calibration's small float kernel (its integer epilogue, the latency chains of a
// fused kernel at batch 1; docs/int8.md). Fitted together on the small models of the
// never-slower set on three H200 machines (docs/partitioning.md): the int8 models' device time
// ran 10-35 % over its estimate where the float models' did not, and once keyword_spotting_alexa
// ran its blocks in one kernel, no model needed a margin of 20 % any more. Since the int8 GEMM
// takes its constants packed (PackConstants: 3-5 fewer buffer arguments a launch), 2 us: 3
// overestimated its models by 5-45 % (bench/results/cost-tunes-packed-NVIDIA_H200.md). The
// margin is 1 since both sides of the estimate lost their bias (the CPU's int8 convolutions on
// AMX tiles, an invoke's cost on the device: int8 rows' measured / estimated medians 0.97-0.99):
// over 174 rows of four H200 tables 0.95 broke the rule 6 times, 1 three
// (bench/results/cost-margins-current-NVIDIA_H200.md).
// $CLGPU_COST_TUNE="INT8_US,MARGIN[,LAYER_US]" replaces both, and the layer extras' sum (half on
// the kernel, half on the gap), for bench/cost_estimates.py --tunes to weigh others.
struct CostTune {
  double int8_kernel_us = 2;
  double win_margin = 1.0;
  double layer_extra_us = kLayerKernelExtraUs + kLayerGapExtraUs;
};

// Read at each estimate: ab_options.py sets it between delegates of one process.
CostTune Tune() {
  CostTune t;
  const std::string raw = GetEnv("CLGPU_COST_TUNE").value_or("");
  const size_t fields = std::count(raw.begin(), raw.end(), ',') == 2 ? 3 : 2;
  const std::vector<double> v = EnvNumbers(
      "CLGPU_COST_TUNE", fields,
      "INT8_US,MARGIN[,LAYER_US] (0 <= INT8_US < 1000, 0 < MARGIN <= 1, 0 <= LAYER_US < 1000)",
      [](const std::vector<double>& x) {
        return x[0] >= 0 && x[0] < 1e3 && x[1] > 0 && x[1] <= 1 &&
               (x.size() < 3 || (x[2] >= 0 && x[2] < 1e3));
      });
  if (!v.empty()) t.int8_kernel_us = v[0], t.win_margin = v[1];
  if (v.size() == 3) t.layer_extra_us = v[2];
  return t;
}

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

// The nodes of a partition that run inside another node's kernel (fuse_add): what the fold
// passes find (fusion/pass.h, the partition's own table), and the group rewrites' nodes.
void FindFolded(const GraphView& g, const std::vector<NodeInfo>& nodes,
                const std::vector<int>& outputs, const DeviceInfo& dev,
                const std::vector<std::string>& fuse, Folds* folds, std::set<size_t>* groups) {
  const std::set<int> outs(outputs.begin(), outputs.end());
  const FoldGraph fold_graph{g, nodes, outs, dev};
  for (const auto& pass : FusionPasses())
    if (std::find(fuse.begin(), fuse.end(), pass->name()) != fuse.end())
      pass->Find(fold_graph, folds);
  std::set<size_t>* folded = &folds->folded;
  for (const GroupRewrite& r : FindGroupRewrites(g, nodes, outs)) {
    folded->insert(r.nodes.begin(), r.nodes.end() - 1);  // one launch for the group
    groups->insert(r.nodes.back());
  }
  // A RESHAPE keeps its input's storage, or its input the output's (the partition's
  // AliasFlatCopies), unless both are boundary tensors: no copy.
  std::set<int> written;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (IsCopy(n.op) && !n.inputs.empty() && n.outputs.size() == 1 &&
        (written.count(n.inputs[0]) || !outs.count(n.outputs[0])))
      folded->insert(i);
    written.insert(n.outputs.begin(), n.outputs.end());
  }
}

// Node i's launches as its op will plan them on this device: how many (split-K GEMMs launch
// two; counting one per node had iris_landmark's 167 at 121), and what their one-launch form
// adds to the first (us; < 0 where they have none).
LaunchCount Launches(const GraphView& g, const std::vector<NodeInfo>& nodes, size_t i,
                     const Folds& folds, const DeviceInfo& dev) {
  const NodeInfo& n = nodes[i];
  LaunchCount l;
  if (auto dw = folds.depthwise_of.find(i); dw != folds.depthwise_of.end()) {
    const NodeInfo& d = nodes[dw->second];
    const std::optional<ConvGeometry> dg = GraphConvGeometry(g, d);
    const std::optional<ConvGeometry> pg = GraphConvGeometry(g, n);
    if (!dg || !pg || IsQuantized(g.value_type(n.inputs[0]))) return l;
    // A folded expand: its input's channels.
    int expand_c = 0;
    if (auto e = folds.expand_of.find(dw->second); e != folds.expand_of.end())
      if (const NodeInfo& x = nodes[e->second]; !x.inputs.empty())
        if (const Shape s = g.shape(x.inputs[0]); !s.empty()) expand_c = s.back();
    return DepthwiseGemmLaunches(dev, *dg, pg->oc, expand_c);
  }
  const OpHandler* h = FindOpHandler(n.op);
  if (h && h->launches) l = h->launches(g, n, dev);
  l.count = std::max(1, l.count);
  return l;
}

// What a launch is (cl/device_profile.h): its op's kernel, and what its folds add to it.
LaunchKind KindOf(const NodeInfo& n, size_t i, const Folds& folds, const std::set<size_t>& groups) {
  if (IsCopy(n.op)) return kSmallLaunch;
  if (folds.depthwise_of.count(i) || groups.count(i)) return kFusedLaunch;
  const OpHandler* h = FindOpHandler(n.op);
  return h && h->gemm_launch ? kGemmLaunch : kSmallLaunch;
}

// The estimate's launches by kind, and the split nodes it counted in their one-launch form with
// what that form added to them (us).
struct LaunchTally {
  int kinds[kLaunchKinds] = {};
  int one_launch = 0;
  double one_launch_us = 0;
  // A node's first launch of `kind` and its split's further ones, or its one launch (`one`,
  // adding one_us): the kernels counted.
  int Add(LaunchKind kind, int launches, bool one, double one_us) {
    kinds[kind] += 1;
    kinds[kSplitLaunch] += one ? 0 : launches - 1;
    one_launch += one;
    one_launch_us += one ? one_us : 0;
    return one ? 1 : launches;
  }
};

// Each kind's cost per launch: $CLGPU_LAUNCH_US ("GEMM,FUSED,SPLIT,SMALL", to fit or weigh them;
// "0,0,0,0": the calibration's figure) or the device profile's; all 0: the calibration's.
std::array<double, kLaunchKinds> LaunchCosts(const DeviceInfo& dev) {
  const std::vector<double> v = EnvNumbers(
      "CLGPU_LAUNCH_US", kLaunchKinds, "GEMM,FUSED,SPLIT,SMALL (each 0 < us < 1000, or all 0)",
      [](const std::vector<double>& x) {
        const bool off = std::all_of(x.begin(), x.end(), [](double u) { return u == 0; });
        return off || std::all_of(x.begin(), x.end(), [](double u) { return u > 0 && u < 1e3; });
      });
  if (v.empty()) return dev.profile.launch_us;
  std::array<double, kLaunchKinds> out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

// The device profile's cost per invoke, or $CLGPU_INVOKE_US (read, and a bad one refused,
// either way): 0 without costs by kind, where the calibrated sync stands for the invoke.
double InvokeCost(const DeviceInfo& dev, bool by_kind) {
  const std::vector<double> v =
      EnvNumbers("CLGPU_INVOKE_US", 1, "a cost in us (0 <= us < 1000)",
                 [](const std::vector<double>& x) { return x[0] >= 0 && x[0] < 1e3; });
  return by_kind ? (v.empty() ? dev.profile.invoke_us : v[0]) : 0;
}

// What the estimate counts for a launch: its kind's cost, the gap included, where the device
// profile (or $CLGPU_LAUNCH_US) has them; else the calibration's small kernel with a layer's
// extras (an int8 kernel's more), the same for every kernel, and a gap after each.
struct LaunchFloor {
  LaunchFloor(const DeviceInfo& dev, const DeviceCosts& c, const CostTune& t)
      : kind_us(LaunchCosts(dev)),
        by_kind(kind_us[kSmallLaunch] > 0),
        invoke_us(InvokeCost(dev, by_kind)),
        kernel_us(c.min_kernel_us + t.layer_extra_us / 2),
        gap_us(by_kind ? 0 : c.launch_gap_us + t.layer_extra_us / 2),
        int8_us(t.int8_kernel_us) {}
  // A node's `launches` kernels, the first of `kind`, the others a split's (us). one_us >= 0:
  // the split also runs as one launch that costs that much more, and the partition keeps the
  // faster form (runtime/launch_forms.h); with costs by kind only, the other's being fitted.
  double Us(LaunchKind kind, int launches, bool int8, double one_us = -1) const {
    if (!by_kind) return launches * (kernel_us + (int8 ? int8_us : 0));
    return kind_us[kind] +
           (OneLaunch(launches, one_us) ? one_us : (launches - 1) * kind_us[kSplitLaunch]);
  }
  // Whether that count is the one-launch form's.
  bool OneLaunch(int launches, double one_us) const {
    return by_kind && launches > 1 && one_us >= 0 &&
           one_us < (launches - 1) * kind_us[kSplitLaunch];
  }
  std::array<double, kLaunchKinds> kind_us;
  bool by_kind;
  double invoke_us;  // with the costs by kind, fitted with them
  double kernel_us, gap_us, int8_us;
};

// Why the estimate cannot size this partition ("" where it can): one of `inputs` has extents the
// model leaves to the run (a -1 in its shape signature past the batch axis, declared as a
// placeholder: tf.signal's frames of BirdNET's spectrogram, 1 at Prepare and 511 at the invoke).
// A GPU keeps such a partition as `all` would: on BirdNET the four small partitions so declined
// cost the default 1.23x `all`'s time (bench/results/never-slower-newwheels-NVIDIA_H200.md).
std::string RunTimeExtents(const GraphView& g, const std::vector<int>& inputs) {
  for (int t : inputs) {
    if (!g.valid_tensor(t) || g.IsConstant(t)) continue;
    const TfLiteIntArray* sig = g.tensor(t).dims_signature;
    for (int a = 1; sig && a < sig->size; ++a)
      if (sig->data[a] < 0)
        return "; input " + g.name(t) +
               " has extents the run decides (a -1 past the batch axis of its shape signature) "
               "that the estimate sizes by the model's placeholders: a GPU keeps it whatever "
               "the estimate";
  }
  return "";
}

}  // namespace

PartitionEstimate EstimatePartition(const GraphView& g, const std::vector<NodeInfo>& claimed,
                                    const std::vector<int>& inputs, const std::vector<int>& outputs,
                                    const DeviceInfo& dev, const DeviceCosts& costs,
                                    const CpuCosts& cpu, const std::vector<std::string>& fuse,
                                    int folded_nodes) {
  PartitionEstimate e;
  const CostTune tune = Tune();
  // In the order the partition runs them.
  std::vector<NodeInfo> nodes = claimed;
  OrderForFolds(g, &nodes, std::set<int>(outputs.begin(), outputs.end()), fuse);
  // ADDs, clamp activations and depthwise convolutions that run inside another op's kernel:
  // compute, no launch.
  Folds folds;
  std::set<size_t> groups;  // the launching node of each group rewrite
  if (!fuse.empty()) FindFolded(g, nodes, outputs, dev, fuse, &folds, &groups);
  LaunchTally tally;
  const LaunchFloor launch(dev, costs, tune);
  const std::set<size_t>& folded = folds.folded;
  const std::set<size_t>& one_kernel = folds.one_kernel;
  const double peak_gflops = costs.gflops > 0 ? costs.gflops : NominalGflops(dev);
  const double dev_gflops = kDeviceEfficiency * peak_gflops;
  double device_compute_ms = 0;
  // Its parts, for fitting (bench/fit_launch_costs.py): arithmetic, and floors above it.
  double arith_ms = 0, floors_ms = 0, launches_us = 0;
  auto bytes = [&](int t) { return HostBytes(g, t); };
  CpuSide cpu_side(g, cpu);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    const double f = NodeFlops(g, n);
    e.flops += f;
    const bool int8 = !n.outputs.empty() && g.valid_tensor(n.outputs[0]) &&
                      IsQuantized(g.value_type(n.outputs[0]));
    cpu_side.Add(n, f, int8);
    // A folded FLOAT16 weight runs nothing (an int8 DEQUANTIZE is a kernel).
    if (n.op == tfl::kDequantize && !n.outputs.empty() && g.IsFoldedDequantizeOutput(n.outputs[0]))
      continue;
    const double node_arith_ms = f / (dev_gflops * 1e9) * 1e3;
    arith_ms += node_arith_ms;
    if (folded.count(i)) {
      device_compute_ms += node_arith_ms;
      continue;
    }
    // A chain (DS blocks, dense layers): one launch, its time in its form beyond it.
    const auto chain = folds.chain_us.find(i);
    const bool in_chain = chain != folds.chain_us.end();
    const LaunchCount planned = IsCopy(n.op) || one_kernel.count(i) || in_chain
                                    ? LaunchCount{}
                                    : Launches(g, nodes, i, folds, dev);
    const LaunchKind kind = in_chain ? kFusedLaunch : KindOf(n, i, folds, groups);
    if (in_chain) device_compute_ms += chain->second * 1e-3;
    const bool one = launch.OneLaunch(planned.count, planned.one_launch_us);
    e.kernels += tally.Add(kind, planned.count, one, planned.one_launch_us);
    const double floor_us = launch.Us(kind, planned.count, int8, planned.one_launch_us);
    const double floor_ms =
        IsCopy(n.op) && !launch.by_kind ? costs.copy_us * 1e-3 : floor_us * 1e-3;
    launches_us += floor_us;
    if (IsCopy(n.op) || floor_ms > node_arith_ms) floors_ms += floor_ms - node_arith_ms;
    device_compute_ms += IsCopy(n.op) ? floor_ms : std::max(node_arith_ms, floor_ms);
  }
  for (int t : inputs)
    if (g.valid_tensor(t) && !g.IsConstant(t)) e.boundary_bytes += bytes(t);
  for (int t : outputs)
    if (g.valid_tensor(t)) e.boundary_bytes += bytes(t);

  // The CPU runs the nodes the device folds away too: fp16-weight models' CPU times fit
  // counting their DEQUANTIZE nodes as nodes (face and hand detectors, selfie segmentation).
  e.cpu_ms = cpu_side.Ms(double(std::max(folded_nodes, 0)));
  const double gbps = costs.gbps > 0            ? costs.gbps
                      : dev.host_unified_memory ? kUnifiedGBps
                                                : kDiscreteGBps;
  e.device_ms = device_compute_ms + e.boundary_bytes / (gbps * 1e9) * 1e3 +
                (e.kernels * launch.gap_us + costs.sync_us + launch.invoke_us) * 1e-3;
  const double kernel_us =
      launch.by_kind ? launches_us / std::max(e.kernels, 1) : launch.kernel_us + launch.gap_us;
  char buf[768];
  std::snprintf(
      buf, sizeof buf,
      "estimated %.3f ms on the device (%d kernels) vs %.3f ms on the CPU "
      "(%zu nodes, %d threads; %.2f MFLOP, %.0f KB transferred%s; device: %.1f us/kernel, "
      "%.0f us sync, %.1f GB/s %s; %.3f ms arithmetic, %.3f ms more for kernel floors; "
      "kernels: %d gemm, %d fused, %d split, %d small, %s, %.1f us gap, %.1f us invoke, "
      "%d splits as one launch, %.1f us more)",
      e.device_ms, e.kernels, e.cpu_ms, nodes.size() + std::max(folded_nodes, 0), cpu.threads,
      e.flops / 1e6, e.boundary_bytes / 1e3,
      cpu_side.cached() ? ", the CPU's weights in its cache" : "", kernel_us, costs.sync_us, gbps,
      costs.source == "constants" ? "assumed" : "measured", arith_ms, floors_ms,
      tally.kinds[kGemmLaunch], tally.kinds[kFusedLaunch], tally.kinds[kSplitLaunch],
      tally.kinds[kSmallLaunch], launch.by_kind ? "costs by kind" : "one cost", launch.gap_us,
      launch.invoke_us, tally.one_launch, tally.one_launch_us);
  const std::string run_time = RunTimeExtents(g, inputs);
  e.figures = buf + run_time;
  e.margin_ratio = e.device_ms / (tune.win_margin * e.cpu_ms);
  if (dev.profile.decline_partitions) {
    e.keep = false;
    e.reason =
        "cost: the OpenCL device is the CPU itself, where the runtime's CPU kernels are "
        "faster (" +
        e.figures + ")";
  } else if (run_time.empty() && e.margin_ratio >= 1) {
    e.keep = false;
    e.reason = "cost: " + e.figures;
  }
  return e;
}

bool LaunchCostsByKind(const DeviceInfo& dev) { return LaunchCosts(dev)[kSmallLaunch] > 0; }

DeviceCosts TransferCosts(DeviceCosts c, bool zero_copy) {
  if (zero_copy && c.mapped_gbps > 0) c.gbps = c.mapped_gbps;
  return c;
}

std::string EdgeConversionCost(const GraphView& g, const NodeInfo& n, const DeviceCosts& costs,
                               const CpuCosts& cpu) {
  double bytes = 0;
  for (const std::vector<int>* ts : {&n.inputs, &n.outputs})
    for (int t : *ts)
      if (g.valid_tensor(t)) bytes += HostBytes(g, t);
  const double cpu_us = CpuConversionUs(cpu, bytes);
  const double device_us = costs.min_kernel_us + costs.launch_gap_us + Tune().layer_extra_us;
  if (cpu_us >= device_us) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "cost: a conversion at the model's edge (%.0f KB): about %.1f us on the CPU "
                "against %.1f us for a kernel on the device",
                bytes / 1e3, cpu_us, device_us);
  return buf;
}

}  // namespace clgpu
