// DEPTHWISE_CONV_2D: claim check, shapes, weights and launches.
#include <cstring>

#include "common/error.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class DepthwiseConv2dOp : public Op {
 public:
  DepthwiseConv2dOp(const GraphView& g, const NodeInfo& node, const tfl::DepthwiseConvParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), params_(p) {
    filter_shape_ = g.shape(node.inputs[1]);
    filter_ = g.ConstantFloats(node.inputs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      bias_ = g.ConstantFloats(node.inputs[2]);
    } else {
      bias_.assign(filter_shape_[3], 0.f);
    }
    ActivationRange(p.activation, &act_min_, &act_max_);
  }

  const char* type_name() const override { return "DEPTHWISE_CONV_2D"; }
  std::string algorithm() const override { return "depthwise_fast"; }

  ConvGeometry Geometry(const Shape& in) const {
    ConvGeometry g;
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
    g.oc = filter_shape_[3], g.kh = filter_shape_[1], g.kw = filter_shape_[2];
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.dh = params_.dilation_height, g.dw = params_.dilation_width;
    if (in.size() != 4 || g.c <= 0 || g.oc % g.c != 0)
      throw Error("DEPTHWISE_CONV_2D input " + ShapeString(in) + " does not match filter " +
                  ShapeString(filter_shape_));
    g.Compute(params_.padding);
    return g;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != 4) throw Error("DEPTHWISE_CONV_2D needs a 4-D input");
    const ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }

  double WeightBytes() const override { return double(filter_buf_.bytes() + bias_buf_.bytes()); }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const ConvGeometry g = Geometry(in[0]);
    return 2.0 * g.n * g.oh * g.ow * g.oc * g.kh * g.kw;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    if (!filter_buf_) {
      filter_buf_ = UploadWeights(ctx, filter_);
      bias_buf_ = UploadFloat32(ctx, bias_);
    }
    auto prog = ctx.GetProgram("depthwise_conv2d_fast", "-DWPT_W=" + std::to_string(kPixels));
    Launch l;
    l.name = "depthwise_conv2d_fast";
    l.kernel = CreateKernel(*prog, l.name);
    const int m = g.oc / g.c;
    SetArgs(l.kernel, in[0], filter_buf_.get(), bias_buf_.get(), out[0], g.n, g.h, g.w, g.c, g.oh,
            g.ow, m, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, act_min_, act_max_);
    l.dims = 1;
    l.global[0] =
        RoundUp(size_t((g.oc + 3) / 4) * ((g.ow + kPixels - 1) / kPixels) * g.n * g.oh, 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  static constexpr int kPixels = 2;  // output pixels per work-item (WPT_W)
  tfl::DepthwiseConvParams params_;
  Shape filter_shape_;
  std::vector<float> filter_, bias_;
  float act_min_ = 0, act_max_ = 0;
  Buffer filter_buf_, bias_buf_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing DEPTHWISE_CONV_2D params";
  if (node.inputs.size() < 2 || node.outputs.size() != 1) return "unexpected input/output count";
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (auto why = CheckConvCommon(g, node, p.padding, p.stride_width, p.stride_height,
                                 p.dilation_width, p.dilation_height, p.activation);
      !why.empty())
    return why;
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  const Shape in = g.shape(node.inputs[0]), f = g.shape(node.inputs[1]);
  if (in.size() != 4 || f.size() != 4 || f[0] != 1)
    return "input/filter must be 4-D, filter [1,KH,KW,C*M]";
  if (in[3] <= 0 || f[3] % in[3] != 0)
    return "filter channels are not a multiple of input channels";
  if (p.depth_multiplier != f[3] / in[3]) return "depth_multiplier does not match the filter";
  if (has_bias && NumElements(g.shape(node.inputs[2])) != f[3]) return "bias size != channels";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<DepthwiseConv2dOp>(g, node, p);
}

}  // namespace

extern const OpHandler kDepthwiseConv2dHandler = {tfl::kDepthwiseConv2d, "DEPTHWISE_CONV_2D", Check,
                                                  Create};

}  // namespace clgpu
