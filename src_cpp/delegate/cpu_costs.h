// The CPU side of the cost model (delegate/cost_model.h): what XNNPACK, or TFLite's own kernel
// where XNNPACK takes an op, would take for a partition's nodes on the interpreter's threads.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace clgpu {

// The CPU side: XNNPACK on the interpreter's threads, as the cost model figures them.
struct CpuCosts {
  int threads = 1;
  double gflops = 0, gbps = 0;  // over those threads
  // Per node, whatever its size: the hand-off between the threads, by what XNNPACK makes of the
  // node. A float convolution (CONV_2D, DEPTHWISE_CONV_2D) hands off longest, an int8 one less,
  // a FULLY_CONNECTED less again, anything else (element-wise ops, pools, reshapes, conversions)
  // least: node_us. A convolution whose output is small hands off less: from
  // small_conv_node_us at no output up to its kind's figure at 2,000 output elements.
  double node_us = 0, float_conv_node_us = 0, int8_conv_node_us = 0, fc_node_us = 0;
  double small_conv_node_us = 0;
  // A model's weights read from the host's last-level cache (cache_bytes, 0: unknown) when all
  // of them fit in it, at cached_gbps instead of gbps.
  double cached_gbps = 0, cache_bytes = 0;
  bool int8_tiles = false;  // XNNPACK's int8 convolutions on AMX tiles (HostInt8Tiles)
  int float_lanes = 0;      // its float convolutions' row of output channels (HostFloatLanes)
};

// num_threads: TfLiteContext::recommended_num_threads, what the interpreter gives XNNPACK
// (-1 on tflite_runtime and 1 on ai_edge_litert when the user sets none: one thread, no pool);
// counted up to the host's cores.
CpuCosts CpuCostsFor(int num_threads);
// At `threads`, whatever the host's cores.
CpuCosts CpuCostsAt(int threads);

// A tensor's bytes in TFLite's memory.
double HostBytes(const GraphView& g, int t);

// The CPU's time for a converting node's `bytes` at the model's edge (us): one hand-off and one
// thread's bandwidth.
double CpuConversionUs(const CpuCosts& cpu, double bytes);

// The CPU's time on the interpreter's threads, and on the fit's: the lower of the two counts.
// The sweep's shorter hand-off on fewer threads held (keyword spotters ran 1.3-1.5x faster on
// 4 threads than on 16), but its slower arithmetic there missed small models by up to 5x
// either way (one-thread int8 spotters, a dense layer in cache), and a CPU estimated too slow
// keeps what it runs faster (bench/results/never-slower-t*-*.md).
class CpuSide {
 public:
  CpuSide(const GraphView& g, const CpuCosts& cpu);
  // Node n, its arithmetic f, int8 or not.
  void Add(const NodeInfo& n, double f, bool int8);
  // With `extra_nodes` more nodes that the CPU runs and no kernel of the device's does (a
  // converter's fp16 DEQUANTIZE the device folds), each at the least hand-off (ms).
  double Ms(double extra_nodes) const;
  bool cached() const { return cached_; }  // the model's weights all in the host's cache

 private:
  const GraphView& g_;
  const CpuCosts& cpu_;
  const CpuCosts fit_;
  const bool cached_;
  double node_ms_ = 0, fit_ms_ = 0;
};

}  // namespace clgpu
