// Residual ADDs folded into the CONV_2D that produces one of their operands: the conv writes
// act(conv(x) + bias + residual) straight to the ADD's output and the ADD runs no kernel (one
// launch fewer per block of ResNet / MobileNetV2). Here: which pairs the graph allows, shared by
// the partition (runtime/partition.cc, which also asks the ops and the shapes of each plan) and
// the cost model (delegate/cost_model.cc).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include "cl/device.h"
#include "graph/graph.h"

namespace clgpu {

struct ConvGeometry;  // ops/conv_geometry.h (which includes this file through op.h)

struct ResidualFusion {
  size_t producer = 0, add = 0;  // positions in the node list
  int residual = -1;             // the ADD's other operand
};

// Pairs in `nodes` (one partition, in execution order): an ADD whose operands and output have
// the same shape and type (float32 or int8), one operand the output of a CONV_2D (without fused
// activation if float) that nothing else reads (no other node of `nodes`; not in `outputs`, the
// partition's outputs), the other operand ready before the conv runs (an input or constant, or
// produced by an earlier node). When both operands qualify, the later conv takes the earlier
// one's output as its residual.
std::vector<ResidualFusion> FindResidualFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs);

// A clamp activation (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1) whose input only it reads, written
// by an earlier node of the partition whose handler clamps in its kernels (OpHandler::
// clamp_epilogue), and not a partition output: the producer applies the clamp too and writes
// the activation's output (Op::FoldClamp), one launch fewer.
struct ClampFusion {
  size_t producer = 0, act = 0;  // positions in the node list
  float lo = 0, hi = 0;          // the activation's bounds
};

// A MAXIMUM or MINIMUM of an epilogue chain's value and a constant scalar (a clamp written as a
// node, as Keras' tf.math.maximum and PyTorch's clamp convert), applied in the node's operand
// order: TFLite compares, so where a NaN ends up depends on that order.
struct PostClamp {
  bool maximum = true;
  float value = 0;
  bool chain_first = true;  // the chain's value is the node's first operand
};
constexpr size_t kMaxPostClamps = 2;
constexpr int kIdentityEpilogue = 9;  // no unary op: only post clamps (kernels/common.cl)

// An element-wise op folded into the op producing its input, as an epilogue of that op's kernels
// (Op::FoldEpilogue, kernels/common.cl): HARD_SWISH, LOGISTIC, TANH, GELU, ELU or LEAKY_RELU
// reading the producer's output alone (directly, or through RESHAPEs that only it reads), or swish,
// x * LOGISTIC(x), a LOGISTIC and a MUL (no activation, no broadcast) that are its output's only
// readers; then up to two MAXIMUM / MINIMUM with a constant scalar, each its input's only reader
// (PostClamp; also with no unary op before them: kIdentityEpilogue). The producer's handler clamps
// in its kernels (OpHandler::clamp_epilogue); no intermediate is a partition output. On int8
// tensors the same (and the RELU family; no RESHAPEs between) as one table of the producer's output
// integers, the chain's CPU arithmetic tabulated (kTableEpilogue): exact, whatever the chain.
struct EpilogueFusion {
  size_t producer = 0;
  std::vector<size_t> absorbed;    // the folded nodes; the last writes `output`
  std::vector<int> intermediates;  // tensors no longer written (the producer's own output first)
  int output = -1;
  int kind = 0;  // kernels/common.cl's CLGPU_EPILOGUE numbers, or kTableEpilogue
  float alpha = 0;
  std::vector<uint8_t> table;  // kTableEpilogue: the chain's results (Op::FoldTable)
  bool copies = false;         // RESHAPEs between the producer and the unary op: same elements only
  std::vector<PostClamp> post;  // float only, at most kMaxPostClamps, after the unary op
};

std::vector<EpilogueFusion> FindEpilogueFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs);

std::vector<ClampFusion> FindClampFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                          const std::set<int>& outputs);

// The dense ops (FULLY_CONNECTED, or a 1x1 CONV_2D over a 1x1 image) that the partition folds
// into the MEAN over one image's H and W before them (Partition::FoldSqueezes, ops/squeeze.h):
// the MEAN's output, through RESHAPEs and its kin, read by one dense op alone, whose output (or
// what its folded epilogue or clamp writes instead: `written_instead`) may feed one more the
// same way; within the squeeze's sizes at float32 or int8 storage. Their positions, for the cost
// model's count of launches; *means (when given) gets the MEANs that run them (one kernel each).
std::vector<size_t> FindSqueezeFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                     const std::set<int>& outputs,
                                     const std::map<int, int>& written_instead,
                                     std::vector<size_t>* means = nullptr);

// DEPTHWISE_CONV_2Ds (depth multiplier 1; int8: channels in fours) whose output only a later
// 1x1 CONV_2D of stride 1 reads, not a partition output: the positions of the depthwise nodes,
// which the partition folds into that convolution's GEMM where the plan's ops and shapes allow
// (Op::FoldDepthwise), for the cost model's count of launches.
std::vector<size_t> FindDepthwiseFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       const std::set<int>& outputs);

// The 1x1 CONV_2Ds of stride 1 (float32; int8 with channels in fours) whose output only a
// depthwise of FindDepthwiseFolds (`depthwise`, its positions) reads, not a partition output and
// not itself a pointwise convolution with a depthwise folded in: the expand of an inverted-residual
// block, which the partition folds into that depthwise's GEMM too (Op::FoldExpand) where
// ExpandFoldPays. Their positions, for the cost model's count of launches.
std::vector<size_t> FindExpandFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                    const std::set<int>& outputs,
                                    const std::vector<size_t>& depthwise, const DeviceInfo& dev);

// Whether computing the depthwise `dw`'s input from an expand of `ec` channels inside the GEMM of
// `oc` outputs (each tap of each output pixel, once per tile of 32 outputs) adds less arithmetic
// than about one launch's worth of the device's time (a tenth of its nominal rate for ~6 us):
// layers of small models, where the launch is the cost, and never the large layers of an image
// model.
bool ExpandFoldPays(const DeviceInfo& dev, const ConvGeometry& dw, int ec, int oc);

}  // namespace clgpu
