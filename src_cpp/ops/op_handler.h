// The registry of op families: what the delegate knows of each op code (its check, its Op
// factory, its description and work estimate), collected from the op files at build time
// (cmake/ClgpuOps.cmake).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graph/graph.h"

namespace clgpu {
struct DeviceInfo;
}

namespace clgpu {

class Op;  // ops/op.h

// The host CPU as an op's CPU figures need it (delegate/cpu_costs.h CpuCosts).
struct CpuHost {
  int threads = 1;          // the interpreter's, counted up to the host's cores
  bool int8_tiles = false;  // common/host_cache.h HostInt8Tiles
  double gflops = 0;        // the roofline's float rate over those threads (GFLOP/s)
  int float_lanes = 0;      // common/host_cache.h HostFloatLanes
};

// What XNNPACK makes of a node, as its hand-off between the CPU's threads goes (delegate/
// cpu_costs.h CpuCosts::node_us): convolutions hand off longest, dense layers less, the rest least.
enum class CpuHandoff { kOther, kConvolution, kFullyConnected };

// An op's kernels per invoke as the cost model counts them, from one plan: how many, and where
// they are a split kernel and its reduce that also come as one launch (ops/gemm.h SplitKLastUs),
// what that form adds to the split kernel (us; < 0: no such form).
struct LaunchCount {
  int count = 1;
  double one_launch_us = -1;
};

// Everything the delegate knows of one op code, defined in the op's own file as
// `extern const OpHandler k<Name>Handler = {...};`: the build collects those definitions
// into the registry (cmake/ClgpuOps.cmake), so adding an op is adding its files.
struct OpHandler {
  int32_t op;
  const char* name;
  // "" if this node can run on the device, else the reason it stays on the CPU.
  std::string (*check)(const GraphView& graph, const NodeInfo& node);
  std::unique_ptr<Op> (*create)(const GraphView& graph, const NodeInfo& node);
  // Its parameters as text ("padding=1 stride=2,2 act=0"), for inspect and the ABI report;
  // null: none worth showing.
  std::string (*describe)(const NodeInfo& node) = nullptr;
  // Arithmetic for the cost model from the graph's shapes (before an Op exists); null: one
  // operation per output element.
  double (*work)(const GraphView& graph, const NodeInfo& node) = nullptr;
  // Runs as one device buffer copy, no kernel (RESHAPE and its kin): the cost model counts
  // no launch and no arithmetic.
  bool flat_copy = false;
  // Clamps its output in its own kernels (FoldTarget::GetClamp): a clamp activation reading it
  // alone folds in (fusion/clamp.cc, fusion/epilogue.cc).
  bool clamp_epilogue = false;
  // Kernels per invoke for the cost model, from the plan the op will make on `dev` with
  // default options (split-K GEMMs launch two); null: one.
  LaunchCount (*launches)(const GraphView& graph, const NodeInfo& node,
                          const DeviceInfo& dev) = nullptr;
  // Converts a value's type element by element (QUANTIZE, DEQUANTIZE): at the model's edge the
  // cost model may leave a small one to the CPU (delegate/claim.h, LeaveEdgeConversionsToCpu).
  bool converts_type = false;
  // The CPU's time per output element of its int8 / uint8 form, where XNNPACK takes none and
  // TFLite's own kernel runs it on one thread (the cost model's CPU side; 0: XNNPACK's roofline).
  double cpu_int8_ns_per_element = 0;
  // Its kernel is a GEMM (or convolution): a launch of that kind for the cost model
  // (cl/device_profile.h LaunchKind), which the device profile may cost above an element-wise one.
  bool gemm_launch = false;
  // The same for its float form, where XNNPACK takes none (MIRROR_PAD): TFLite's own kernel
  // between XNNPACK's subgraphs, whatever the interpreter's threads (0: XNNPACK's roofline).
  double cpu_float_ns_per_element = 0;
  // Its dynamic-range form (int8 weights, float activations) where TFLite's hybrid kernel runs
  // it between XNNPACK's subgraphs: a fixed cost per node and a time per output element
  // (0: XNNPACK's roofline, with the weights a byte an element).
  double cpu_hybrid_node_us = 0, cpu_hybrid_ns_per_element = 0;
  // Its dynamic-range form where XNNPACK runs it: a conversion of the input to int8, an operator
  // and a hand-off of its own, then an int8 GEMM (CONV_2D, FULLY_CONNECTED).
  bool cpu_hybrid_converts = false;
  // Its int8 form's ns on the CPU where the roofline misses it: TFLite's own kernel where XNNPACK
  // leaves that form (DEPTHWISE_CONV_2D with a depth multiplier), or XNNPACK's int8 kernel where
  // it runs far off the roofline (CONV_2D on AMX tiles). The node costs the longer of this and
  // the roofline; null or 0: the roofline alone.
  double (*cpu_int8_kernel_ns)(const GraphView& graph, const NodeInfo& node,
                               const CpuHost& host) = nullptr;
  CpuHandoff cpu_handoff = CpuHandoff::kOther;
  // cpu_int8_kernel_ns for its float form: XNNPACK's kernel where it runs far off the roofline (a
  // PAD of the last axis, a row at a time); null or 0: the roofline alone.
  double (*cpu_float_kernel_ns)(const GraphView& graph, const NodeInfo& node,
                                const CpuHost& host) = nullptr;
  // Stores its quantized output through a table without taking a clamp (FoldTarget::TakesTable;
  // QUANTIZE of floats): an int8 chain reading it alone folds in (fusion/epilogue.cc).
  bool table_epilogue = false;
};

// All op families (generated from the op files); nullptr if `op` is not ours.
const OpHandler* FindOpHandler(int32_t op);
// Their number and table, for listings.
const OpHandler* const* AllOpHandlers(size_t* count);

// The parameter text of a node ("" if its handler has none).
std::string DescribeNode(const OpHandler& h, const NodeInfo& node);
// The handler's work estimate, or the output's element count.
double NodeWork(const GraphView& g, const OpHandler& h, const NodeInfo& node);
// Multiply-adds x 2 of a conv / depthwise / FC node: output elements x filter elements per
// output channel (the filter's `out_channel_axis` holds the output channels).
double FilterWork(const GraphView& g, const NodeInfo& node, int out_channel_axis);
// "a,b,c" of a params array's first n entries (n clamped to what such arrays hold).
std::string JoinParamInts(const int* v, int n);

}  // namespace clgpu
