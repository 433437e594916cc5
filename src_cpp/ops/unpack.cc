// UNPACK of a float tensor along any axis into its N slices: one index map per output
// (ops/strided_copy.h), or flat copies (no kernel) when the axes before `axis` have extent 1.
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class UnpackOp : public StridedCopyOp {
 public:
  UnpackOp(const NodeInfo& node, int axis)
      : StridedCopyOp(node, {node.inputs[0]}, node.outputs), axis_(axis) {}
  const char* type_name() const override { return "UNPACK"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    if (axis_ >= static_cast<int>(s.size()) || s[axis_] != static_cast<int>(outputs().size()))
      throw Error("UNPACK of " + ShapeString(s) + " into " + std::to_string(outputs().size()) +
                  " outputs along axis " + std::to_string(axis_));
    Shape o = s;
    o.erase(o.begin() + axis_);
    return std::vector<Shape>(outputs().size(), o);
  }
  // Output j: the input as [outer, N, inner] at index j of the middle axis.
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    InferShapes(in);
    int outer = 1, inner = 1;
    for (int a = 0; a < axis_; ++a) outer *= s[a];
    for (size_t a = axis_ + 1; a < s.size(); ++a) inner *= s[a];
    std::vector<AxisMap> maps;
    for (int j = 0; j < s[axis_]; ++j) {
      AxisMap m;
      m.in = {outer, s[axis_], inner};
      m.out = {outer, inner};
      m.src = {0, 2};
      m.step = {1, 1};
      m.first = {0, j, 0};
      maps.push_back(std::move(m));
    }
    return maps;
  }

 private:
  int axis_;
};

std::string Read(const GraphView& g, const NodeInfo& node, int* axis) {
  if (node.inputs.size() != 1 || node.outputs.empty()) return "unexpected input/output count";
  if (!node.builtin_data) return "missing UNPACK params";
  std::vector<int> tensors = {node.inputs[0]};
  tensors.insert(tensors.end(), node.outputs.begin(), node.outputs.end());
  if (auto why = CheckMovedTensors(g, tensors); !why.empty()) return why;
  tfl::UnpackParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  const Shape s = g.shape(node.inputs[0]);
  const int rank = static_cast<int>(s.size());
  *axis = p.axis < 0 ? p.axis + rank : p.axis;
  if (rank == 0 || *axis < 0 || *axis >= rank) return "axis is out of range";
  if (p.num != s[*axis] || p.num != static_cast<int>(node.outputs.size()))
    return "num " + std::to_string(p.num) + " does not match the axis extent and the outputs";
  if (NumElements(s) > INT_MAX) return "tensor has more than 2^31 - 1 elements";
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  return Read(g, node, &axis);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  if (auto why = Read(g, node, &axis); !why.empty()) throw Error(why);
  return std::make_unique<UnpackOp>(node, axis);
}

std::string Describe(const NodeInfo& n) {
  tfl::UnpackParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "num=" + std::to_string(p.num) + " axis=" + std::to_string(p.axis);
}

}  // namespace

extern const OpHandler kUnpackHandler = {tfl::kUnpack, "UNPACK", Check,
                                         Create,       Describe, OutputsWork};

}  // namespace clgpu
