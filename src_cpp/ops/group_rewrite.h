// Rewrites of a group of a partition's nodes into one op (a layer norm's ten nodes into one
// kernel): found once per partition when it is built; the partition then creates the group's op
// in place of its nodes' (runtime/partition.cc), and the cost model counts one launch for them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

struct GroupRewrite {
  std::vector<size_t> nodes;  // positions in the node list, ascending; the op runs at the last
  // The group as one node for the other fusions: its index is the last node's, op -1 (no
  // handler), the op's inputs and its one output.
  NodeInfo info;
  std::function<std::unique_ptr<Op>(const GraphView&)> make;
};

// Non-overlapping groups of `nodes` (one partition, in execution order) whose intermediate
// tensors only the group reads and that are not in `outputs` (the partition's outputs).
std::vector<GroupRewrite> FindGroupRewrites(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                            const std::set<int>& outputs);

// The rewrites, each in its own file.
std::vector<GroupRewrite> FindLayerNorms(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                         const std::set<int>& outputs);

}  // namespace clgpu
