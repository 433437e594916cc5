// Shape computations folded at Prepare: the integer nodes a converter emits to rebuild a shape
// at run time (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE, Keras' Reshape and squeeze-excite
// blocks with a dynamic batch). Evaluated from the tensors' shapes and constants, they make the
// RESHAPE behind them static and claimable; the nodes themselves run nothing (they are claimed
// with their consumers, as folded DEQUANTIZEs are).
#pragma once

#include <vector>

#include "graph/graph.h"

namespace clgpu {

// Evaluates the foldable integer nodes of `nodes` in order and records their values in `g`
// (GraphView::AddFoldedInts); returns the nodes folded.
std::vector<const NodeInfo*> FoldShapeComputations(GraphView& g,
                                                   const std::vector<NodeInfo>& nodes);

// The op name of a node FoldShapeComputations may fold ("" for others), for decisions.
const char* ShapeNodeName(int32_t op);

}  // namespace clgpu
