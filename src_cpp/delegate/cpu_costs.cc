#include "delegate/cpu_costs.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "common/host_cache.h"
#include "ops/op.h"
#include "ops/op_handler.h"

namespace clgpu {
namespace {

// The CPU side: XNNPACK as a roofline per node: a node takes the longer of its arithmetic and its
// memory traffic (inputs, weights, output), plus a hand-off between the threads however small it
// is. Fitted by bench/fit_cpu_costs.py on the CPU times of 60 real, converted and generated
// models on the H200 machine's 16 host threads; arithmetic alone called depthwise,
// squeeze-excite and element-wise layers, which move more bytes than they compute, 1.5-2x too
// fast (MobileNetV3, LR-ASPP). On t threads (the interpreter's, CpuCostsFor) the figures follow
// a sweep over 1-16 threads of a GPU machine's 16-core host (bench/results/cpu-threads-*.md):
// arithmetic and bandwidth as t^0.8, the hand-off as 2.03 + 0.186 t us in a pool and 1.88 us on
// one thread, scaled to the 16-thread fit. The CPU that runs XNNPACK cannot be measured cheaply
// from inside the delegate; its thread count can. The device side comes in DeviceCosts: measured
// on the device (delegate/calibration.h) or the constants it defaults to.
constexpr int kCpuFitThreads = 16;
constexpr double kCpuGflopsPerThread = 42.0;  // at kCpuFitThreads
constexpr double kCpuGBpsPerThread = 13.0;
// Weights that all fit in the host's last-level cache stream from it on every invoke of a loop:
// dense layers of 2-39 MB ran at 400-610 GB/s on the H200 host's 16 threads, against the 208
// above, which an 84 MB one still held to (bench/results/never-slower-heldout-*.md).
constexpr double kCpuCachedGBpsPerThread = 30.0;
// The hand-off per node at kCpuFitThreads, by kind (CpuCosts::node_us): fitted by
// bench/fit_cpu_handoff.py on five H200 never-slower tables (222 models); one figure for every
// node, 4.7 us, had float keyword spotters 20-30 % too fast on the CPU and int8 ones right
// (bench/results/cpu-handoff-NVIDIA_H200.md).
constexpr double kCpuFloatConvNodeUs = 8.0;
constexpr double kCpuInt8ConvNodeUs = 6.0;
constexpr double kCpuFcNodeUs = 4.0;
constexpr double kCpuNodeUs = 2.0;
// A convolution of a small output hands off less, as if XNNPACK split it into fewer tiles: its
// hand-off rises from 2 us at no output to its kind's figure (8 float, 6 int8) at 2,000 output
// elements. Fitted with the other kinds at their figures on 2,454 whole-model rows of the H200
// tables since 2026-11-28 (median |log(estimate / measured)| 0.124 -> 0.108; one decision more
// right, an 8-channel DS-CNN of 23 us on the CPU estimated at 50, none less;
// bench/results/cpu-handoff-small-NVIDIA_H200.md).
constexpr double kCpuSmallConvUs = 2.0;
constexpr double kCpuSmallConvElements = 2000.0;
constexpr double kCpuThreadExponent = 0.8;
constexpr double kCpuNodeUsOneThread = 1.88;       // no pool: XNNPACK makes none below 2 threads
constexpr double kCpuPoolNodeUs = 2.03;            // a pool of t threads: this...
constexpr double kCpuPoolNodeUsPerThread = 0.186;  // ...plus this per thread
// An edge conversion's bandwidth: XNNPACK may not split so small a conversion over threads.
constexpr double kCpuConversionGBps = kCpuGBpsPerThread;
constexpr double kCpuInt8Speedup = 1.5;  // XNNPACK's int8 kernels over its float ones
// A dynamic-range CONV_2D or FULLY_CONNECTED that XNNPACK runs (OpHandler::cpu_hybrid_converts):
// its int8 GEMM's arithmetic against the float one's, and its input's conversion to int8 per
// element at kCpuFitThreads, fitted on 153 convolutions and dense layers of up to 340 MMAC on the
// H200 host's 16 threads (bench/results/cpu-hybrid-conv-h200-host-*.md: float 8.2 us + 0.93 us
// per MFLOP, dynamic-range 9.4 us + 0.23 per MFLOP + 0.13 per thousand input elements).
constexpr double kCpuHybridSpeedup = 4.0;
constexpr double kCpuHybridConvertNs = 0.13;

// A tensor's bytes as the CPU reads them: a weight a dynamic-range op reads as int8
// (GraphView::IsDequantizedWeight) is a byte an element to TFLite's hybrid kernel, where the
// device runs its dequantized floats.
double CpuBytes(const GraphView& g, int t) {
  return g.IsDequantizedWeight(t) ? double(NumElements(g.shape(t))) : HostBytes(g, t);
}

// The model's constants as the CPU interpreter reads them at each invoke: its working set of
// weights. A FLOAT16 weight counts once, as the floats XNNPACK packed it into at init (TFLite's
// own kernels read its DEQUANTIZE's output, computed once): BirdNET's metadata model, 29 MB of
// floats, counted 44 MB with its half source and missed the 40 MB cache share.
double ModelWeightBytes(const GraphView& g) {
  double bytes = 0;
  for (int t = 0; g.valid_tensor(t); ++t)
    if (g.IsConstant(t) && !g.IsFoldedDequantizeSource(t)) bytes += CpuBytes(g, t);
  return bytes;
}

bool ReadsHybridWeights(const GraphView& g, const NodeInfo& n) {
  return std::any_of(n.inputs.begin(), n.inputs.end(),
                     [&](int t) { return g.valid_tensor(t) && g.IsDequantizedWeight(t); });
}

// A dynamic-range node that XNNPACK converts (OpHandler::cpu_hybrid_converts): its input becomes
// int8 in an operator of its own, one more hand-off, before the int8 GEMM. On the H200 host's 16
// threads a DS-CNN's five such convolutions on 125 pixels ran 27 us slower than float, their
// arithmetic too small to gain; a 1-D temporal CNN's ten, of longer filters, 7 us faster.
bool HybridConverts(const GraphView& g, const NodeInfo& n, const OpHandler* h, bool int8) {
  return !int8 && h && h->cpu_hybrid_converts && ReadsHybridWeights(g, n);
}

// Node n's time on the CPU (h: its handler, f: its arithmetic): XNNPACK's roofline, the longer
// of its arithmetic and its memory traffic (every input, weights included, and output; the weights
// from the cache where the whole model's fit in it: weights_cached). int8 nodes'
// arithmetic counts 1 / kCpuInt8Speedup: the CPU's integer kernels are faster, by less than 2x
// on most models (docs/partitioning.md). An op XNNPACK leaves to TFLite's own kernel (in its int8
// or its float form, or reading dynamic-range weights), or runs far off its roofline (a PAD of the
// channels), costs that kernel's time, where longer.
double CpuNodeMs(const GraphView& g, const NodeInfo& n, const OpHandler* h, double f, bool int8,
                 const CpuCosts& cpu, bool weights_cached) {
  double traffic = 0, weights = 0;
  for (const std::vector<int>* ts : {&n.inputs, &n.outputs})
    for (int t : *ts)
      if (g.valid_tensor(t)) (g.IsConstant(t) ? weights : traffic) += CpuBytes(g, t);
  const bool converts = HybridConverts(g, n, h, int8);
  const double cpu_flops = int8 ? f / kCpuInt8Speedup : converts ? f / kCpuHybridSpeedup : f;
  const double memory =
      traffic / cpu.gbps + weights / (weights_cached ? cpu.cached_gbps : cpu.gbps);
  const double roofline_ms = std::max(cpu_flops / cpu.gflops, memory) * 1e-6;
  if (converts && g.valid_tensor(n.inputs[0]))  // its input's conversion, at the fit's pace
    return roofline_ms + double(NumElements(g.shape(n.inputs[0]))) * kCpuHybridConvertNs *
                             (kCpuGflopsPerThread * kCpuFitThreads / cpu.gflops) * 1e-6;
  if (!h || n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return roofline_ms;
  const double elements = double(NumElements(g.shape(n.outputs[0])));
  if (!int8 && h->cpu_hybrid_node_us > 0 && ReadsHybridWeights(g, n))
    return std::max(roofline_ms, elements * h->cpu_hybrid_ns_per_element * 1e-6) +
           h->cpu_hybrid_node_us * 1e-3;
  const CpuHost host{cpu.threads, cpu.int8_tiles, cpu.gflops, cpu.float_lanes};
  if (auto* kernel_ns = int8 ? h->cpu_int8_kernel_ns : h->cpu_float_kernel_ns)
    if (const double k = kernel_ns(g, n, host); k > 0) return std::max(roofline_ms, k * 1e-6);
  const double ns = int8 ? h->cpu_int8_ns_per_element : h->cpu_float_ns_per_element;
  return ns > 0 ? std::max(roofline_ms, elements * ns * 1e-6) : roofline_ms;
}

// A node's hand-off between the threads (us): by what XNNPACK makes of it (h: its handler) and,
// for a convolution, the size of its output.
double HandoffUs(const GraphView& g, const NodeInfo& n, const OpHandler* h, bool int8,
                 const CpuCosts& cpu) {
  switch (h ? h->cpu_handoff : CpuHandoff::kOther) {
    case CpuHandoff::kConvolution: {
      const double full = int8 ? cpu.int8_conv_node_us : cpu.float_conv_node_us;
      if (n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return full;
      const double share =
          std::min(1.0, double(NumElements(g.shape(n.outputs[0]))) / kCpuSmallConvElements);
      return cpu.small_conv_node_us + (full - cpu.small_conv_node_us) * share;
    }
    case CpuHandoff::kFullyConnected:
      return cpu.fc_node_us;
    case CpuHandoff::kOther:
      break;
  }
  return cpu.node_us;
}

}  // namespace

double HostBytes(const GraphView& g, int t) {
  return double(HostElementBytes(g.value_type(t))) * double(NumElements(g.shape(t)));
}

double CpuConversionUs(const CpuCosts& cpu, double bytes) {
  return std::min(cpu.node_us, CpuCostsAt(kCpuFitThreads).node_us) +
         bytes / (kCpuConversionGBps * 1e3);
}

CpuSide::CpuSide(const GraphView& g, const CpuCosts& cpu)
    : g_(g),
      cpu_(cpu),
      fit_(CpuCostsAt(kCpuFitThreads)),
      cached_(cpu.cache_bytes > 0 && ModelWeightBytes(g) <= cpu.cache_bytes) {}

void CpuSide::Add(const NodeInfo& n, double f, bool int8) {
  const OpHandler* h = FindOpHandler(n.op);
  const bool converts = HybridConverts(g_, n, h, int8);  // one more operator: its hand-off
  node_ms_ += CpuNodeMs(g_, n, h, f, int8, cpu_, cached_) +
              (HandoffUs(g_, n, h, int8, cpu_) + (converts ? cpu_.node_us : 0)) * 1e-3;
  fit_ms_ += CpuNodeMs(g_, n, h, f, int8, fit_, cached_) +
             (HandoffUs(g_, n, h, int8, fit_) + (converts ? fit_.node_us : 0)) * 1e-3;
}

double CpuSide::Ms(double extra_nodes) const {
  return std::min(node_ms_ + extra_nodes * cpu_.node_us * 1e-3,
                  fit_ms_ + extra_nodes * fit_.node_us * 1e-3);
}

CpuCosts CpuCostsAt(int threads) {
  CpuCosts c;
  c.threads = std::max(1, threads);
  const double scale = std::pow(double(c.threads) / kCpuFitThreads, kCpuThreadExponent);
  c.gflops = kCpuGflopsPerThread * kCpuFitThreads * scale;
  c.gbps = kCpuGBpsPerThread * kCpuFitThreads * scale;
  c.cached_gbps = kCpuCachedGBpsPerThread * kCpuFitThreads * scale;
  c.cache_bytes = double(WeightCacheBytes(c.threads));
  c.int8_tiles = HostInt8Tiles();
  c.float_lanes = HostFloatLanes();
  auto handoff = [](int t) {
    return t > 1 ? kCpuPoolNodeUs + kCpuPoolNodeUsPerThread * t : kCpuNodeUsOneThread;
  };
  const double handoff_scale = handoff(c.threads) / handoff(kCpuFitThreads);
  c.node_us = kCpuNodeUs * handoff_scale;
  c.float_conv_node_us = kCpuFloatConvNodeUs * handoff_scale;
  c.small_conv_node_us = kCpuSmallConvUs * handoff_scale;
  c.int8_conv_node_us = kCpuInt8ConvNodeUs * handoff_scale;
  c.fc_node_us = kCpuFcNodeUs * handoff_scale;
  return c;
}

CpuCosts CpuCostsFor(int num_threads) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return CpuCostsAt(cores > 0 ? std::min(num_threads, cores) : num_threads);
}

}  // namespace clgpu
