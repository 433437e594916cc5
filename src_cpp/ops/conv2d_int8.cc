// CONV_2D on int8 tensors (per-tensor or per-channel int8 weights, int32 bias): int32
// accumulation and TFLite's requantization, bit for bit. Algorithms whose integer result is
// exact: the implicit GEMM (any geometry), the plain GEMM for 1x1 (both gemm_int8.cl, the
// device's dot-product instruction) and the direct kernel (conv2d_int8.cl, forced for tests);
// never Winograd, whose transforms leave the integers. TFLite runs int8 convolutions through
// ruy, whose multiplier rounds every tie up (ops/quant.h).
#include <cstring>
#include <map>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/conv_geometry.h"
#include "ops/gemm_int8.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {

namespace {

enum class Algo { kDirect, kImplicitGemm, kGemm1x1 };

class Conv2dInt8Op : public Op {
 public:
  Conv2dInt8Op(const GraphView& g, const NodeInfo& node, const tfl::ConvParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), params_(p) {
    filter_shape_ = g.shape(node.inputs[1]);
    filter_ = ConstantInt8(g, node.inputs[1]);
    const int oc = filter_shape_[0];
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      bias_ = ConstantInt32(g, node.inputs[2]);
    } else {
      bias_.assign(oc, 0);
    }
    const QuantParams in = g.quant(node.inputs[0]), out = g.quant(node.outputs[0]);
    in_zero_ = in.zero_point[0];
    int lo = -128, hi = 127;
    QuantizedActivationRange(p.activation, out, ValueType::kInt8, &lo, &hi);
    stage_ = MakeOutputStage(in.scale[0], g.quant(node.inputs[1]).scale, oc, out,
                             RuyRounding(oc), lo, hi);
  }

  const char* type_name() const override { return "CONV_2D"; }
  std::string algorithm() const override {
    return algo_ == Algo::kDirect         ? "int8_direct"
           : algo_ == Algo::kImplicitGemm ? "int8_implicit_gemm/" + dot_
                                          : "int8_gemm/" + dot_;
  }

  ConvGeometry Geometry(const Shape& in) const {
    ConvGeometry g;
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
    g.oc = filter_shape_[0], g.kh = filter_shape_[1], g.kw = filter_shape_[2];
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.dh = params_.dilation_height, g.dw = params_.dilation_width;
    g.Compute(params_.padding);
    return g;
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != 4 || in[0][3] != filter_shape_[3])
      throw Error("CONV_2D input " + ShapeString(in[0]) + " does not match filter " +
                  ShapeString(filter_shape_));
    const ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * Geometry(in[0]).Macs();
  }
  double WeightBytes() const override {
    double n = 0;
    for (const auto& [a, w] : gemm_) n += double(w.b.bytes() + w.bias.bytes() + w.stage.bytes());
    for (const Buffer* b : {&direct_filter_, &direct_bias_, &direct_stage_}) n += double(b->bytes());
    return n;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    algo_ = Choose(ctx, g);
    launches_.clear();
    if (algo_ == Algo::kDirect) {
      if (!direct_filter_) {
        direct_filter_ = UploadBytes(ctx, filter_.data(), filter_.size());
        direct_bias_ = UploadBytes(ctx, bias_.data(), bias_.size() * 4);
        direct_stage_ = UploadOutputStage(ctx, stage_);
      }
      Launch l;
      l.name = "conv2d_int8_direct";
      l.kernel = CreateKernel(*ctx.GetProgram("conv2d_int8"), l.name);
      SetArgs(l.kernel, in[0], direct_filter_.get(), direct_bias_.get(), direct_stage_.get(),
              out[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw,
              g.pad_top, g.pad_left, in_zero_, stage_.up_below, stage_.zero_point, stage_.act_min,
              stage_.act_max);
      l.dims = 3;
      l.global[0] = g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
      launches_.push_back(std::move(l));
      return;
    }
    // One packed filter serves both GEMM algorithms: OHWI is already [OC][KH * KW * C].
    auto it = gemm_.find(0);
    if (it == gemm_.end())
      it = gemm_
               .emplace(0, PrepareInt8Gemm(ctx, filter_, g.oc, g.kh * g.kw * g.c, bias_, in_zero_,
                                           stage_))
               .first;
    const int m = g.n * g.oh * g.ow;
    launches_ = EncodeInt8Gemm(ctx, it->second, in[0], out[0], m, in_zero_, stage_,
                               algo_ == Algo::kImplicitGemm ? &g : nullptr, &dot_);
  }

 private:
  // The forced algorithm (option conv_algorithm) where it applies, else the 1x1 GEMM for
  // pointwise layers and the implicit GEMM for the rest.
  static Algo Choose(const OpContext& ctx, const ConvGeometry& g) {
    const std::string& f = ctx.options.conv_algorithm;
    const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 &&
                           g.pad_left == 0 && g.oh == g.h && g.ow == g.w;
    if (f == "direct") return Algo::kDirect;
    if (f == "implicit_gemm") return Algo::kImplicitGemm;
    return pointwise ? Algo::kGemm1x1 : Algo::kImplicitGemm;
  }

  tfl::ConvParams params_;
  Shape filter_shape_;
  std::vector<int8_t> filter_;
  std::vector<int32_t> bias_;
  int in_zero_ = 0;
  OutputStage stage_;
  Algo algo_ = Algo::kImplicitGemm;
  std::string dot_;
  std::map<int, Int8GemmWeights> gemm_;
  Buffer direct_filter_, direct_bias_, direct_stage_;
};

}  // namespace

std::string CheckConv2dInt8(const GraphView& g, const NodeInfo& node) {
  const Shape f = g.shape(node.inputs[1]);
  if (f.size() != 4) return "filter must be 4-D";
  return CheckInt8FilterOp(g, node, 0, f[0]);
}

std::unique_ptr<Op> CreateConv2dInt8(const GraphView& g, const NodeInfo& node) {
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<Conv2dInt8Op>(g, node, p);
}

}  // namespace clgpu
