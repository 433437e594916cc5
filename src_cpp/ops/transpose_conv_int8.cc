// TRANSPOSE_CONV on int8 tensors (kernels/transpose_conv_int8.cl): int32 sums and TFLite's
// per-channel requantization, bit for bit. Both runtimes run optimized_integer_ops::
// TransposeConvV2: an exact int32 GEMM and col2im, then optimized_ops::Quantize, whose NEON loop
// (LiteRT's x86 wheel) rounds the first 8 * (OC / 8) channels' ties up and whose scalar
// remainder rounds away from zero (all of them in tflite_runtime 2.14).
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "ops/transpose_conv.h"

namespace clgpu {
namespace {

class TransposeConvInt8Op : public Op {
 public:
  TransposeConvInt8Op(const GraphView& g, const NodeInfo& node, TransposeConvShape shape,
                      TransposeConvParams p)
      : Op(node, {node.inputs[2]}, {node.outputs[0]}), shape_(std::move(shape)), p_(p) {
    filter_shape_ = g.shape(node.inputs[1]);
    filter_ = ConstantInt8(g, node.inputs[1]);
    const int oc = filter_shape_[0];
    if (node.inputs.size() == 4 && node.inputs[3] >= 0)
      bias_ = ConstantInt32(g, node.inputs[3]);
    else
      bias_.assign(oc, 0);
    const QuantParams in = g.quant(node.inputs[2]), out = g.quant(node.outputs[0]);
    in_zero_ = in.zero_point[0];
    int lo = -128, hi = 127;
    QuantizedActivationRange(p.activation, out, ValueType::kInt8, &lo, &hi);
    stage_ = MakeOutputStage(in.scale[0], g.quant(node.inputs[1]).scale, oc, out,
                             VectorLoopRounding(g.cpu_kernels(), oc, 8), lo, hi);
  }

  const char* type_name() const override { return "TRANSPOSE_CONV"; }
  std::string algorithm() const override { return "int8_gather"; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {InferTransposeConvShape(shape_, p_, filter_shape_, in.at(0))};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * static_cast<double>(NumElements(in[0])) * filter_shape_[0] * filter_shape_[1] *
           filter_shape_[2];
  }
  double WeightBytes() const override { return static_cast<double>(filter_.size()); }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    if (!weights_) {
      weights_ = UploadBytes(ctx, filter_.data(), filter_.size());
      bias_buf_ = UploadBytes(ctx, bias_.data(), bias_.size() * 4);
      stage_buf_ = UploadOutputStage(ctx, stage_);
    }
    const Shape &x = in_shapes[0], &o = out_shapes[0];
    const int kh = filter_shape_[1], kw = filter_shape_[2];
    const int pad_top = TransposeConvPad(p_, o[1], p_.stride_height, kh),
              pad_left = TransposeConvPad(p_, o[2], p_.stride_width, kw);
    Launch l;
    l.name = "transpose_conv_int8";
    l.kernel = CreateKernel(*ctx.GetProgram("transpose_conv_int8"), l.name);
    SetArgs(l.kernel, in[0], weights_.get(), bias_buf_.get(), stage_buf_.get(), out[0], x[0], x[1],
            x[2], x[3], o[1], o[2], o[3], kh, kw, p_.stride_height, p_.stride_width, pad_top,
            pad_left, in_zero_, stage_.up_below, stage_.zero_point, stage_.act_min, stage_.act_max);
    l.dims = 3;
    l.global[0] = o[3], l.global[1] = o[2], l.global[2] = size_t(o[0]) * o[1];
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  TransposeConvShape shape_;
  TransposeConvParams p_;
  Shape filter_shape_;
  std::vector<int8_t> filter_;
  std::vector<int32_t> bias_;
  int in_zero_ = 0;
  OutputStage stage_;
  Buffer weights_, bias_buf_, stage_buf_;
};

}  // namespace

std::string CheckTransposeConvInt8(const GraphView& g, const NodeInfo& node) {
  const int x = node.inputs[2], w = node.inputs[1], y = node.outputs[0];
  if (g.value_type(x) != ValueType::kInt8 || g.value_type(y) != ValueType::kInt8)
    return "quantized input/output is not int8 (uint8 filters are not supported)";
  if (auto why = CheckQuantActivation(g, x, ValueType::kInt8); !why.empty()) return why;
  if (auto why = CheckQuantActivation(g, y, ValueType::kInt8); !why.empty()) return why;
  const Shape ws = g.shape(w);
  if (auto why = CheckQuantWeights(g, w, 0, ws[0]); !why.empty()) return why;
  if (node.inputs.size() == 4 && node.inputs[3] >= 0)
    if (auto why = CheckQuantBias(g, node.inputs[3], ws[0]); !why.empty()) return why;
  // Each output sums at most KH * KW * IC products of at most 255 x 128 (plus the bias).
  if (int64_t(ws[1]) * ws[2] * ws[3] * 255 * 128 > INT_MAX / 2)
    return "too many products per output for int32 sums";
  return "";
}

std::unique_ptr<Op> CreateTransposeConvInt8(const GraphView& g, const NodeInfo& node) {
  TransposeConvShape shape;
  TransposeConvParams p;
  if (auto why = ReadTransposeConv(g, node, &shape, &p); !why.empty()) throw Error(why);
  return std::make_unique<TransposeConvInt8Op>(g, node, std::move(shape), p);
}

}  // namespace clgpu
