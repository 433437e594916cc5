// MEAN of int8 / uint8 tensors (kernels/mean_int8.cl), bit for bit with the two paths of
// TFLite's optimized MEAN in both runtimes:
// - 4-D input, keep_dims, axes {1, 2}: optimized_integer_ops::Mean (optimized_ops::Mean for
//   uint8): the raw sum times in_scale / (H * W * out_scale) (in float), plus a bias
//   out_zero - round(in_zero * in_scale / out_scale) (in float). LiteRT splits the channels
//   between min(C / 8, threads) threads, each running a NEON loop over 16 channels at a time
//   whose shift rounds ties up, the rest away from zero; tflite_runtime 2.14 runs scalar code.
//   2.14 takes this path only for the literal axes [1, 2] / [2, 1]; LiteRT resolves negative
//   and repeated axes first.
// - otherwise reference_ops::QuantizedMeanOrSum: (sum - in_zero * n) times the multiplier of
//   in_scale / out_scale (in double) folded with 1 / n in integers, plus out_zero (ties away).
// Both measured against both runtimes with power-of-two scales (every shift a tie).
// When the reduced axes are one run between kept ones (the squeeze-excite means over H, W) the
// input is an [outer, reduce, inner] view and mean_int8_tiled reads it coalesced, its reduced
// extent split between groups into one launch; other axes take mean_int8, a group per output.
#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "cl/int8_dot.h"
#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "ops/squeeze.h"

namespace clgpu {
namespace {

constexpr size_t kMaxGroup = 64;  // MQ_LOCAL in kernels/mean_int8.cl

struct ReducerParams {
  bool keep_dims;
};

std::string Mask(const std::vector<int64_t>& axes, size_t rank, std::vector<bool>* mask) {
  mask->assign(rank, false);
  for (int64_t a : axes) {
    const int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r) return "axis " + std::to_string(a) + " out of range";
    (*mask)[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  }
  return "";
}

Shape Reduced(const Shape& in, const std::vector<bool>& mask, bool keep_dims) {
  Shape out;
  for (size_t a = 0; a < in.size(); ++a)
    if (!mask[a] || keep_dims) out.push_back(mask[a] ? 1 : in[a]);
  return out;
}

class MeanInt8Op : public Op, public FoldTarget, public FoldSource {
 public:
  MeanInt8Op(const GraphView& g, const NodeInfo& node, std::vector<int64_t> axes, bool keep_dims)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        axes_(std::move(axes)),
        keep_dims_(keep_dims),
        type_(g.value_type(node.inputs[0])),
        in_(g.quant(node.inputs[0])),
        out_(g.quant(node.outputs[0])),
        cpu_(g.cpu_kernels()) {}

  const char* type_name() const override { return "MEAN"; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  // An int8 squeeze's mean over one image's H and W (TakesSqueeze's shapes).
  bool GetInt8MeanStage(const Shape& in, Int8MeanStage* stage) override {
    if (TakesSqueeze(in) != SqueezeType::kInt8) return false;
    std::vector<bool> mask;
    int64_t outer = 1, reduce = 1, inner = 1;
    Mask(axes_, in.size(), &mask);
    Tiled(in, mask, &outer, &reduce, &inner);
    *stage = StageFor(in, reduce);
    return true;
  }
  std::string algorithm() const override {
    if (!squeeze_dense().empty()) return "int8_squeeze";
    return spatial_ ? "int8_spatial" : "int8_general";
  }
  // One image's H and W reduced (the input an [outer = 1, reduce, channels] view), int8.
  SqueezeType TakesSqueeze(const Shape& in) const override {
    std::vector<bool> mask;
    int64_t outer = 1, reduce = 1, inner = 1;
    const bool takes = type_ == ValueType::kInt8 && !has_epilogue() && !has_folded_clamp() &&
                       Mask(axes_, in.size(), &mask).empty() && NumElements(in) > 0 &&
                       Tiled(in, mask, &outer, &reduce, &inner) && outer == 1 &&
                       inner <= kMaxSqueezeVector;
    return takes ? SqueezeType::kInt8 : SqueezeType::kNone;
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    std::vector<bool> mask;
    if (auto why = Mask(axes_, in[0].size(), &mask); !why.empty()) throw Error("MEAN: " + why);
    // An input resized to nothing along a reduced axis (an op before it made it so): a mean of
    // no values has no int8 value to match, so a clear error rather than a made-up one.
    for (size_t a = 0; a < mask.size(); ++a)
      if (mask[a] && in[0][a] == 0)
        throw Error("int8 MEAN over an empty axis: input " + ShapeString(in[0]));
    return {Reduced(in[0], mask, keep_dims_)};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return static_cast<double>(NumElements(in[0])) + dense_flops_;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    launches_.clear();
    const Shape& s = in_shapes[0];
    const int total = static_cast<int>(NumElements(out_shapes[0]));
    if (total == 0) return;
    std::vector<bool> mask;
    Mask(axes_, s.size(), &mask);
    std::vector<int> kdims, kstrides, rdims, rstrides;
    int64_t stride = 1, count = 1;
    for (size_t a = s.size(); a-- > 0; stride *= s[a]) {
      if (s[a] == 1) continue;
      (mask[a] ? rdims : kdims).insert((mask[a] ? rdims : kdims).begin(), s[a]);
      (mask[a] ? rstrides : kstrides).insert((mask[a] ? rstrides : kstrides).begin(), int(stride));
      if (mask[a]) count *= s[a];
    }
    const Int8MeanStage stage = StageFor(s, count);
    const std::vector<int>& p = stage.params;
    const std::vector<uint8_t>& up = stage.up;
    dense_flops_ = 0;
    if (!squeeze_dense().empty()) {
      int64_t outer = 1, reduce = 1, inner = 1;
      Tiled(s, mask, &outer, &reduce, &inner);
      launches_.push_back(EncodeFoldedInt8Squeeze(ctx, *this, in[0], out[0],
                                                  static_cast<int>(reduce), static_cast<int>(inner),
                                                  stage, &squeeze_, &dense_flops_));
      return;
    }
    params_ = UploadInts(ctx, p);
    up_ = UploadBytes(ctx, up.data(), up.size());
    std::string defines = PtxDefines(ctx.env.device());
    if (type_ == ValueType::kUInt8) defines += " -DQUANT_UINT8";
    auto program = ctx.GetProgram("mean_int8", defines);
    int64_t outer = 1, reduce = 1, inner = 1;
    if (Tiled(s, mask, &outer, &reduce, &inner)) {
      Launch l;
      l.name = "mean_int8_tiled";
      l.kernel = CreateKernel(*program, l.name);
      const TiledMeanGroups g = TiledMeanGroupsFor(ctx, l.kernel, outer, reduce, inner);
      const int64_t blocks = g.blocks, slices = g.slices;
      // Per (outer, block) the count of its groups done, then (slices > 1) per output its int32
      // sum. The kernel leaves both zero after each launch.
      acc_ = ZeroBuffer(ctx, sizeof(int) * size_t(outer) * (blocks + (slices > 1 ? inner : 0)));
      SetArgs(l.kernel, in[0], out[0], acc_.get(), static_cast<int>(outer),
              static_cast<int>(reduce), static_cast<int>(inner), static_cast<int>(slices),
              params_.get(), up_.get(), static_cast<int>(up.size()));
      SetTiledMeanGeometry(g, outer, &l);
      launches_.push_back(std::move(l));
      return;
    }
    std::vector<int> meta = kdims;
    for (const auto* v : {&kstrides, &rdims, &rstrides})
      meta.insert(meta.end(), v->begin(), v->end());
    if (meta.empty()) meta.push_back(0);
    meta_ = UploadInts(ctx, meta);
    Launch l;
    l.name = "mean_int8";
    l.kernel = CreateKernel(*program, l.name);
    const size_t group = RowGroup(ctx, l.kernel, kMaxGroup, count);
    SetArgs(l.kernel, in[0], out[0], static_cast<int>(kdims.size()), static_cast<int>(rdims.size()),
            static_cast<int>(count), meta_.get(), params_.get(), up_.get(),
            static_cast<int>(up.size()));
    l.local[0] = group;
    l.global[0] = static_cast<size_t>(total) * group;
    launches_.push_back(std::move(l));
  }

 private:
  // Whether the reduced axes (size-1 axes aside) are one run between kept ones: the input is then
  // [outer, reduce, inner], the product of the kept axes before the run, of the run, and of the
  // kept axes after it.
  static bool Tiled(const Shape& s, const std::vector<bool>& mask, int64_t* outer, int64_t* reduce,
                    int64_t* inner) {
    int part = 0;  // 0: kept axes before the run, 1: in the run, 2: kept axes after it
    for (size_t a = 0; a < s.size(); ++a) {
      if (s[a] == 1) continue;
      if (mask[a]) {
        if (part == 2) return false;
        part = 1;
        *reduce *= s[a];
      } else {
        if (part == 1) part = 2;
        *(part == 0 ? outer : inner) *= s[a];
      }
    }
    if (part == 0) std::swap(*outer, *inner);  // nothing reduced: all columns, one row
    return true;
  }
  // The arithmetic of the CPU's path for input shape s, `count` values per mean.
  Int8MeanStage StageFor(const Shape& s, int64_t count) {
    Int8MeanStage st;
    st.up.assign(1, 0);
    spatial_ = Spatial(s);
    if (spatial_) {
      // optimized_integer_ops::Mean: everything in float, then QuantizeMultiplier.
      const float n = static_cast<float>(s[1] * s[2]);
      float temp = static_cast<float>(in_.zero_point[0]) * in_.scale[0] / out_.scale[0];
      temp = temp > 0 ? temp + 0.5f : temp - 0.5f;
      const int bias = out_.zero_point[0] - static_cast<int>(temp);
      const FixedPoint m = QuantizeMultiplier(in_.scale[0] / (n * out_.scale[0]));
      st.params = {0, m.multiplier, m.shift, bias};
      st.up = VectorChannels(s[3]);
    } else {
      // QuantizedMeanOrSum: 1 / n folded into the multiplier of in_scale / out_scale.
      const FixedPoint m = QuantizeMultiplier(double(in_.scale[0]) / double(out_.scale[0]));
      int shift = 63 - __builtin_clzll(static_cast<uint64_t>(count));
      shift = std::min({shift, 32, 31 + m.shift});
      const int32_t mult = static_cast<int32_t>((int64_t(m.multiplier) << shift) / count);
      st.params = {-in_.zero_point[0] * int(count), mult, m.shift - shift, out_.zero_point[0]};
    }
    return st;
  }
  // Whether the CPU takes its 4-D path (axes {1, 2} with keep_dims).
  bool Spatial(const Shape& s) const {
    if (!keep_dims_ || s.size() != 4) return false;
    std::vector<int64_t> resolved;
    for (int64_t a : axes_) {
      const int64_t r = cpu_.litert && a < 0 ? a + 4 : a;
      if (cpu_.litert && std::find(resolved.begin(), resolved.end(), r) != resolved.end()) continue;
      resolved.push_back(r);
    }
    return resolved.size() == 2 &&
           ((resolved[0] == 1 && resolved[1] == 2) || (resolved[0] == 2 && resolved[1] == 1));
  }
  // Per channel, whether LiteRT's NEON loop rounds it: its threads take contiguous channel
  // ranges, each a loop over 16 channels at a time and a scalar remainder.
  std::vector<uint8_t> VectorChannels(int c) const {
    std::vector<uint8_t> up(c, 0);
    if (!cpu_.neon) return up;
    const int threads = std::max(1, std::min(c / 8, cpu_.threads));
    int start = 0;
    for (int i = 0; i < threads; ++i) {
      const int end = start + (c - start) / (threads - i);
      for (int k = start; k + 16 <= end; k += 16) std::fill(up.begin() + k, up.begin() + k + 16, 1);
      start = end;
    }
    return up;
  }

  std::vector<int64_t> axes_;
  bool keep_dims_;
  ValueType type_;
  QuantParams in_, out_;
  CpuKernels cpu_;
  bool spatial_ = false;
  Buffer meta_, params_, up_, acc_;
  Int8SqueezeState squeeze_;  // the folded dense ops' launch (ops/squeeze.h)
  double dense_flops_ = 0;
};

}  // namespace

std::string CheckMeanInt8(const GraphView& g, const NodeInfo& node) {
  const ValueType t = g.value_type(node.inputs[0]);
  for (int x : {node.inputs[0], node.outputs[0]})
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  std::vector<int64_t> axes;
  if (auto why = g.ReadConstantInts(node.inputs[1], "axes", &axes); !why.empty()) return why;
  const Shape s = g.shape(node.inputs[0]);
  if (s.empty() || s.size() > 8) return "rank must be 1-8";
  std::vector<bool> mask;
  if (auto why = Mask(axes, s.size(), &mask); !why.empty()) return why;
  int64_t count = 1;
  for (size_t a = 0; a < s.size(); ++a)
    if (mask[a]) count *= s[a];
  if (count == 0 || NumElements(s) == 0) return "empty input";
  // The int32 sums (and the zero point times the count) must not overflow.
  if (count > (int64_t(1) << 23)) return "more than 2^23 elements per mean overflow int32 sums";
  ReducerParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (g.shape(node.outputs[0]) != Reduced(s, mask, p.keep_dims))
    return "output shape is not the reduced shape";
  return "";
}

std::unique_ptr<Op> CreateMeanInt8(const GraphView& g, const NodeInfo& node) {
  ReducerParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<MeanInt8Op>(g, node, g.ConstantInts(node.inputs[1]), p.keep_dims);
}

}  // namespace clgpu
