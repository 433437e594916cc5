// Dynamic-range ("hybrid") models: float activations, int8 constant weights with a symmetric
// scale per tensor or per output channel, in FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D and
// BATCH_MATMUL. TFLite runs them with kernels that quantize the activations on the fly; the
// delegate dequantizes the weights once (graph/dequantize.h) and runs its float kernels, so such
// an op is its float op with float weights (docs/numerics.md says how that compares).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// Before the checks (delegate Prepare): marks each int8 constant that only hybrid nodes read, as
// the weights they may run with, as a dequantized weight of `g` (GraphView::AddDequantizedWeight):
// it is then a float constant to every check and op.
void MarkHybridWeights(GraphView& g, const std::vector<NodeInfo>& nodes);

// For an op's check, before its float-tensor checks: "" when the node is no hybrid node (its
// weights are float, or its input is not float) or its weights are marked, else why it stays on
// the CPU (uint8 or int4 weights, a zero point, scales TFLite's kernel misreads, weights another
// op also reads).
std::string CheckHybridWeights(const GraphView& g, const NodeInfo& node);

}  // namespace clgpu
