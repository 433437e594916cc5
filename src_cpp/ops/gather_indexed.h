// GATHER whose positions are computed at run time (an int32 tensor, not a constant) and
// EMBEDDING_LOOKUP: one kernel reading rows through the index tensor (kernels/gather_indexed.cl).
#pragma once

#include <memory>
#include <string>

#include "graph/graph.h"
#include "ops/op.h"

namespace clgpu {

// GATHER with run-time int32 positions: "" if claimed, else why not (ops/gather.cc asks).
std::string CheckIndexedGather(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateIndexedGather(const GraphView& g, const NodeInfo& node);

}  // namespace clgpu
