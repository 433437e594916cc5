// The checks every claimed node and the graph as a whole must pass, so the delegate refuses what
// TFLite's CPU kernels refuse (their Prepare never runs for a node we claim) and never sizes a
// buffer from a shape whose element count overflows. Each returns "" or the reason, which
// becomes the node's (or every node's) decision.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// The most elements one tensor may have: the kernels index with 32-bit ints.
constexpr int64_t kMaxTensorElements = INT32_MAX;

// Elements of a shape; false for a negative dim or a count above kMaxTensorElements (the
// product is checked step by step, so no overflow on the way).
bool ElementCount(const Shape& s, int64_t* count);
// "" or why `s` cannot be a tensor of ours ("<what> [..] has N elements, above ...").
std::string CheckElementCount(const Shape& s, const std::string& what);

// Before any node is claimed: a node that reads a tensor another node writes later in the
// execution plan (or itself), or two nodes writing one tensor. TFLite's partitioner
// (tflite_runtime 2.14) crashes on such a graph, so nothing is claimed then.
std::string CheckGraphOrder(const GraphView& g, const std::vector<NodeInfo>& nodes);

// Before any node is claimed: a tensor a node writes that also holds data in the model file.
// TFLite's CPU kernels write over that data (or refuse to resize the tensor), but TFLite's
// partitioner takes the tensor for a constant that is ready before its writer runs, so a
// partition reading it may read the model's data (tflite_runtime 2.14) or the graph may crash
// in AllocateTensors (ai_edge_litert): the model is left to the CPU whole.
std::string CheckWrittenConstants(const GraphView& g, const std::vector<NodeInfo>& nodes);

// Before any node is claimed: TFLite's EXPAND_DIMS gives its output its input's type at prepare,
// whatever the model declares, so a node reading it sees that type (a float32 reader of an int32
// EXPAND_DIMS failed the partition's prepare where the CPU ran the model). Recorded in g.
void InferCpuOutputTypes(GraphView& g, const std::vector<NodeInfo>& nodes);

// What every op's node must satisfy before its handler looks at it: valid tensor indices
// (inputs may be -1, an absent optional input), shapes within
// kMaxTensorElements, and constants holding at least their declared shape's bytes.
std::string CheckNodeCommon(const GraphView& g, const NodeInfo& n);

// The node's input list: exactly `required` present inputs, then at most `optional` more, each
// present or -1 when `absent_ok` (TFLite refuses a -1 where its kernel reads the input, e.g.
// CONV_2D's bias). `op` names the node in the reason.
std::string CheckInputs(const NodeInfo& n, const char* op, int required, int optional = 0,
                        bool absent_ok = true);
// Exactly `count` outputs.
std::string CheckOutputs(const NodeInfo& n, const char* op, int count);

// Input i when it is present (in the list and not -1).
inline bool HasInput(const NodeInfo& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] >= 0;
}

}  // namespace clgpu
