// PACK (stack) of float tensors of one shape along a new axis: CONCATENATION's copy (ops/concat.h)
// with each input seen with a unit axis there; a single input is a flat copy.
#include <cstring>

#include "common/error.h"
#include "ops/concat.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 5;  // of the output, as CONCATENATION's views allow 6

std::string Read(const GraphView& g, const NodeInfo& node, int* axis) {
  if (node.inputs.empty() || node.outputs.size() != 1) return "unexpected input/output count";
  if (!node.builtin_data) return "missing PACK params";
  std::vector<int> tensors = node.inputs;
  tensors.push_back(node.outputs[0]);
  if (auto why = CheckMovedTensors(g, tensors); !why.empty()) return why;
  tfl::PackParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (p.values_count != static_cast<int>(node.inputs.size()))
    return "values_count " + std::to_string(p.values_count) + " != the input count";
  const Shape s = g.shape(node.inputs[0]);
  const int rank = static_cast<int>(s.size());
  if (rank + 1 > kMaxRank) return "output rank above " + std::to_string(kMaxRank);
  *axis = p.axis < 0 ? p.axis + rank + 1 : p.axis;
  if (*axis < 0 || *axis > rank) return "axis " + std::to_string(p.axis) + " is out of range";
  for (int t : node.inputs)
    if (g.shape(t) != s) return "inputs of different shapes";
  Shape out = s;
  out.insert(out.begin() + *axis, static_cast<int>(node.inputs.size()));
  if (out != g.shape(node.outputs[0]))
    return "the model declares output " + ShapeString(g.shape(node.outputs[0])) +
           ", the stack gives " + ShapeString(out);
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  return Read(g, node, &axis);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  if (auto why = Read(g, node, &axis); !why.empty()) throw Error(why);
  return MakePackOp(node, axis);
}

std::string Describe(const NodeInfo& n) {
  tfl::PackParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "values_count=" + std::to_string(p.values_count) + " axis=" + std::to_string(p.axis);
}

}  // namespace

extern const OpHandler kPackHandler = {tfl::kPack, "PACK", Check, Create, Describe};

}  // namespace clgpu
