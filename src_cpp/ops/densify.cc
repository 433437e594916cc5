// DENSIFY of sparse constants folded at Prepare: the expanded values (graph/sparse.h) become a
// computed constant of the graph, so the conv or DEQUANTIZE reading them sees constant weights.
#include "ops/densify.h"

#include "graph/sparse.h"
#include "tflite/builtin.h"

namespace clgpu {

const char* DensifyNodeName(int32_t op) { return op == tfl::kDensify ? "DENSIFY" : ""; }

std::vector<const NodeInfo*> FoldConstantDensifies(GraphView& graph,
                                                   const std::vector<NodeInfo>& nodes,
                                                   std::map<int, std::string>* refused) {
  std::vector<const NodeInfo*> folded;
  for (const NodeInfo& n : nodes) {
    if (n.op != tfl::kDensify) continue;
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || !graph.valid_tensor(n.inputs[0]) ||
        !graph.valid_tensor(n.outputs[0])) {
      (*refused)[n.index] = "unexpected inputs or outputs";
      continue;
    }
    const int src = n.inputs[0], out = n.outputs[0];
    if (!graph.IsConstant(src)) {
      (*refused)[n.index] = "its input is not a constant";
      continue;
    }
    if (graph.type(out) != graph.type(src) || graph.shape(out) != graph.shape(src)) {
      (*refused)[n.index] = "its output differs from its input in type or shape";
      continue;
    }
    std::vector<float> dense;
    const std::string why = DensifyConstant(graph.tensor(src), &dense);
    if (!why.empty()) {
      (*refused)[n.index] = "its sparse constant cannot be expanded: " + why;
      continue;
    }
    graph.AddComputedConstant(out, std::move(dense));
    folded.push_back(&n);
  }
  return folded;
}

}  // namespace clgpu
