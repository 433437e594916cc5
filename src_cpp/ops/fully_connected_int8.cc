// FULLY_CONNECTED on int8 tensors (per-tensor or per-channel int8 weights, int32 bias): the int8
// GEMM (ops/gemm_int8.h) over the input's rows, with ruy's requantization as TFLite's CPU kernel.
#include <cstring>

#include "common/error.h"
#include "ops/gemm_int8.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class FullyConnectedInt8Op : public Op, public FoldTarget, public FoldSource {
 public:
  FullyConnectedInt8Op(const GraphView& g, const NodeInfo& node, const tfl::FullyConnectedParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), keep_num_dims_(p.keep_num_dims) {
    const Shape w = g.shape(node.inputs[1]);
    n_ = w[0], k_ = w[1];
    weights_ = ConstantInt8(g, node.inputs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) bias_ = ConstantInt32(g, node.inputs[2]);
    const QuantParams in = g.quant(node.inputs[0]), out = g.quant(node.outputs[0]);
    in_zero_ = in.zero_point[0];
    int lo = -128, hi = 127;
    QuantizedActivationRange(p.activation, out, ValueType::kInt8, &lo, &hi);
    stage_ = MakeOutputStage(in.scale[0], g.quant(node.inputs[1]).scale, n_, out, RuyRounding(n_),
                             lo, hi);
  }

  const char* type_name() const override { return "FULLY_CONNECTED"; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  bool TakesTable() const override { return true; }
  std::string algorithm() const override {
    return (split_ ? "int8_gemm_splitk/" : "int8_gemm/") + dot_;
  }

  int Rows(const Shape& in) const {
    const int64_t total = NumElements(in);
    if (total % k_ != 0)
      throw Error("FULLY_CONNECTED input " + ShapeString(in) +
                  " is not a multiple of K=" + std::to_string(k_));
    return static_cast<int>(total / k_);
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const int m = Rows(in[0]);
    if (!keep_num_dims_) return {{m, n_}};
    if (in[0].empty() || in[0].back() != k_)
      throw Error("FULLY_CONNECTED keep_num_dims needs the last input dim == K");
    Shape out = in[0];
    out.back() = n_;
    return {out};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * Rows(in[0]) * double(n_) * k_;
  }
  double WeightBytes() const override {
    return double(w_.b.bytes() + w_.bias.bytes() + w_.stage.bytes());
  }

  // One row in, the shape of the vector a squeeze's MEAN (or the dense op before) leaves.
  bool GetInt8Dense(OpContext& ctx, const Shape& in, Int8Dense* dense) override {
    // A table per channel: the squeeze's kernel maps through one (kernels/squeeze_int8.cl).
    if (has_residual() || NumElements(in) != k_ || epilogue_table().size() > 256) return false;
    if (!w_.b) w_ = PrepareInt8Gemm(ctx, weights_, n_, k_, bias_, in_zero_, stage_);
    dense->w = &w_;
    dense->stage = stage_;
    dense->stage.table = epilogue_table();
    return true;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    if (!w_.b) w_ = PrepareInt8Gemm(ctx, weights_, n_, k_, bias_, in_zero_, stage_);
    OutputStage stage = stage_;
    stage.table = epilogue_table();
    const int m = Rows(in_shapes[0]);
    launches_ = EncodeInt8Gemm(ctx, w_, in[0], out[0], m, in_zero_, stage, &state_, nullptr, &dot_);
    split_ = Int8GemmSplits(ctx, m, n_, k_);
  }

 private:
  bool keep_num_dims_;
  int n_ = 0, k_ = 0;
  std::vector<int8_t> weights_;
  std::vector<int32_t> bias_;
  int in_zero_ = 0;
  OutputStage stage_;
  Int8GemmWeights w_;
  Int8GemmState state_;  // the buffers its launch uses beyond the weights
  std::string dot_;
  bool split_ = false;
};

}  // namespace

std::string CheckFullyConnectedInt8(const GraphView& g, const NodeInfo& node) {
  const Shape w = g.shape(node.inputs[1]);
  if (w.size() != 2 || w[1] <= 0) return "weights must be 2-D [N, K] with K > 0";
  if (NumElements(g.shape(node.inputs[0])) % w[1] != 0) return "input size is not a multiple of K";
  return CheckInt8FilterOp(g, node, 0, w[0]);
}

std::unique_ptr<Op> CreateFullyConnectedInt8(const GraphView& g, const NodeInfo& node) {
  tfl::FullyConnectedParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<FullyConnectedInt8Op>(g, node, p);
}

}  // namespace clgpu
