// What TFLite's own CPU kernels refuse or mishandle, checked before the delegate claims: a model
// the CPU refuses must fail as it does without the delegate, and a model whose CPU part may run
// out of bounds keeps TFLite's arena as the CPU alone has it.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// An operand whose rank the node's CPU kernel checks at prepare (a DEPTHWISE_CONV_2D bias of
// rank 2, SPLIT_V's size_splits of shape [2, 1]): why the node is not claimed, or "".
std::string CheckCpuOperandRanks(const GraphView& g, const NodeInfo& n);

// A quantized output's fused RELU, RELU_N1_TO_1 or RELU6 whose bounds, quantized as TFLite's
// CalculateActivationRangeQuantized does, overflow an int32 (a tiny output scale): the CPU kernel
// fails its prepare, so the node is not claimed (the delegate would saturate them). Or "".
std::string CheckCpuActivationRange(const GraphView& g, const NodeInfo& n);

// What TFLite's CPU kernel refuses at its prepare that the delegate's own op checks would take:
// a SHAPE whose options name another output type than int32 or int64 or than its output's,
// CheckCpuOperandRanks, then CheckCpuActivationRange. Why the node is not claimed or folded, or "".
std::string CheckCpuPrepare(const GraphView& g, const NodeInfo& n);

// Why TFLite's CPU kernel for this node may write out of bounds, or "": a convolution or pool
// with a stride, dilation or window beyond 32767 (tflite_runtime 2.14's CONV_2D wrote past its
// arena at stride 65537; with part of the model delegated, the smaller arena turned that into a
// heap corruption where the CPU alone got through), a SLICE whose constant begin and size
// leave its input (tflite_runtime 2.14 copies the box unchecked), or a MIRROR_PAD whose constant
// paddings reach past its input (tflite_runtime 2.14 mirrors past it). The delegate then claims
// nothing.
std::string CpuKernelUnsafe(const GraphView& g, const NodeInfo& n);

// Why the delegate claims nothing in this model, or "": nodes that read tensors before they are
// written (tflite_runtime 2.14's partitioner crashes on such a graph), a tensor a node writes that
// also holds model data (TFLite's partitioner takes it for a constant), or a CPU kernel that may
// run out of bounds (CpuKernelUnsafe). *warn: the reason deserves a warning (the last two).
std::string WholeModelOnCpu(const GraphView& g, const std::vector<NodeInfo>& nodes, bool* warn);

}  // namespace clgpu
