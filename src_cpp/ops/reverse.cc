// REVERSE_V2 along one constant axis: BirdNET's mel spectrogram flips its bins (highest first)
// before the network; left on the CPU it split the front end from the network. An index map
// (ops/strided_copy.h) that walks the axis from its end.
#include <algorithm>

#include "common/error.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 8;

class ReverseOp : public StridedCopyOp {
 public:
  ReverseOp(const NodeInfo& node, int axis)
      : StridedCopyOp(node, {node.inputs[0]}, {node.outputs[0]}), axis_(axis) {}
  const char* type_name() const override { return "REVERSE_V2"; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    const int rank = static_cast<int>(s.size());
    const int axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank) throw Error("REVERSE_V2 axis out of range");
    AxisMap m;
    m.in = m.out = s;
    m.first.assign(rank, 0);
    for (int d = 0; d < rank; ++d) {
      m.src.push_back(d);
      m.step.push_back(d == axis ? -1 : 1);
    }
    m.first[axis] = std::max(s[axis] - 1, 0);
    return {m};
  }

 private:
  int axis_;
};

std::string ReadAxis(const GraphView& g, const NodeInfo& node, int* axis) {
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(node.inputs[1], "axis", &v); !why.empty()) return why;
  // Several axes: tflite_runtime 2.14 reverses the first alone, ai_edge_litert 2.3 all of them
  // (contiguous ones only): no one answer to match.
  if (v.size() != 1) return "REVERSE_V2 over " + std::to_string(v.size()) + " axes";
  const int rank = static_cast<int>(g.shape(node.inputs[0]).size());
  if (v[0] < -rank || v[0] >= rank) return "axis " + std::to_string(v[0]) + " out of range";
  *axis = static_cast<int>(v[0]);
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (auto why = CheckMovedTensors(g, {x, y}); !why.empty()) return why;
  if (g.IsConstant(x)) return "a constant input (the constant fold's case)";
  if (g.shape(x).empty() || g.shape(x).size() > kMaxRank)
    return "rank must be 1-" + std::to_string(kMaxRank);
  if (g.shape(x) != g.shape(y)) return "output shape differs from the input's";
  int axis = 0;
  return ReadAxis(g, node, &axis);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  if (auto why = ReadAxis(g, node, &axis); !why.empty()) throw Error(why);
  return std::make_unique<ReverseOp>(node, axis);
}

}  // namespace

extern const OpHandler kReverseV2Handler = {tfl::kReverseV2, "REVERSE_V2", Check,
                                            Create,          nullptr,      OutputsWork};

}  // namespace clgpu
