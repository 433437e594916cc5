// CONV_2D: claim check, shape inference, weight upload and the launches of the
// algorithm the selector (ops/conv2d_selector.cc) picks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "common/error.h"
#include "graph/validate.h"
#include "ops/conv2d_selector.h"
#include "ops/conv_geometry.h"
#include "ops/conv_op.h"
#include "ops/conv_source.h"
#include "ops/ds_chain.h"
#include "ops/hybrid_weights.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class Conv2dOp : public ConvOpBase {
 public:
  Conv2dOp(const GraphView& g, const NodeInfo& node, const tfl::ConvParams& p)
      : ConvOpBase(g, node, p, /*grouped=*/true), src_(std::make_shared<ConvSource>()) {
    src_->filter_shape = filter_shape_;
    src_->filter = LazyConstant(g, node.inputs[1]);
    const int oc = src_->filter_shape[0];
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      src_->bias = g.ConstantFloats(node.inputs[2]);
    } else {
      src_->bias.assign(oc, 0.f);
    }
    ConvActivationRange(p.activation, &act_min_, &act_max_);
  }
  // A chunk: this geometry exactly, output channels from oc0 on.
  Conv2dOp(const Conv2dOp& whole, const ConvGeometry& g, int oc0)
      : ConvOpBase(whole, g, oc0),
        src_(whole.src_),
        act_min_(whole.act_min_),
        act_max_(whole.act_max_) {
    KeepChunkFolds(whole, &chunk_folds_);
  }

  std::string algorithm() const override {
    if (!ds_chain().empty()) return "ds_chain+DEPTHWISE";
    return (block_ ? std::string("inverted_residual") : ConvAlgorithmName(algo_)) +
           (input_affine() ? "+AFFINE" : "") + (folded_expand() ? "+EXPAND" : "") +
           (folded_depthwise() ? "+DEPTHWISE" : "") + (has_gate() ? "+GATE" : "") +
           (has_residual() ? "+ADD" : "") + (has_slopes() ? "+PRELU" : "") +
           (output_slice() ? "+CONCAT" : "") + (input_pitch() ? "+PITCH" : "");
  }

  // A 1x1 convolution the GEMMs run computes a depthwise's output as its A
  // (EncodeDepthwiseGemm).
  bool TakesDepthwise(const OpContext& ctx, const std::vector<Shape>& in) const override {
    if (chunk_ || !ds_chain().empty() || input_affine() || has_gate() || in.empty() ||
        in[0].size() != 4)
      return false;
    const ConvGeometry g = Geometry(in[0]);
    const ConvAlgorithm a = Algorithm(ctx, g);
    return ConvAlgorithmApplies(ConvAlgorithm::kGemm1x1, g) &&
           (a == ConvAlgorithm::kGemm1x1 || a == ConvAlgorithm::kImplicitGemm);
  }

  // The GEMMs read its input through per-channel nodes (A_AFFINE): the whole op, alone (nothing
  // else folded in yet), where the implicit GEMM or the plain one's tiled kernels run it anyway.
  bool TakesAffine(const OpContext& ctx, const std::vector<Shape>& in) const override {
    if (chunk_ || in.size() != 1 || in[0].size() != 4 || folded_depthwise() || input_affine() ||
        has_residual() || has_gate() || !ds_chain().empty())
      return false;
    const ConvGeometry g = Geometry(in[0]);
    return g.groups == 1 && AffineAlgorithm(ctx, g) == Algorithm(ctx, g);
  }
  // Per-channel slopes after the store's activation: every algorithm's store applies them
  // (kernels/common.cl's SLOPED); a chunk does not.
  bool TakesSlopes(const OpContext&, const std::vector<Shape>& in) const override {
    return !chunk_ && ds_chain().empty() && !in.empty() && in[0].size() == 4;
  }
  // The plain GEMM scales the filter's tile by the gate where it loads it (EncodeGemm1x1With): a
  // 1x1 convolution it runs, but for its small-M kernel; one image (one gate).
  bool TakesGate(const OpContext& ctx, const std::vector<Shape>& in) const override {
    if (chunk_ || in.empty() || in[0].size() != 4 || in[0][0] != 1 || folded_depthwise() ||
        input_affine() || has_gate() || has_slopes() || !ds_chain().empty())
      return false;
    const ConvGeometry g = Geometry(in[0]);
    return Algorithm(ctx, g) == ConvAlgorithm::kGemm1x1 && Gemm1x1Tiled(ctx.env.device(), g);
  }
  // The GEMMs write their rows into a concatenation (kernels/gemm_tiles.cl's OUT_SLICE): those
  // it runs anyway, but for the small-M kernel, and the implicit one with a folded depthwise
  // but no expand (which may run as the block kernel instead).
  bool TakesOutputSlice(const OpContext& ctx, const std::vector<Shape>& in) const override {
    if (chunk_ || in.empty() || in[0].size() != 4 || folded_expand() || output_slice() ||
        !ds_chain().empty())
      return false;
    return folded_depthwise() || input_affine() || GemmWrites(ctx, Geometry(in[0]));
  }
  // The GEMMs read input 0 at a pitch (a concatenation chain): those it runs anyway, but for
  // the small-M kernel; nothing folded in that reads the input otherwise (a depthwise, an
  // expand, a chain) and one whole op.
  bool TakesInputPitch(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !in.empty() && in[0].size() == 4 && !input_pitch() &&
           TakesInputPitchNow(ctx, Geometry(in[0]));
  }
  // Every algorithm of EncodeConv adds a residual; the conv's own activation must be none
  // (act(conv) + residual is not act(conv + residual)).
  bool CanFuseResidual(const OpContext&, const std::vector<Shape>& in) const override {
    return !chunk_ && ds_chain().empty() && params_.activation == tfl::kActNone && in.size() == 1;
  }

  // The whole op counts every weight buffer of its source (its chunks' included).
  double WeightBytes() const override {
    return chunk_ ? (weights_ ? double(weights_->filter.bytes()) : 0.0) : double(src_->Bytes());
  }

  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    const ConvGeometry g = Geometry(in[0]);
    if (!ds_chain().empty()) return {};  // its launch keeps its own (EncodeDsChain)
    if (folded_depthwise()) {
      const Shape& x = DepthwiseInput(in[0]);
      ConvGeometry dw;
      dw.n = x[0], dw.h = x[1], dw.w = x[2], dw.c = x[3];
      dw.oh = g.h, dw.ow = g.w, dw.oc = g.c;
      return DepthwiseGemmScratchBytes(ctx, dw, g.oc);
    }
    return ConvScratchBytes(ctx, input_affine() ? AffineAlgorithm(ctx, g) : Algorithm(ctx, g), g);
  }

  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }

  // A 1x1 filter over one image's single pixel (any stride or padding gives one output pixel):
  // a dense op over the channels, with the plain GEMM's weights.
  bool GetFloatDense(OpContext& ctx, const Shape& in, FloatDense* dense) override {
    const Shape& f = src_->filter_shape;
    if (chunk_ || has_residual() || input_affine() || has_slopes() || has_gate() ||
        !ds_chain().empty() || f[1] != 1 || f[2] != 1 || in.empty() || in.back() != f[3] ||
        NumElements(in) != f[3])
      return false;
    const ConvGeometry g = Geometry({1, 1, 1, f[3]});
    dense->weights = src_->Weights(ctx, ConvAlgorithm::kGemm1x1, g, 0).filter.get();
    dense->bias = src_->Bias(ctx, 0, f[0]);
    dense->n = f[0], dense->k = f[3];
    std::tie(dense->act_min, dense->act_max) = ClampBounds(act_min_, act_max_);
    dense->epilogue = epilogue_defines();
    return true;
  }

  bool GetFloatPointwise(OpContext& ctx, const Shape& in, FloatDense* dense) override {
    const Shape& f = src_->filter_shape;
    if (chunk_ || has_residual() || input_affine() || has_slopes() || has_gate() ||
        has_epilogue() || folded_depthwise() || output_slice() || has_output_view() ||
        output_quantize() || has_pool() || f[1] != 1 || f[2] != 1 || in.size() != 4 ||
        in[3] != f[3] || params_.stride_height != 1 || params_.stride_width != 1)
      return false;
    const ConvGeometry g = Geometry(in);
    if (g.oh != in[1] || g.ow != in[2] || g.groups != 1) return false;
    dense->weights = src_->Weights(ctx, ConvAlgorithm::kGemm1x1, g, 0).filter.get();
    dense->bias = src_->Bias(ctx, 0, f[0]);
    dense->n = f[0], dense->k = f[3];
    std::tie(dense->act_min, dense->act_max) = ClampBounds(act_min_, act_max_);
    dense->epilogue = "";
    return true;
  }

  void Prepare(OpContext& octx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    OpContext ctx = octx;
    if (const Attachments::OutSlice* s = output_slice())
      ctx.out_ldc = s->ldc, ctx.out_offset = s->offset;
    ctx.in_ldc = input_pitch();
    const ConvGeometry g = Geometry(in_shapes[0]);
    if (ctx.in_ldc && !TakesInputPitchNow(ctx, g))
      throw Error("CONV_2D: its input in a wider concatenation needs one of the GEMMs");
    algo_ = Algorithm(ctx, g);
    const bool r = has_residual();
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    cl_mem slopes = has_slopes() ? in.back() : nullptr;
    cl_mem gate = has_gate() ? in.at(gate_input()) : nullptr;
    block_ = false;
    if (!ds_chain().empty()) {
      // The blocks before, then its own: each depthwise's form and 1x1's weights.
      std::vector<DsChainBlock> blocks;
      for (const Attachments::DsChain::Block& b : ds_chain()) {
        DsChainBlock form;
        // A depthwise keeping its input's shape: its output is the 1x1's input.
        Op* pw = b.pointwise ? b.pointwise : this;
        if (!b.depthwise->fold_source()->GetFloatDepthwise(ctx, b.shape, &form.dw) ||
            !form.dw.epilogue.empty() ||
            !pw->fold_source()->GetFloatPointwise(ctx, b.shape, &form.pw))
          throw Error("CONV_2D: its depthwise-separable chain no longer fits its kernel");
        blocks.push_back(form);
      }
      algo_ = ConvAlgorithm::kGemm1x1;
      launches_ = EncodeDsChain(ctx, blocks, in[0], out[0]);
      return;
    }
    if (folded_depthwise()) {
      FloatDepthwiseA dw;
      if (!folded_depthwise()->fold_source()->GetFloatDepthwise(ctx, DepthwiseInput(in_shapes[0]),
                                                                &dw))
        throw Error("CONV_2D: the folded depthwise no longer fits its GEMM");
      if (folded_expand()) {
        const int ec = in_shapes[0].back();
        FloatDense e;
        if (!folded_expand()->fold_source()->GetFloatDense(ctx, {1, 1, 1, ec}, &e) ||
            !e.epilogue.empty() || e.n != dw.g.c || e.k != ec)
          throw Error("CONV_2D: the folded expand no longer fits its GEMM");
        dw.expand_c = ec, dw.expand_filter = e.weights, dw.expand_bias = e.bias;
        dw.expand_min = e.act_min, dw.expand_max = e.act_max;
      }
      algo_ = ConvAlgorithm::kImplicitGemm;
      weights_ = &src_->Weights(ctx, algo_, g, oc0_);
      launches_ = EncodeDepthwiseGemm(ctx, dw, g.oc, in[0], *weights_, src_->Bias(ctx, oc0_, g.oc),
                                      out[0], r ? residual().act_min : lo,
                                      r ? residual().act_max : hi, r ? in.at(1) : nullptr, slopes);
      block_ = launches_.size() == 1 && launches_[0].name == "inverted_residual_block";
      return;
    }
    if (const Attachments::Affine* a = input_affine()) {
      algo_ = AffineAlgorithm(ctx, g);
      weights_ = &src_->Weights(ctx, algo_, g, oc0_);
      const size_t shift = a->scale ? 2 : 1;
      // A scalar's one value serves every channel.
      auto one = [&](size_t i) { return NumElements(in_shapes.at(i)) == 1; };
      AffineA affine{a->scale ? in.at(1) : nullptr,
                     a->shift ? in.at(shift) : nullptr,
                     a->lo1,
                     a->hi1,
                     a->lo2,
                     a->hi2,
                     a->scale && one(1),
                     a->shift && one(shift)};
      cl_mem bias = src_->Bias(ctx, oc0_, g.oc);
      launches_ = algo_ == ConvAlgorithm::kGemm1x1
                      ? EncodeGemm1x1With(ctx, g, in[0], *weights_, bias, out[0], lo, hi, nullptr,
                                          slopes, nullptr, &affine)
                      : EncodeImplicitGemmConv(ctx, g, in[0], *weights_, bias, out[0], lo, hi,
                                               nullptr, &affine, slopes);
      return;
    }
    if (ctx.out_ldc && !GemmWrites(ctx, g))
      throw Error("CONV_2D: its folded concatenation needs one of the GEMMs");
    weights_ = &src_->Weights(ctx, algo_, g, oc0_);
    const float elo = r ? residual().act_min : lo, ehi = r ? residual().act_max : hi;
    cl_mem res = r ? in.at(1) : nullptr;
    cl_mem bias = src_->Bias(ctx, oc0_, g.oc);
    if (!gate)
      launches_ = EncodeConv(ctx, algo_, g, in[0], *weights_, bias, out[0], elo, ehi, res, slopes);
    else if (algo_ == ConvAlgorithm::kGemm1x1 && Gemm1x1Tiled(ctx.env.device(), g))
      launches_ =
          EncodeGemm1x1With(ctx, g, in[0], *weights_, bias, out[0], elo, ehi, res, slopes, gate);
    else
      throw Error("CONV_2D: its folded gate needs the plain GEMM");
  }

  size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>& in,
                          const Box& out) const override {
    Box box;
    const ConvGeometry g = Geometry(in[0]).Chunk(out, &box);
    return ConvWeightBytes(ctx, Algorithm(ctx, g), g);
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    return std::make_unique<Conv2dOp>(*this, Geometry(in[0]).Chunk(out, &box), oc0_ + out.begin[3]);
  }

 private:
  // ChooseConvAlgorithm, except that a filter with a non-finite weight runs implicit GEMM,
  // whose padded taps multiply zeros as TFLite's im2col does (ConvSource::NonFinite), and so does
  // one with an outlier that Winograd would spread (ConvSource::Outlier).
  ConvAlgorithm Algorithm(const OpContext& ctx, const ConvGeometry& g) const {
    if (src_->NonFinite() && g.groups == 1) return ConvAlgorithm::kImplicitGemm;
    const ConvAlgorithm a = ChooseConvAlgorithm(ctx, g);
    const bool winograd = a == ConvAlgorithm::kWinograd || a == ConvAlgorithm::kWinograd4 ||
                          a == ConvAlgorithm::kWinograd4Fused;
    return winograd && src_->Outlier() ? ConvAlgorithm::kImplicitGemm : a;
  }
  // The GEMM that reads the input through folded per-channel nodes: the plain one's tiled
  // kernels where they run the layer anyway, else the implicit one.
  ConvAlgorithm AffineAlgorithm(const OpContext& ctx, const ConvGeometry& g) const {
    return Algorithm(ctx, g) == ConvAlgorithm::kGemm1x1 && Gemm1x1Tiled(ctx.env.device(), g)
               ? ConvAlgorithm::kGemm1x1
               : ConvAlgorithm::kImplicitGemm;
  }
  // Prepare's check of what TakesInputPitch allowed (the attachment itself set now).
  bool TakesInputPitchNow(const OpContext& ctx, const ConvGeometry& g) const {
    return !chunk_ && !folded_depthwise() && ds_chain().empty() &&
           GemmWritesSlices(input_affine() ? AffineAlgorithm(ctx, g) : Algorithm(ctx, g),
                            ctx.env.device(), g);
  }
  bool GemmWrites(const OpContext& ctx, const ConvGeometry& g) const {
    return GemmWritesSlices(Algorithm(ctx, g), ctx.env.device(), g);
  }

  std::shared_ptr<ConvSource> src_;
  float act_min_ = 0, act_max_ = 0;
  ConvAlgorithm algo_ = ConvAlgorithm::kDirect;
  bool block_ = false;  // the folded expand, depthwise and this conv in one block kernel
  const ConvWeights* weights_ = nullptr;  // in src_, for the current algorithm
  Attachments chunk_folds_;               // a chunk's: its whole op's residual and clamp
};

// A grouped convolution (filter channels divide the input's): TFLite's rule, and what the direct
// algorithm, the only one that runs it, does not do as the CPU does.
std::string CheckGrouped(const GraphView& g, const NodeInfo& node, const Shape& in, const Shape& f,
                         bool quantized) {
  if (f[3] <= 0 || in[3] % f[3] != 0 || f[0] % (in[3] / f[3]) != 0)
    return "filter channels " + std::to_string(f[3]) + " do not divide the input's " +
           std::to_string(in[3]) + " into groups of the " + std::to_string(f[0]) + " filters";
  if (quantized) return "grouped int8 convolution";
  if (g.IsDequantizedWeight(node.inputs[1])) return "grouped convolution with int8 weights";
  // TFLite's CPU multiplies the padded border's zeros by every weight; the direct algorithm
  // skips those taps, so a NaN or infinite weight would differ at the border.
  const std::vector<float> w = g.ConstantFloats(node.inputs[1]);
  if (std::any_of(w.begin(), w.end(), [](float v) { return !std::isfinite(v); }))
    return "grouped convolution with a non-finite weight";
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing CONV_2D params";
  // TFLite's float CONV_2D reads a bias: two inputs, or a -1 there, fail its Prepare.
  if (auto why = CheckInputs(node, "CONV_2D", 3, 0); !why.empty()) return why;
  if (auto why = CheckOutputs(node, "CONV_2D", 1); !why.empty()) return why;
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  // int8 weights with a float input: dynamic-range ones, run in float (ops/hybrid_weights.h).
  if (auto why = CheckHybridWeights(g, node); !why.empty()) return why;
  // int8 tensors: conv2d_int8.cc.
  const bool quantized =
      g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0]));
  if (quantized && (!g.valid_tensor(node.inputs[1]) || !g.valid_tensor(node.outputs[0])))
    return "invalid tensor index";
  if (auto why = quantized ? CheckConvParams(p.padding, p.stride_width, p.stride_height,
                                             p.dilation_width, p.dilation_height, p.activation)
                           : CheckConvCommon(g, node, p.padding, p.stride_width, p.stride_height,
                                             p.dilation_width, p.dilation_height, p.activation);
      !why.empty())
    return why;
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  const Shape in = g.shape(node.inputs[0]), f = g.shape(node.inputs[1]);
  if (in.size() != 4 || f.size() != 4) return "input and filter must be 4-D";
  if (NumElements(f) == 0) return "empty filter";
  if (f[3] != in[3]) {
    if (auto why = CheckGrouped(g, node, in, f, quantized); !why.empty()) return why;
  }
  if (has_bias && NumElements(g.shape(node.inputs[2])) != f[0]) return "bias size != filters";
  return quantized ? CheckConv2dInt8(g, node) : "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateConv2dInt8(g, node);
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<Conv2dOp>(g, node, p);
}

std::string Describe(const NodeInfo& n) {
  tfl::ConvParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  char buf[160];
  std::snprintf(buf, sizeof buf, "padding=%d stride=%d,%d act=%d dilation=%d,%d", p.padding,
                p.stride_width, p.stride_height, p.activation, p.dilation_width, p.dilation_height);
  return buf;
}

double Work(const GraphView& g, const NodeInfo& n) { return FilterWork(g, n, 0); }

// XNNPACK's float convolution: its output channels padded to rows of lanes (HostFloatLanes).
double FloatCpuNs(const GraphView& g, const NodeInfo& n, const CpuHost& host) {
  const int64_t lanes = host.float_lanes;
  if (n.inputs.size() < 2 || !g.valid_tensor(n.inputs[1]) || lanes <= 1) return 0;
  const Shape f = g.shape(n.inputs[1]);  // [OC, KH, KW, IC]
  if (f.size() != 4 || f[0] <= 0 || f[0] % lanes == 0 || host.gflops <= 0) return 0;
  const double padded = double((f[0] + lanes - 1) / lanes * lanes);
  return FilterWork(g, n, 0) * padded / double(f[0]) / host.gflops;  // GFLOP/s: ns
}

}  // namespace

extern const OpHandler kConv2dHandler = [] {
  OpHandler h{tfl::kConv2d, "CONV_2D",         Check, Create, Describe, Work, false,
              true,         GraphConvLaunches, false, 0,      true};
  h.cpu_int8_kernel_ns = Conv2dInt8CpuNs;
  h.cpu_float_kernel_ns = FloatCpuNs;
  h.cpu_hybrid_converts = true;
  h.cpu_handoff = CpuHandoff::kConvolution;
  return h;
}();

}  // namespace clgpu
