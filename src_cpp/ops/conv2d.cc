// CONV_2D: claim check, shape inference, weight upload and the launches of the
// algorithm the selector (ops/conv2d_selector.cc) picks.
#include <cstring>

#include "common/error.h"
#include "delegate/options.h"
#include "ops/conv2d_selector.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class Conv2dOp : public Op {
 public:
  Conv2dOp(const GraphView& g, const NodeInfo& node, const tfl::ConvParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), params_(p) {
    filter_shape_ = g.shape(node.inputs[1]);
    filter_ = g.ConstantFloats(node.inputs[1]);
    const int oc = filter_shape_[0];
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      bias_ = g.ConstantFloats(node.inputs[2]);
    } else {
      bias_.assign(oc, 0.f);
    }
    ActivationRange(p.activation, &act_min_, &act_max_);
  }

  const char* type_name() const override { return "CONV_2D"; }
  std::string algorithm() const override { return ConvAlgorithmName(algo_); }

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
    ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }

  double WeightBytes() const override {
    return weights_ ? double(weights_->filter.bytes() + bias_buf_.bytes()) : 0.0;
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * Geometry(in[0]).Macs();
  }

  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    const ConvGeometry g = Geometry(in[0]);
    return ConvScratchBytes(
        ctx, SelectConvAlgorithm(g, ctx.env.device(), ctx.options.conv_algorithm), g);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    const ConvAlgorithm algo = SelectConvAlgorithm(g, ctx.env.device(), ctx.options.conv_algorithm);
    // Weights are prepared once per algorithm (a resize may change the choice).
    if (algo != algo_ || !weights_) {
      algo_ = algo;
      weights_ = PrepareConvWeights(ctx, algo_, g, filter_);
    }
    if (!bias_buf_) bias_buf_ = UploadFloat32(ctx, bias_);
    launches_ =
        EncodeConv(ctx, algo_, g, in[0], *weights_, bias_buf_.get(), out[0], act_min_, act_max_);
  }

 private:
  tfl::ConvParams params_;
  Shape filter_shape_;
  std::vector<float> filter_, bias_;
  float act_min_ = 0, act_max_ = 0;
  ConvAlgorithm algo_ = ConvAlgorithm::kDirect;
  std::shared_ptr<ConvWeights> weights_;
  Buffer bias_buf_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing CONV_2D params";
  if (node.inputs.size() < 2 || node.outputs.size() != 1) return "unexpected input/output count";
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (auto why = CheckConvCommon(g, node, p.padding, p.stride_width, p.stride_height,
                                 p.dilation_width, p.dilation_height, p.activation);
      !why.empty())
    return why;
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  const Shape in = g.shape(node.inputs[0]), f = g.shape(node.inputs[1]);
  if (in.size() != 4 || f.size() != 4) return "input and filter must be 4-D";
  if (f[3] != in[3]) return "grouped convolution (filter channels != input channels)";
  if (NumElements(f) == 0) return "empty filter";
  if (has_bias && NumElements(g.shape(node.inputs[2])) != f[0]) return "bias size != filters";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<Conv2dOp>(g, node, p);
}

}  // namespace

extern const OpHandler kConv2dHandler = {tfl::kConv2d, "CONV_2D", Check, Create};

}  // namespace clgpu
