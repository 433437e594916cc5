// DENSIFY nodes of sparse constants, folded at Prepare like FLOAT16 DEQUANTIZEs (MediaPipe stores
// pruned conv weights this way, often FLOAT16 behind a DEQUANTIZE too). The folded nodes run
// nothing: they are claimed with their consumers (delegate/claim.h says where they may go).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// The DENSIFY nodes of sparse FLOAT32/FLOAT16 constants: each output is expanded now and
// registered with `graph` as a computed constant, so a DEQUANTIZE reading it folds too. A DENSIFY
// that cannot be expanded gets its reason in `refused`.
std::vector<const NodeInfo*> FoldConstantDensifies(GraphView& graph,
                                                   const std::vector<NodeInfo>& nodes,
                                                   std::map<int, std::string>* refused);

// "DENSIFY" for a DENSIFY node's op code, "" for others (decisions).
const char* DensifyNodeName(int32_t op);

}  // namespace clgpu
