// Constant subgraphs folded at Prepare: nodes whose every input is a constant, or the output of
// another such node, compute the same values at every invoke (converters leave them: Swin's
// shifted-window attention masks through litert-torch are chains of SELECT, PAD, SLICE, SUB,
// EQUAL and SELECT_V2 over constants). They are run once, here, by the runtime's own CPU kernels
// (runtime/cpu_fallback.h, so every builtin op folds exactly as TFLite computes it), and their
// outputs become constants of the graph (GraphView::AddComputedConstant): the ops reading them
// see constant operands, and the nodes run nothing per invoke, claimed with their consumers as
// folded DEQUANTIZEs are (delegate/claim.h).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/tensor_room.h"
#include "tflite/abi.h"

namespace clgpu {

// Folds the constant subgraphs of `nodes` (plan order) into `g`; returns the nodes folded, none
// when their CPU kernels cannot run here (then `*why` says why, for the log).
std::vector<const NodeInfo*> FoldConstantSubgraphs(GraphView& g, const std::vector<NodeInfo>& nodes,
                                                   TfLiteContext* ctx, TensorRoom* room,
                                                   std::string* why);

}  // namespace clgpu
