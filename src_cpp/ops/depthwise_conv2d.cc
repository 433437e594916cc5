// DEPTHWISE_CONV_2D: claim check, shapes, weights and launches.
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
#include "ops/epilogue.h"
#include "ops/hybrid_weights.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The filter [1, KH, KW, C*M] and bias on the host and their device copies per range
// of output channels, shared by the op and its chunks.
struct DepthwiseSource {
  Shape filter_shape;
  LazyConstant filter;
  std::vector<float> bias;
  std::map<std::pair<int, int>, std::pair<Buffer, Buffer>> buffers;  // (oc0, count) -> filter, bias

  const std::pair<Buffer, Buffer>& Get(OpContext& ctx, int oc0, int count) {
    auto& b = buffers[{oc0, count}];
    if (b.first) return b;
    const int oc = filter_shape[3];
    const std::vector<float>& filter_values = filter.values();
    if (oc0 == 0 && count == oc) {
      b.first = UploadWeights(ctx, filter_values);
      b.second = UploadFloat32(ctx, bias);
      return b;
    }
    // Channels are the innermost axis: a range is a strided slice on the host.
    std::vector<float> f;
    f.reserve(size_t(filter_shape[1]) * filter_shape[2] * count);
    for (size_t tap = 0; tap < size_t(filter_shape[1]) * filter_shape[2]; ++tap)
      f.insert(f.end(), filter_values.begin() + tap * oc + oc0,
               filter_values.begin() + tap * oc + oc0 + count);
    b.first = UploadWeights(ctx, f);
    b.second =
        UploadFloat32(ctx, std::vector<float>(bias.begin() + oc0, bias.begin() + oc0 + count));
    return b;
  }
  size_t Bytes() const {
    size_t n = 0;
    for (const auto& [k, b] : buffers) n += b.first.bytes() + b.second.bytes();
    return n;
  }
};

class DepthwiseConv2dOp : public Op, public Chunker, public FoldTarget, public FoldSource {
 public:
  DepthwiseConv2dOp(const GraphView& g, const NodeInfo& node, const tfl::DepthwiseConvParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        params_(p),
        src_(std::make_shared<DepthwiseSource>()) {
    litert_ = g.cpu_kernels().litert;
    src_->filter_shape = g.shape(node.inputs[1]);
    src_->filter = LazyConstant(g, node.inputs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      src_->bias = g.ConstantFloats(node.inputs[2]);
    } else {
      src_->bias.assign(src_->filter_shape[3], 0.f);
    }
    ConvActivationRange(p.activation, &act_min_, &act_max_);
  }
  // A chunk: this geometry exactly, output channels from oc0 on.
  DepthwiseConv2dOp(const DepthwiseConv2dOp& whole, const ConvGeometry& g, int oc0)
      : Op(whole.node_index()),
        params_(whole.params_),
        src_(whole.src_),
        chunk_(true),
        fixed_(g),
        oc0_(oc0) {
    // A chunk clamps as its whole op does, a folded clamp included.
    std::tie(act_min_, act_max_) = whole.ClampBounds(whole.act_min_, whole.act_max_);
  }

  const char* type_name() const override { return "DEPTHWISE_CONV_2D"; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }
  // Its kernel applies per-channel slopes where it stores (a folded PRELU, fusion/prelu.cc).
  bool TakesSlopes(const OpContext&, const std::vector<Shape>& in) const override {
    return !chunk_ && !in.empty() && in[0].size() == 4;
  }
  std::string algorithm() const override {
    return std::string("depthwise_fast") + (has_slopes() ? "+PRELU" : "");
  }

  ConvGeometry Geometry(const Shape& in) const {
    if (chunk_) {
      if (in != Shape{fixed_.n, fixed_.h, fixed_.w, fixed_.c})
        throw Error("DEPTHWISE_CONV_2D chunk input " + ShapeString(in) +
                    " does not match its geometry");
      return fixed_;
    }
    const Shape& f = src_->filter_shape;
    ConvGeometry g;
    if (in.size() != 4 || in[3] <= 0 || f[3] % in[3] != 0)
      throw Error("DEPTHWISE_CONV_2D input " + ShapeString(in) + " does not match filter " +
                  ShapeString(f));
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = in[3];
    g.oc = f[3], g.kh = f[1], g.kw = f[2];
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.dh = params_.dilation_height, g.dw = params_.dilation_width;
    g.Compute(params_.padding, folded_pad());
    return g;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != 4) throw Error("DEPTHWISE_CONV_2D needs a 4-D input");
    CheckConvInputRows("DEPTHWISE_CONV_2D", in[0], litert_);
    const ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }

  double WeightBytes() const override {
    if (!chunk_) return double(src_->Bytes());
    return buffers_ ? double(buffers_->first.bytes() + buffers_->second.bytes()) : 0.0;
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const ConvGeometry g = Geometry(in[0]);
    return 2.0 * g.n * g.oh * g.ow * g.oc * g.kh * g.kw;
  }

  // The form a 1x1 convolution's GEMM computes as its A: depth multiplier 1, its clamp (a folded
  // one included), no epilogue.
  bool GetFloatDepthwise(OpContext& ctx, const Shape& in, FloatDepthwiseA* dw) override {
    if (chunk_ || in.size() != 4 || src_->filter_shape[3] != in[3] || has_residual() ||
        has_slopes() || has_output_view())
      return false;
    dw->g = Geometry(in);
    // The GEMM applies the epilogue to A under its own names (CLGPU_DW_...), beside its own.
    dw->epilogue = EpilogueDefinesAs(epilogue_defines(), "CLGPU_DW_");
    const auto& b = src_->Get(ctx, 0, dw->g.oc);
    dw->filter = b.first.get(), dw->bias = b.second.get();
    std::tie(dw->act_min, dw->act_max) = ClampBounds(act_min_, act_max_);
    return true;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    buffers_ = &src_->Get(ctx, oc0_, g.oc);
    auto prog = ctx.GetProgram("depthwise_conv2d_fast", "-DWPT_W=" + std::to_string(kPixels));
    Launch l;
    l.name = "depthwise_conv2d_fast";
    l.kernel = CreateKernel(*prog, l.name);
    const int m = g.oc / g.c;
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    SetArgsAndOptional(l.kernel, has_slopes() ? in.back() : nullptr, in[0], buffers_->first.get(),
                       buffers_->second.get(), out[0], g.n, g.h, g.w, g.c, g.oh, g.ow, m, g.kh,
                       g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, lo, hi);
    l.dims = 1;
    l.global[0] =
        RoundUp(size_t((g.oc + 3) / 4) * ((g.ow + kPixels - 1) / kPixels) * g.n * g.oh, 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

  // Chunks keep whole channel groups: output channels [o0, o1) read input channels
  // [o0 / M, o1 / M) for depth multiplier M.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    const ConvGeometry g = Geometry(in[0]);
    spec->views = {in[0], {g.n, g.oh, g.ow, g.oc}};
    spec->weight_axes = {3};
    spec->axes = {0, 1, 2, 3};
    spec->step = {1, 1, 1, g.oc / g.c};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    ChunkGeometry(in[0], out, &box);
    return {box};
  }
  size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>& in,
                          const Box& out) const override {
    const Shape& f = src_->filter_shape;
    (void)in;
    return size_t(f[1]) * f[2] * out.size[3] * ctx.storage_bytes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    return std::make_unique<DepthwiseConv2dOp>(*this, ChunkGeometry(in[0], out, &box),
                                               oc0_ + out.begin[3]);
  }

 private:
  ConvGeometry ChunkGeometry(const Shape& in, const Box& out, Box* box) const {
    const ConvGeometry whole = Geometry(in);
    const int m = whole.oc / whole.c;
    ConvGeometry g = whole.Chunk(out, box);
    g.c = out.size[3] / m;
    box->begin[3] = out.begin[3] / m;
    box->size[3] = g.c;
    return g;
  }

  static constexpr int kPixels = 2;  // output pixels per work-item (WPT_W)
  tfl::DepthwiseConvParams params_;
  bool litert_ = false;  // the CPU kernels are LiteRT's (CheckConvInputRows)
  std::shared_ptr<DepthwiseSource> src_;
  float act_min_ = 0, act_max_ = 0;
  bool chunk_ = false;
  ConvGeometry fixed_;                                  // a chunk's geometry
  int oc0_ = 0;                                         // a chunk's first output channel
  const std::pair<Buffer, Buffer>* buffers_ = nullptr;  // filter, bias in src_
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing DEPTHWISE_CONV_2D params";
  // A third input must be a bias: TFLite refuses a -1 there (and crashes without one).
  if (auto why = CheckInputs(node, "DEPTHWISE_CONV_2D", 2, 1, false); !why.empty()) return why;
  if (auto why = CheckOutputs(node, "DEPTHWISE_CONV_2D", 1); !why.empty()) return why;
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  // int8 weights with a float input: dynamic-range ones, run in float (ops/hybrid_weights.h).
  if (auto why = CheckHybridWeights(g, node); !why.empty()) return why;
  // int8 tensors: depthwise_conv2d_int8.cc.
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
  if (in.size() != 4 || f.size() != 4 || f[0] != 1)
    return "input/filter must be 4-D, filter [1,KH,KW,C*M]";
  // LiteRT's kernel refuses an empty filter (tflite_runtime's runs it): the CPU decides.
  if (NumElements(f) == 0) return "empty filter";
  if (in[3] <= 0 || f[3] % in[3] != 0)
    return "filter channels are not a multiple of input channels";
  if (p.depth_multiplier != f[3] / in[3]) return "depth_multiplier does not match the filter";
  if (has_bias && NumElements(g.shape(node.inputs[2])) != f[3]) return "bias size != channels";
  return quantized ? CheckDepthwiseConv2dInt8(g, node) : "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateDepthwiseConv2dInt8(g, node);
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<DepthwiseConv2dOp>(g, node, p);
}

std::string Describe(const NodeInfo& n) {
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "padding=%d stride=%d,%d depth_multiplier=%d act=%d dilation=%d,%d", p.padding,
                p.stride_width, p.stride_height, p.depth_multiplier, p.activation, p.dilation_width,
                p.dilation_height);
  return buf;
}

double Work(const GraphView& g, const NodeInfo& n) { return FilterWork(g, n, -1); }

}  // namespace

// Its dynamic-range form runs in TFLite's hybrid kernel, not XNNPACK: on the H200's host at 16
// threads a 56x56x64 one took 2.9x its float time alone, and each one between 1x1 convs cost
// 27-110 us more than in float (bench/results/cpu-hybrid-ops-h200-host-*.md); over 34 held-out
// dynamic-range models the CPU's time beyond its float estimate fitted 43 us a node and 2.8 ns
// an output element (never-slower-heldout-dynamic-NVIDIA_H200.md, before this rule).
constexpr double kCpuHybridNodeUs = 40.0, kCpuHybridNsPerElement = 2.8;

// XNNPACK takes no int8 depthwise convolution with a depth multiplier: TFLite's own kernel runs
// it. Per output pixel x input channel x filter tap at 16 threads three H200 hosts gave 0.72-0.93
// ns (3x3), 0.76-0.79 (5x5 and 3x3 of one channel) and 0.46-0.54 (7x7, stride 2); 5.1-10.4 on
// one thread (bench/results/cpu-int8-builtin-h200-host-*.md). The 7x7 kernel's 0.54, so that
// the estimate stays near the fastest kind (a 0.74 claimed a 7x7 one where the CPU was 1.35x
// faster), and the thread sweep's t^0.8 between thread counts.
constexpr double kCpuInt8MultiplierNsAt16 = 0.54, kCpuInt8MultiplierThreadExponent = 0.8;
double CpuInt8KernelNs(const GraphView& g, const NodeInfo& n, const CpuHost& host) {
  if (!n.builtin_data || n.inputs.size() < 2 || n.outputs.empty() || !g.valid_tensor(n.inputs[1]) ||
      !g.valid_tensor(n.outputs[0]))
    return 0;  // no node the check passes
  tfl::DepthwiseConvParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  if (p.depth_multiplier <= 1) return 0;
  const Shape f = g.shape(n.inputs[1]);  // [1, KH, KW, C x M]
  if (f.size() != 4) return 0;
  const double units =
      double(NumElements(g.shape(n.outputs[0]))) / p.depth_multiplier * double(f[1]) * double(f[2]);
  return units * kCpuInt8MultiplierNsAt16 *
         std::pow(16.0 / double(std::max(host.threads, 1)), kCpuInt8MultiplierThreadExponent);
}

extern const OpHandler kDepthwiseConv2dHandler = [] {
  OpHandler h{
      tfl::kDepthwiseConv2d, "DEPTHWISE_CONV_2D", Check, Create, Describe, Work, false, true};
  h.cpu_hybrid_node_us = kCpuHybridNodeUs;
  h.cpu_hybrid_ns_per_element = kCpuHybridNsPerElement;
  h.cpu_int8_kernel_ns = CpuInt8KernelNs;
  h.cpu_handoff = CpuHandoff::kConvolution;
  return h;
}();

}  // namespace clgpu
