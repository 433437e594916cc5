// TRANSPOSE with a constant permutation, ranks 1-6.
#include "common/error.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

class TransposeOp : public Op {
 public:
  TransposeOp(const NodeInfo& node, std::vector<int> perm)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), perm_(std::move(perm)) {}

  const char* type_name() const override { return "TRANSPOSE"; }
  std::string algorithm() const override { return "gather"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != perm_.size())
      throw Error("TRANSPOSE input " + ShapeString(in[0]) + " does not match the permutation");
    Shape out(perm_.size());
    for (size_t i = 0; i < perm_.size(); ++i) out[i] = in[0][perm_[i]];
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape& s = in_shapes[0];
    const int rank = static_cast<int>(s.size());
    std::vector<int> in_strides(rank, 1);
    for (int i = rank - 2; i >= 0; --i) in_strides[i] = in_strides[i + 1] * s[i + 1];
    std::vector<int> meta(out_shapes[0].begin(), out_shapes[0].end());
    for (int i = 0; i < rank; ++i) meta.push_back(in_strides[perm_[i]]);
    meta_ = UploadInts(ctx, meta);
    const int total = static_cast<int>(NumElements(s));
    auto prog = ctx.GetProgram("transpose");
    Launch l;
    l.name = "transpose_nd";
    l.kernel = CreateKernel(*prog, l.name);
    SetArgs(l.kernel, in[0], out[0], total, rank, meta_.get());
    l.global[0] = total;
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  std::vector<int> perm_;
  Buffer meta_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  if (!g.IsConstant(node.inputs[1])) return "permutation is not constant";
  const Shape s = g.shape(node.inputs[0]);
  if (s.empty() || s.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  std::vector<int64_t> perm;
  try {
    perm = g.ConstantInts(node.inputs[1]);
  } catch (const Error& e) {
    return e.what();
  }
  if (perm.size() != s.size()) return "permutation length != rank";
  std::vector<bool> seen(s.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[p]) return "invalid permutation";
    seen[p] = true;
  }
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  std::vector<int> perm;
  for (int64_t p : g.ConstantInts(node.inputs[1])) perm.push_back(static_cast<int>(p));
  return std::make_unique<TransposeOp>(node, std::move(perm));
}

}  // namespace

extern const OpHandler kTransposeHandler = {tfl::kTranspose, "TRANSPOSE", Check, Create};

}  // namespace clgpu
