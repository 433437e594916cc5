// L2_NORMALIZATION of float values over the last axis (Swin V2's cosine attention normalizes its
// queries and keys; face-embedding heads their output): x / max(|x|, 1e-6) per row, one group per
// row (kernels/layer_norm.cl, l2_normalize). Its integer form (output scale 1/128) stays on the
// CPU.
#include <cstring>

#include "ops/op.h"
#include "ops/op_helpers.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr size_t kGroup = 64;  // L2_WG of kernels/layer_norm.cl

class L2NormOp : public Op {
 public:
  explicit L2NormOp(const NodeInfo& node) : Op(node, {node.inputs[0]}, {node.outputs[0]}) {}

  const char* type_name() const override { return "L2_NORMALIZATION"; }
  std::string algorithm() const override { return "row_per_group"; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 3.0 * double(NumElements(in[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const Shape& s = in_shapes[0];
    const int64_t c = s.empty() ? 1 : s.back();
    const int64_t rows = c > 0 ? NumElements(s) / c : 0;
    Launch l;
    l.name = "l2_normalize";
    l.kernel = CreateKernel(*ctx.GetProgram("layer_norm"), l.name);
    SetArgs(l.kernel, in[0], out[0], static_cast<int>(c));
    l.global[0] = static_cast<size_t>(rows) * kGroup;
    l.local[0] = kGroup;
    launches_.clear();
    launches_.push_back(std::move(l));
  }
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (!g.valid_tensor(x) || !g.valid_tensor(y)) return "invalid tensor index";
  if (auto why = CheckFloatTensors(g, {x, y}); !why.empty()) return why;
  int act = 0;
  if (node.builtin_data) std::memcpy(&act, node.builtin_data, sizeof act);
  if (act != 0) return "fused activation " + std::to_string(act) + " (TFLite's kernel takes none)";
  if (g.shape(x).empty()) return "a scalar input";
  if (g.shape(x) != g.shape(y)) return "output shape differs from the input's";
  return "";
}

std::unique_ptr<Op> Create(const GraphView&, const NodeInfo& node) {
  return std::make_unique<L2NormOp>(node);
}

}  // namespace

extern const OpHandler kL2NormalizationHandler = {tfl::kL2Normalization, "L2_NORMALIZATION", Check,
                                                  Create};

}  // namespace clgpu
