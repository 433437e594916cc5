// DEPTH_TO_SPACE of NHWC float tensors in TFLite's DCR order: output (n, h*b + i, w*b + j, c)
// is input (n, h, w, (i*b + j)*C' + c). An index map over 6-D views (ops/strided_copy.h).
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class DepthToSpaceOp : public StridedCopyOp {
 public:
  DepthToSpaceOp(const NodeInfo& node, int block)
      : StridedCopyOp(node, {node.inputs[0]}, {node.outputs[0]}), b_(block) {}
  const char* type_name() const override { return "DEPTH_TO_SPACE"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    if (s.size() != 4 || s[3] % (b_ * b_))
      throw Error("DEPTH_TO_SPACE input " + ShapeString(s) + " does not split into " +
                  std::to_string(b_) + "x" + std::to_string(b_) + " blocks");
    return {{s[0], s[1] * b_, s[2] * b_, s[3] / (b_ * b_)}};
  }
  // Input as [N, H, W, b, b, C'], output as [N, H, b, W, b, C'].
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    InferShapes(in);
    const Shape& s = in[0];
    const int c = s[3] / (b_ * b_);
    AxisMap m;
    m.in = {s[0], s[1], s[2], b_, b_, c};
    m.out = {s[0], s[1], b_, s[2], b_, c};
    m.src = {0, 1, 3, 2, 4, 5};
    m.step = {1, 1, 1, 1, 1, 1};
    m.first.assign(6, 0);
    return {m};
  }

 private:
  int b_;
};

std::string Read(const GraphView& g, const NodeInfo& node, int* block) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  if (!node.builtin_data) return "missing DEPTH_TO_SPACE params";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  tfl::BlockSizeParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  *block = p.block_size;
  const Shape s = g.shape(node.inputs[0]);
  if (s.size() != 4) return "input is not 4-D";
  if (p.block_size < 1 || p.block_size > 4096 || s[3] % (p.block_size * p.block_size))
    return "channels " + std::to_string(s[3]) + " do not split into blocks of " +
           std::to_string(p.block_size) + "x" + std::to_string(p.block_size);
  if (NumElements(s) > INT_MAX) return "tensor has more than 2^31 - 1 elements";
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  int block = 0;
  return Read(g, node, &block);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  int block = 0;
  if (auto why = Read(g, node, &block); !why.empty()) throw Error(why);
  return std::make_unique<DepthToSpaceOp>(node, block);
}

std::string Describe(const NodeInfo& n) {
  tfl::BlockSizeParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "block_size=" + std::to_string(p.block_size);
}

}  // namespace

extern const OpHandler kDepthToSpaceHandler = {tfl::kDepthToSpace, "DEPTH_TO_SPACE", Check, Create,
                                               Describe,           OutputsWork};

}  // namespace clgpu
