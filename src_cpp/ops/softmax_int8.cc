// SOFTMAX on int8 / uint8 tensors (kernels/softmax_int8.cl), bit for bit with the kernel both
// runtimes' x86 wheels run: optimized_ops::Softmax over a float table of exp (the uint16 table
// variant is built on aarch64 with clang only). The table is computed here with the host's expf,
// the same libm the CPU kernel's Prepare calls.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "ops/squeeze.h"

namespace clgpu {
namespace {

constexpr size_t kMaxGroup = 256;  // SMQ_LOCAL in kernels/softmax_int8.cl

class SoftmaxInt8Op : public Op, public FoldSource, public RowChunker<SoftmaxInt8Op> {
 public:
  SoftmaxInt8Op(const GraphView& g, const NodeInfo& node, float beta)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), type_(g.value_type(node.inputs[0])) {
    const QuantParams in = g.quant(node.inputs[0]), out = g.quant(node.outputs[0]);
    // PopulateSoftmaxLookupTable: table[255 - v] = exp(-scale * beta * v), in float.
    const float scale = -in.scale[0] * beta;
    for (int v = 0; v <= 255; ++v) table_[255 - v] = std::exp(scale * static_cast<float>(v));
    out_scale_ = out.scale[0];
    zero_point_ = out.zero_point[0];
  }
  explicit SoftmaxInt8Op(const SoftmaxInt8Op& whole)
      : Op(whole.node_index()),
        type_(whole.type_),
        table_(whole.table_),
        out_scale_(whole.out_scale_),
        zero_point_(whole.zero_point_) {}

  const char* type_name() const override { return "SOFTMAX"; }
  std::string algorithm() const override { return "int8_table"; }
  const Chunker* chunker() const override { return this; }
  FoldSource* fold_source() override { return this; }
  // The squeeze's int8 kernel stores int8 (not uint8) integers.
  bool GetSqueezeSoftmax(OpContext& ctx, int n, bool int8, SqueezeSoftmax* softmax) override {
    if (!int8 || type_ != ValueType::kInt8 || n <= 0 || n > kMaxSqueezeSoftmax) return false;
    softmax->table = Table(ctx);
    softmax->out_scale = out_scale_;
    softmax->zero_point = zero_point_;
    return true;
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].empty()) throw Error("SOFTMAX of a scalar");
    return {in[0]};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return 4.0 * static_cast<double>(NumElements(out[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    launches_.clear();
    const Shape& s = in_shapes[0];
    const int d = s.back();
    const int rows = d == 0 ? 0 : static_cast<int>(NumElements(s) / d);
    if (rows == 0) return;
    const cl_mem table = Table(ctx);
    Launch l;
    l.name = "softmax_int8";
    l.kernel = CreateKernel(
        *ctx.GetProgram("softmax_int8", type_ == ValueType::kUInt8 ? "-DQUANT_UINT8" : ""), l.name);
    const size_t group = RowGroup(ctx, l.kernel, kMaxGroup, d);
    l.local[0] = group;
    l.global[0] = static_cast<size_t>(rows) * group;
    SetArgs(l.kernel, in[0], out[0], table, rows, d, out_scale_, zero_point_);
    launches_.push_back(std::move(l));
  }

 private:
  cl_mem Table(OpContext& ctx) {
    if (!table_buf_)
      table_buf_ = UploadFloat32(ctx, std::vector<float>(table_.begin(), table_.end()));
    return table_buf_.get();
  }

  ValueType type_;
  std::array<float, 256> table_{};
  float out_scale_ = 0;
  int zero_point_ = 0;
  Buffer table_buf_;
};

}  // namespace

std::string CheckSoftmaxInt8(const GraphView& g, const NodeInfo& node) {
  const ValueType t = g.value_type(node.inputs[0]);
  for (int x : {node.inputs[0], node.outputs[0]})
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  const QuantParams out = g.quant(node.outputs[0]);
  // SoftmaxPrepare's own demands on an int8 output (the CPU fails without them too).
  if (t == ValueType::kInt8 &&
      (out.zero_point[0] != -128 || std::fabs(out.scale[0] - 1.f / 256) > 0.001f * 1.f / 256))
    return "int8 SOFTMAX output is not quantized with scale 1/256 and zero point -128";
  return "";
}

std::unique_ptr<Op> CreateSoftmaxInt8(const GraphView& g, const NodeInfo& node, float beta) {
  return std::make_unique<SoftmaxInt8Op>(g, node, beta);
}

}  // namespace clgpu
