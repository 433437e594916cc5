#include "graph/validate.h"

#include <map>

#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Bytes per element of the types a constant of ours may have; 0 for the others.
size_t TypeBytes(TfLiteType t) {
  switch (t) {
    case kTfLiteFloat32:
    case kTfLiteInt32:
      return 4;
    case kTfLiteInt64:
      return 8;
    case kTfLiteFloat16:
    case kTfLiteInt16:
      return 2;
    case kTfLiteInt8:
    case kTfLiteUInt8:
    case kTfLiteBool:
      return 1;
    default:
      return 0;
  }
}

std::string Count(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

}  // namespace

bool ElementCount(const Shape& s, int64_t* count) {
  int64_t n = 1;
  for (int d : s) {
    if (d < 0) return false;
    if (d != 0 && n > kMaxTensorElements / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

std::string CheckElementCount(const Shape& s, const std::string& what) {
  int64_t n = 0;
  if (ElementCount(s, &n)) return "";
  for (int d : s)
    if (d < 0) return what + " " + ShapeString(s) + " has a negative dimension";
  return what + " " + ShapeString(s) + " has more than " + std::to_string(kMaxTensorElements) +
         " elements (the device kernels index tensors with 32-bit integers)";
}

std::string CheckGraphOrder(const GraphView& g, const std::vector<NodeInfo>& nodes) {
  std::map<int, size_t> writer;  // tensor -> position in the plan of the node writing it
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].outputs) {
      if (t < 0) continue;
      if (auto [it, fresh] = writer.emplace(t, i); !fresh)
        return "tensor " + (g.valid_tensor(t) ? g.name(t) : std::to_string(t)) +
               " is written by nodes " + std::to_string(nodes[it->second].index) + " and " +
               std::to_string(nodes[i].index);
    }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs)
      if (auto it = writer.find(t); it != writer.end() && it->second >= i)
        return "node " + std::to_string(nodes[i].index) + " reads tensor " +
               (g.valid_tensor(t) ? g.name(t) : std::to_string(t)) + " before node " +
               std::to_string(nodes[it->second].index) + " writes it";
  return "";
}

std::string CheckWrittenConstants(const GraphView& g, const std::vector<NodeInfo>& nodes) {
  for (const NodeInfo& n : nodes)
    for (int t : n.outputs) {
      if (!g.valid_tensor(t)) continue;
      const TfLiteTensor& x = g.tensor(t);
      if (x.allocation_type == kTfLiteMmapRo && x.data.raw != nullptr)
        return "tensor " + g.name(t) + ", written by node " + std::to_string(n.index) +
               ", also holds " + Count(x.bytes, "byte") + " of data in the model";
    }
  return "";
}

void InferCpuOutputTypes(GraphView& g, const std::vector<NodeInfo>& nodes) {
  for (const NodeInfo& n : nodes) {
    if (!tfl::OutputTakesInputType(n.op) || n.inputs.empty() || n.outputs.size() != 1) continue;
    const int in = n.inputs[0], out = n.outputs[0];
    if (g.valid_tensor(in) && g.valid_tensor(out) && g.type(in) != g.type(out))
      g.SetInferredType(out, g.type(in));
  }
}

std::string CheckNodeCommon(const GraphView& g, const NodeInfo& n) {
  for (int t : n.inputs) {
    if (t == -1) continue;  // an absent optional input: the op's own check says if it may be
    if (!g.valid_tensor(t)) return "input tensor index " + std::to_string(t) + " is invalid";
  }
  for (int t : n.outputs)
    if (!g.valid_tensor(t)) return "output tensor index " + std::to_string(t) + " is invalid";
  for (const auto* list : {&n.inputs, &n.outputs})
    for (int t : *list) {
      if (t < 0 || !g.tensor(t).dims) continue;
      if (auto why = CheckElementCount(g.shape(t), "tensor " + g.name(t)); !why.empty()) return why;
      // TFLite checks a constant's bytes against its shape when it loads the model; a folded
      // DEQUANTIZE's output is checked against its source when it is folded.
      const TfLiteTensor& x = g.tensor(t);
      const size_t eb = TypeBytes(x.type);
      if (g.IsConstant(t) && !g.IsFoldedDequantizeOutput(t) && eb &&
          x.bytes < size_t(NumElements(g.shape(t))) * eb)
        return "constant " + g.name(t) + " holds " + Count(x.bytes, "byte") + ", its shape " +
               ShapeString(g.shape(t)) + " needs " + std::to_string(NumElements(g.shape(t)) * eb);
    }
  return "";
}

std::string CheckInputs(const NodeInfo& n, const char* op, int required, int optional,
                        bool absent_ok) {
  const int count = static_cast<int>(n.inputs.size());
  if (count < required || count > required + optional) {
    const std::string want =
        optional ? std::to_string(required) + " to " + std::to_string(required + optional)
                 : std::to_string(required);
    return std::string(op) + " takes " + want + " inputs, the node has " + std::to_string(count);
  }
  for (int i = 0; i < count; ++i)
    if (n.inputs[i] < 0 && (i < required || !absent_ok))
      return std::string(op) + " input " + std::to_string(i) + " is absent (-1)";
  return "";
}

std::string CheckOutputs(const NodeInfo& n, const char* op, int count) {
  if (static_cast<int>(n.outputs.size()) == count) return "";
  return std::string(op) + " has " + Count(count, "output") + ", the node " +
         std::to_string(n.outputs.size());
}

}  // namespace clgpu
