// DEPTHWISE_CONV_2D on int8 tensors (per-channel or per-tensor int8 weights, int32 bias): int32
// accumulation and TFLite's requantization per output channel (depthwise_conv2d_int8.cl). TFLite
// requantizes depthwise outputs in its own code, not ruy's: scalar (ties away from zero) in
// tflite_runtime 2.14's x86 build, a NEON loop over 8 channels and the scalar code for the rest
// in LiteRT's (ops/quant.h).
#include <cstring>

#include "common/error.h"
#include "ops/conv_geometry.h"
#include "ops/gemm_int8.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kNeonChannels = 8;  // channels per iteration of TFLite's NEON output loop

class DepthwiseConv2dInt8Op : public Op, public FoldTarget, public FoldSource {
 public:
  DepthwiseConv2dInt8Op(const GraphView& g, const NodeInfo& node, const tfl::DepthwiseConvParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), params_(p) {
    litert_ = g.cpu_kernels().litert;
    filter_shape_ = g.shape(node.inputs[1]);
    filter_ = ConstantInt8(g, node.inputs[1]);
    const int oc = filter_shape_[3];
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
                             VectorLoopRounding(g.cpu_kernels(), oc, kNeonChannels), lo, hi);
  }

  const char* type_name() const override { return "DEPTHWISE_CONV_2D"; }
  std::string algorithm() const override { return c4_ ? "int8_direct_c4" : "int8_direct"; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  bool TakesTable() const override { return true; }

  ConvGeometry Geometry(const Shape& in) const {
    if (in.size() != 4 || in[3] <= 0 || filter_shape_[3] % in[3] != 0)
      throw Error("DEPTHWISE_CONV_2D input " + ShapeString(in) + " does not match filter " +
                  ShapeString(filter_shape_));
    ConvGeometry g;
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
    g.oc = filter_shape_[3], g.kh = filter_shape_[1], g.kw = filter_shape_[2];
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.dh = params_.dilation_height, g.dw = params_.dilation_width;
    g.Compute(params_.padding, folded_pad());
    return g;
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    CheckConvInputRows("DEPTHWISE_CONV_2D", in[0], litert_);
    const ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const ConvGeometry g = Geometry(in[0]);
    return 2.0 * g.n * g.oh * g.ow * g.oc * g.kh * g.kw;
  }
  double WeightBytes() const override {
    return double(filter_buf_.bytes() + bias_buf_.bytes() + stage_buf_.bytes());
  }

  // The form the pointwise GEMM computes as its A: depth multiplier 1 over channels in fours,
  // nothing folded into this op (its own activation is in its stage).
  bool GetInt8Depthwise(OpContext& ctx, const Shape& in, Int8DepthwiseA* dw) override {
    if (in.size() != 4 || filter_shape_[3] != in[3] || in[3] % 4 || has_epilogue() ||
        has_folded_clamp() || has_residual() || has_output_view())
      return false;
    Upload(ctx);
    dw->g = Geometry(in);
    dw->filter = filter_buf_.get(), dw->bias = bias_buf_.get(), dw->stage = stage_buf_.get();
    dw->in_zero = in_zero_, dw->up_below = stage_.up_below;
    dw->act_min = stage_.act_min, dw->act_max = stage_.act_max;
    return true;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    Upload(ctx);
    cl_mem stage = stage_buf_.get();
    if (!epilogue_table().empty()) {
      OutputStage s = stage_;
      s.table = epilogue_table();
      table_stage_ = UploadOutputStage(ctx, s);
      stage = table_stage_.get();
    }
    // Four channels per work-item where the channels allow it.
    c4_ = g.oc == g.c && g.c % 4 == 0;
    Launch l;
    l.name = c4_ ? "depthwise_conv2d_int8_c4" : "depthwise_conv2d_int8";
    l.kernel = CreateKernel(*ctx.GetProgram("depthwise_conv2d_int8"), l.name);
    SetArgs(l.kernel, in[0], filter_buf_.get(), bias_buf_.get(), stage, out[0], g.n, g.h, g.w, g.c,
            g.oh, g.ow, g.oc / g.c, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left,
            in_zero_, stage_.up_below, stage_.zero_point, stage_.act_min, stage_.act_max);
    l.dims = 3;
    l.global[0] = c4_ ? g.oc / 4 : g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
    // Work-groups of 64, channels first, then columns (the kernel checks its bounds): on the
    // H200 MobileNetV2 int8 ran faster than with the driver's choice.
    size_t lx = 1;
    while (lx < 64 && lx < l.global[0]) lx *= 2;
    const size_t ly = 64 / lx;
    l.local[0] = lx, l.local[1] = ly, l.local[2] = 1;
    l.global[0] = RoundUp(l.global[0], lx), l.global[1] = RoundUp(l.global[1], ly);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  void Upload(OpContext& ctx) {
    if (filter_buf_) return;
    filter_buf_ = UploadBytes(ctx, filter_.data(), filter_.size());
    bias_buf_ = UploadBytes(ctx, bias_.data(), bias_.size() * 4);
    stage_buf_ = UploadOutputStage(ctx, stage_);
  }

  tfl::DepthwiseConvParams params_;
  bool litert_ = false;  // the CPU kernels are LiteRT's (CheckConvInputRows)
  Shape filter_shape_;
  std::vector<int8_t> filter_;
  std::vector<int32_t> bias_;
  int in_zero_ = 0;
  OutputStage stage_;
  Buffer filter_buf_, bias_buf_, stage_buf_;
  Buffer table_stage_;  // the stage with a folded table
  bool c4_ = false;
};

}  // namespace

std::string CheckDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node) {
  return CheckInt8FilterOp(g, node, 3, g.shape(node.inputs[1]).at(3));
}

std::unique_ptr<Op> CreateDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node) {
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<DepthwiseConv2dInt8Op>(g, node, p);
}

}  // namespace clgpu
