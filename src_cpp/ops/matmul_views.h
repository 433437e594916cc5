// Chains of TRANSPOSE and RESHAPE (SQUEEZE, EXPAND_DIMS) nodes around a BATCH_MATMUL, and a MUL
// by a constant scalar after it, folded into it as strided views: attention's head split
// (RESHAPE -> TRANSPOSE -> BATCH_MATMUL), its scale and its head merge (BATCH_MATMUL -> TRANSPOSE
// -> RESHAPE) run no kernel of their own; the matmul reads and writes the tensors where they lie
// (AttachInputView / AttachOutputView). Found once per partition; whether a chain is a view
// depends on the shapes, so each plan decides (runtime/partition_plan.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

struct ViewStep {
  enum Kind { kReshape, kTranspose, kScale } kind = kReshape;
  int in = -1, out = -1;  // the node's data input and output
  std::vector<int> perm;  // kTranspose
  float scale = 1.0f;     // kScale
};

struct ViewFusion {
  size_t op = 0;     // position of the op taking the view
  int operand = -1;  // its input, or -1: its output
  // Operand: from the tensor read down to the operand. Output: from the op's output to the
  // tensor written.
  std::vector<ViewStep> steps;
  int tensor = -1;                 // the tensor read (operand) or written (output)
  std::vector<size_t> absorbed;    // the chain's nodes (positions)
  std::vector<int> intermediates;  // tensors no longer written
};

// Chains in `nodes` (one partition, in execution order) whose intermediate tensors only the
// chain reads and that are not in `outputs` (the partition's outputs).
std::vector<ViewFusion> FindViewFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                        const std::set<int>& outputs);

// The operand (or output) of `f` as a view of f.tensor for these tensor shapes, and the output's
// scale; false where the chain is no view (a RESHAPE merging axes that are not adjacent in
// memory after a TRANSPOSE).
bool ChainView(const ViewFusion& f, const std::function<Shape(int)>& shape_of, StridedView* view,
               float* scale);

// `v` (a view of some storage) seen as `shape` (the same element count) without moving data
// (numpy's no-copy reshape); false if it cannot be.
bool ReshapeView(const StridedView& v, const Shape& shape, StridedView* out);

}  // namespace clgpu
