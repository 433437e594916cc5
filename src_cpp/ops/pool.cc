// MAX_POOL_2D and AVERAGE_POOL_2D: SAME/VALID windows (TFLite's padding arithmetic, as
// for convolutions), clipped to the input, with a fused clamp activation.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "common/error.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "ops/reduce_tiled.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Strides and windows beyond this are refused: 32-bit index arithmetic (as conv).
constexpr int kMaxStep = 32767;
constexpr size_t kGroup = 64;  // work-items per group, along an output row

class PoolOp : public Op, public Chunker, public FoldTarget, public FoldSource {
 public:
  PoolOp(const GraphView& g, const NodeInfo& node, bool max, const tfl::PoolParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), max_(max), params_(p) {
    ActivationRange(p.activation, &act_min_, &act_max_);
    empty_when_larger_ = g.cpu_kernels().litert;
    // Quantized values: the kernels see their integers (OpContext::ForValues), the activation
    // clamps to its quantized bounds; TFLite pools the raw values without rescaling.
    const ValueType t = g.value_type(node.outputs[0]);
    quantized_ = IsQuantized(t);
    int8_ = t == ValueType::kInt8;
    if (quantized_) {
      int lo = 0, hi = 0;
      QuantizedActivationRange(p.activation, g.quant(node.outputs[0]), t, &lo, &hi);
      act_min_ = float(lo), act_max_ = float(hi);
    }
  }
  // A chunk: this geometry exactly (its padding is where its input box starts).
  PoolOp(const PoolOp& whole, const ConvGeometry& g)
      : Op(whole.node_index()),
        max_(whole.max_),
        params_(whole.params_),
        quantized_(whole.quantized_),
        int8_(whole.int8_),
        chunk_(true),
        fixed_(g) {
    // A chunk clamps as its whole op does, a folded clamp included.
    std::tie(act_min_, act_max_) = whole.ClampBounds(whole.act_min_, whole.act_max_);
  }

  const char* type_name() const override { return max_ ? "MAX_POOL_2D" : "AVERAGE_POOL_2D"; }
  std::string algorithm() const override { return algorithm_; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  // An int8 squeeze's mean: the sum over the one window divided as avg_pool2d_int rounds it.
  bool GetInt8MeanStage(const Shape& in, Int8MeanStage* stage) override {
    if (TakesSqueeze(in) != SqueezeType::kInt8) return false;
    const ConvGeometry g = Geometry(in);
    stage->params.clear();
    stage->up = {0};
    stage->pool_count = g.h * g.w;
    return true;
  }
  // A window over the whole image of one image, no activation: the MEAN of a squeeze
  // (fusion/squeeze.cc), int8 or float.
  SqueezeType TakesSqueeze(const Shape& in) const override {
    if (max_ || chunk_ || params_.activation != 0 || has_epilogue() || has_folded_clamp() ||
        in.size() != 4 || in[0] != 1 || (quantized_ && !int8_) ||
        in[3] > (quantized_ ? kMaxSqueezeVector : kMaxFloatSqueezeVector))
      return SqueezeType::kNone;
    const ConvGeometry g = Geometry(in);
    if (!WholeWindow(g) || int64_t(g.h) * g.w > INT_MAX / 256) return SqueezeType::kNone;
    return quantized_ ? SqueezeType::kInt8 : SqueezeType::kFloat;
  }
  // Quantized bounds do not compose with a float activation's: no clamp folds into an int8 pool.
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return !quantized_;
  }

  ConvGeometry Geometry(const Shape& in) const {
    if (in.size() != 4) throw Error(std::string(type_name()) + " needs a 4-D input");
    if (chunk_) {
      if (in != Shape{fixed_.n, fixed_.h, fixed_.w, fixed_.c})
        throw Error(std::string(type_name()) + " chunk input " + ShapeString(in) +
                    " does not match its geometry");
      return fixed_;
    }
    ConvGeometry g;
    g.n = in[0], g.h = in[1], g.w = in[2], g.c = g.oc = in[3];
    g.kh = params_.filter_height, g.kw = params_.filter_width;
    g.sh = params_.stride_height, g.sw = params_.stride_width;
    g.Compute(params_.padding);
    // A window larger than the input: LiteRT's pooling gives an empty output; tflite_runtime
    // 2.14 refuses it, as both refuse such a convolution (a negative size fails the plan).
    if (empty_when_larger_) g.oh = std::max(g.oh, 0), g.ow = std::max(g.ow, 0);
    return g;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const ConvGeometry g = Geometry(in[0]);
    return {{g.n, g.oh, g.ow, g.oc}};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const ConvGeometry g = Geometry(in[0]);
    return double(g.n) * g.oh * g.ow * g.oc * g.kh * g.kw + dense_flops_;
  }

  // Chunks are boxes of the output; each reads the rows and columns its windows cover
  // (clipped to the input) and the same channels.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    const ConvGeometry g = Geometry(in[0]);
    spec->views = {in[0], {g.n, g.oh, g.ow, g.oc}};
    spec->axes = {0, 1, 2, 3};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    ChunkGeometry(in[0], out, &box);
    return {box};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    return std::make_unique<PoolOp>(*this, ChunkGeometry(in[0], out, &box));
  }

  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    TiledReduction r;
    if (!WholeImage(Geometry(in[0]), ctx, &r)) return {};
    const size_t bytes = TiledReductionScratchBytes(r, ctx.storage_bytes);
    if (!bytes) return {};
    return {bytes};
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    launches_.clear();
    dense_flops_ = 0;
    if (!squeeze_dense().empty()) {
      const int hw = g.h * g.w;
      if (quantized_) {
        Int8MeanStage stage;
        stage.up = {0};
        stage.pool_count = hw;
        launches_.push_back(EncodeFoldedInt8Squeeze(ctx, *this, in[0], out[0], hw, g.c, stage,
                                                    &int8_squeeze_, &dense_flops_));
        algorithm_ = "int8_squeeze";
      } else {
        launches_.push_back(EncodeFoldedFloatSqueeze(ctx, *this, in[0], out[0], hw, g.c, float(hw),
                                                     /*bounded=*/true, &float_squeeze_,
                                                     &dense_flops_));
        algorithm_ = "squeeze";
      }
      return;
    }
    TiledReduction r;
    if (WholeImage(g, ctx, &r)) {
      algorithm_ = "whole_" + AppendTiledReduction(ctx, r, in[0], out[0], &launches_);
      return;
    }
    if (WholeImageInt(g, ctx, in[0], out[0])) return;
    // An average of integers rounds as TFLite's integer kernel (avg_pool2d_int, one channel per
    // work-item); a max is exact in the float kernels.
    const bool int_avg = !max_ && IsQuantized(ctx.values);
    vec4_ = g.c % 4 == 0 && !int_avg;
    algorithm_ = vec4_ ? "window_vec4" : "window";
    const int cv = vec4_ ? g.c / 4 : g.c;
    auto prog = ctx.GetProgram("pool");
    Launch l;
    l.name = int_avg ? "avg_pool2d_int"
                     : std::string(max_ ? "max_pool2d" : "avg_pool2d") + (vec4_ ? "_c4" : "");
    l.kernel = CreateKernel(*prog, l.name);
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    SetArgs(l.kernel, in[0], out[0], g.h, g.w, cv, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pad_top,
            g.pad_left, lo, hi);
    // Rows padded to whole work-groups: OpenCL 1.2 needs local sizes that divide the
    // global ones, and an odd output width would otherwise force tiny groups.
    l.dims = 3;
    l.global[0] = RoundUp(size_t(g.ow) * cv, kGroup);
    l.global[1] = g.oh;
    l.global[2] = g.n;
    l.local[0] = kGroup, l.local[1] = l.local[2] = 1;
    launches_.push_back(std::move(l));
  }

 private:
  // A window that covers the whole image (global pooling, as MediaPipe's models write it) is a
  // reduction over H x W: the window kernel would give each channel one work-item walking the
  // image alone. The tiled reduction spreads it over groups (ops/reduce_tiled.h). Floats only:
  // an int8 average rounds as TFLite's integer kernel does.
  static bool WholeWindow(const ConvGeometry& g) {
    return g.oh == 1 && g.ow == 1 && g.kh - g.pad_top >= g.h && g.kw - g.pad_left >= g.w;
  }
  bool WholeImage(const ConvGeometry& g, const OpContext& ctx, TiledReduction* r) const {
    if (quantized_ || chunk_ || !WholeWindow(g)) return false;
    const int64_t hw = int64_t(g.h) * g.w;
    if (hw == 0 || TiledReductionIsTiny(hw, g.c)) return false;
    r->red_op = max_ ? 4 : 0;  // kernels/reduce.cl: RED_POOL_MAX, RED_SUM
    r->outer = g.n, r->reduce = hw, r->inner = g.c;
    r->divisor = max_ ? 1.0f : static_cast<float>(hw);
    std::tie(r->act_lo, r->act_hi) = ClampBounds(act_min_, act_max_);
    r->has_epilogue = has_epilogue();
    r->compute_units = ctx.env.device().compute_units;
    return true;
  }

  // The same on quantized values (kernels/pool.cl, pool2d_int_whole): integer sums and maxima,
  // exact in any order. A chunk keeps the window kernels.
  bool WholeImageInt(const ConvGeometry& g, OpContext& ctx, cl_mem in, cl_mem out) {
    constexpr size_t kChannels = 32, kLanes = 8;  // PW_C, PW_P
    if (!IsQuantized(ctx.values) || chunk_ || !WholeWindow(g) || int64_t(g.h) * g.w > INT_MAX / 256)
      return false;
    auto prog = ctx.GetProgram("pool");
    Launch l;
    l.name = "pool2d_int_whole";
    l.kernel = CreateKernel(*prog, l.name);
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    SetArgs(l.kernel, in, out, g.h * g.w, g.c, max_ ? 1 : 0, lo, hi);
    l.dims = 2;
    l.global[0] = RoundUp(size_t(g.c), kChannels) * kLanes;
    l.global[1] = g.n;
    l.local[0] = kChannels * kLanes, l.local[1] = 1;
    launches_.push_back(std::move(l));
    algorithm_ = "whole_int";
    return true;
  }

  // Pooling is per channel: the chunk reads only its own channels.
  ConvGeometry ChunkGeometry(const Shape& in, const Box& out, Box* box) const {
    ConvGeometry g = Geometry(in).Chunk(out, box);
    g.c = g.oc = out.size[3];
    box->begin[3] = out.begin[3];
    box->size[3] = out.size[3];
    return g;
  }

  bool max_;
  tfl::PoolParams params_;
  float act_min_ = 0, act_max_ = 0;
  bool quantized_ = false, int8_ = false;
  bool empty_when_larger_ = true;  // LiteRT's pools; tflite_runtime's refuse
  bool chunk_ = false;
  ConvGeometry fixed_;  // a chunk's geometry
  bool vec4_ = false;
  std::string algorithm_ = "window";
  double dense_flops_ = 0;         // a folded squeeze's dense ops
  Int8SqueezeState int8_squeeze_;  // its launch's buffers (ops/squeeze.h)
  FloatSqueezeState float_squeeze_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing pool params";
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  tfl::PoolParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  float lo, hi;
  if (!ActivationRange(p.activation, &lo, &hi))
    return "fused activation " + std::to_string(p.activation) + " is not supported";
  if (p.padding != tfl::kPaddingSame && p.padding != tfl::kPaddingValid) return "unknown padding";
  if (p.stride_width < 1 || p.stride_height < 1 || p.filter_width < 1 || p.filter_height < 1)
    return "invalid stride or filter size";
  if (std::max({p.stride_width, p.stride_height, p.filter_width, p.filter_height}) > kMaxStep)
    return "stride or filter size above " + std::to_string(kMaxStep);
  const ValueType t =
      g.valid_tensor(node.inputs[0]) ? g.value_type(node.inputs[0]) : ValueType::kFloat;
  if (IsQuantized(t)) {
    for (int x : {node.inputs[0], node.outputs[0]})
      if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  } else if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) {
    return why;
  }
  if (g.shape(node.inputs[0]).size() != 4) return "input must be 4-D (NHWC)";
  return "";
}

std::unique_ptr<Op> CreateMax(const GraphView& g, const NodeInfo& node) {
  tfl::PoolParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<PoolOp>(g, node, true, p);
}

std::unique_ptr<Op> CreateAverage(const GraphView& g, const NodeInfo& node) {
  tfl::PoolParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<PoolOp>(g, node, false, p);
}

std::string Describe(const NodeInfo& n) {
  tfl::PoolParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  char buf[160];
  std::snprintf(buf, sizeof buf, "padding=%d stride=%d,%d filter=%d,%d act=%d", p.padding,
                p.stride_width, p.stride_height, p.filter_width, p.filter_height, p.activation);
  return buf;
}

// One operation per window tap.
double Work(const GraphView& g, const NodeInfo& n) {
  if (n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return 0;
  const double out = static_cast<double>(NumElements(g.shape(n.outputs[0])));
  if (!n.builtin_data) return out;
  tfl::PoolParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return out * std::max(p.filter_width, 1) * std::max(p.filter_height, 1);
}

}  // namespace

extern const OpHandler kMaxPool2dHandler = {tfl::kMaxPool2d, "MAX_POOL_2D", Check, CreateMax,
                                            Describe,        Work,          false, true};
// XNNPACK takes no int8 AVERAGE_POOL_2D: TFLite's own kernel runs a 2x2 one on one thread at
// 5.3-6.3 ns per output element on two H200 hosts, the interpreter's threads 1 or 16
// (bench/results/cpu-int8-builtin-*.md): the lower end.
constexpr double kCpuInt8AveragePoolNs = 5.3;
extern const OpHandler kAveragePool2dHandler = [] {
  OpHandler h{
      tfl::kAveragePool2d, "AVERAGE_POOL_2D", Check, CreateAverage, Describe, Work, false, true};
  h.cpu_int8_ns_per_element = kCpuInt8AveragePoolNs;
  return h;
}();

}  // namespace clgpu
