// "Should": which convolution algorithm runs a geometry on a device. What each algorithm
// can do, and how, lives in its own file (ops/conv2d_algorithm.h); the measurements behind
// these choices are in bench/results/conv-algorithms-*.md and conv2d-*.md.
#include "ops/conv2d_selector.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "ops/conv2d_algorithm.h"
#include "ops/tuning.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The one table of algorithms, in the order the option's values are listed.
const ConvAlgorithmDef* const kAlgorithms[] = {
    &kConvDirect,    &kConvImplicitGemm,  &kConvGemm1x1,       &kConvWinograd,
    &kConvWinograd4, &kConvDirectBlocked, &kConvWinograd4Fused};

// Only the direct algorithm reads a group's channels; the others read them all.
bool Applies(const ConvAlgorithmDef& d, const ConvGeometry& g) {
  return (g.groups == 1 || d.id == ConvAlgorithm::kDirect) && d.applies(g);
}

const ConvAlgorithmDef& Def(ConvAlgorithm a) {
  for (const ConvAlgorithmDef* d : kAlgorithms)
    if (d->id == a) return *d;
  throw Error("unknown convolution algorithm " + std::to_string(int(a)));
}

// On a GPU, when neither Winograd's batched GEMM nor implicit GEMM has the output tiles to
// fill the compute units (14x14 and 7x7 maps of batch-1 ResNets), implicit GEMM splits K and
// fills them; Winograd does not.
bool SmallMapsFavourSplitK(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm w) {
  if (!dev.profile.gpu_plans) return false;
  const long tiles = WinogradOutputTiles(g, w);
  // With 1.5 output tiles per compute unit Winograd wins even with few work-groups; at fewer
  // split-K won (ResNet-50, Inception v1/v3; bench/conv_algorithms.py).
  if (2 * tiles >= 3L * dev.compute_units) return false;
  const GemmPlan ip = PlanImplicitGemm(dev, g, 0);
  return WinogradGemmGroups(g, dev, w) < dev.compute_units &&
         ip.tiles.Groups(long(g.n) * g.oh * g.ow, g.oc) < dev.compute_units && ip.splits > 1;
}

}  // namespace

const std::vector<std::string>& ConvAlgorithmNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const ConvAlgorithmDef* d : kAlgorithms) names.push_back(d->name);
    return names;
  }();
  return kNames;
}

std::string ConvAlgorithmName(ConvAlgorithm a) { return Def(a).name; }

bool ConvAlgorithmApplies(ConvAlgorithm a, const ConvGeometry& g) { return Applies(Def(a), g); }

ConvAlgorithm SelectConvAlgorithm(const ConvGeometry& g, const DeviceInfo& dev,
                                  const std::string& forced) {
  for (const ConvAlgorithmDef* d : kAlgorithms)
    if (forced == d->name && Applies(*d, g)) return d->id;
  if (g.groups != 1) return ConvAlgorithm::kDirect;
  if (ConvAlgorithmApplies(ConvAlgorithm::kGemm1x1, g)) {
    // On a GPU the implicit GEMM's tiles beat the plain GEMM's on 1x1 layers of at least
    // 28x28 outputs; below that GEMM mostly won.
    const bool wide = dev.profile.gpu_plans && long(g.n) * g.oh * g.ow >= 784;
    return wide ? ConvAlgorithm::kImplicitGemm : ConvAlgorithm::kGemm1x1;
  }
  // Few input and output channels at high resolution: Winograd's transformed buffers and a
  // thin GEMM cost more than they save (direct_blocked lost from C = 32, OC = 32 on, and
  // with C = 512).
  const bool big_map = long(g.oh) * g.ow >= 65536;
  // Up to 32 input channels into 16 to 64 outputs at high resolution: the fused F(4x4) keeps
  // its transforms on chip and beats implicit GEMM, direct_blocked and the unfused F(4x4);
  // from C = 64 the unfused one's GEMM wins, with 3 outputs direct_blocked does. That holds
  // for the blocking that splits the positions (NVIDIA's table entry); with the unsplit
  // 2 x 2 blocks it had only won 3x3 layers with C <= 16, so GPUs whose entry does not split
  // keep that range.
  if (dev.profile.gpu_plans && g.oc >= 16 && big_map &&
      ConvAlgorithmApplies(ConvAlgorithm::kWinograd4Fused, g)) {
    const bool split = WinogradFusedTilesFor("winograd4_fused", dev).ps > 1;
    if (split ? g.c <= 32 && g.oc <= 64 : g.c <= 16 && g.kh == 3 && g.kw == 3)
      return ConvAlgorithm::kWinograd4Fused;
  }
  if (dev.profile.gpu_plans && g.sh == 1 && g.sw == 1 &&
      ((g.c <= 48 && g.oc <= 16) || (g.c <= 128 && g.oc <= 4)) && big_map)
    return ConvAlgorithm::kDirectBlocked;
  if (dev.profile.gpu_plans && g.sh == 2 && g.sw == 2 && g.c <= 16 && g.oc <= 32 && big_map)
    return ConvAlgorithm::kDirectBlocked;
  if (ConvAlgorithmApplies(ConvAlgorithm::kWinograd4, g) && g.c >= 16) {
    // Winograd needs enough input channels to make its GEMMs worth the transforms
    // (with C = 4 implicit GEMM wins); F(4x4) beat F(2x2) on every 3x3 shape of the
    // conv set, even with 3 output channels, once the output fills its tiles, and, as sums
    // of 3x3 sub-filters, beat implicit GEMM on every 5x5, 7x7 and 9x9 shape there.
    const ConvAlgorithm w = g.oh >= 8 && g.ow >= 8 ? ConvAlgorithm::kWinograd4
                            : ConvAlgorithmApplies(ConvAlgorithm::kWinograd, g)
                                ? ConvAlgorithm::kWinograd
                                : ConvAlgorithm::kImplicitGemm;
    if (w == ConvAlgorithm::kImplicitGemm || !SmallMapsFavourSplitK(g, dev, w)) return w;
  }
  return ConvAlgorithm::kImplicitGemm;
}

size_t ConvWeightBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  return Def(a).weight_bytes(ctx, g);
}

ConvAlgorithm ChooseConvAlgorithm(const OpContext& ctx, const ConvGeometry& g) {
  const ConvAlgorithm a = SelectConvAlgorithm(g, ctx.env.device(), ctx.options.conv_algorithm);
  if (a != ConvAlgorithm::kWinograd && a != ConvAlgorithm::kWinograd4 &&
      a != ConvAlgorithm::kWinograd4Fused)
    return a;
  ConvGeometry one = g;
  one.oc = 1;
  return ConvWeightBytes(ctx, a, one) > ctx.max_alloc ? ConvAlgorithm::kImplicitGemm : a;
}

std::shared_ptr<ConvWeights> PrepareConvWeights(OpContext& ctx, ConvAlgorithm a,
                                                const ConvGeometry& g,
                                                const std::vector<float>& filter_ohwi) {
  auto w = std::make_shared<ConvWeights>();
  Def(a).prepare_weights(ctx, g, filter_ohwi, w.get());
  if (a == ConvAlgorithm::kGemm1x1) w->max_abs = MaxAbs(filter_ohwi);
  return w;
}

std::vector<size_t> ConvScratchBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  return Def(a).scratch_bytes(ctx, g);
}

std::optional<ConvGeometry> GraphConvGeometry(const GraphView& graph, const NodeInfo& n) {
  const bool depthwise = n.op == tfl::kDepthwiseConv2d;
  if ((!depthwise && n.op != tfl::kConv2d) || !n.builtin_data || n.inputs.size() < 2 ||
      !graph.valid_tensor(n.inputs[0]) || !graph.valid_tensor(n.inputs[1]))
    return std::nullopt;
  const Shape x = graph.shape(n.inputs[0]), f = graph.shape(n.inputs[1]);
  if (x.size() != 4 || f.size() != 4) return std::nullopt;
  ConvGeometry g;
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = f[1], g.kw = f[2];
  int padding = 0;
  if (depthwise) {  // filter [1][KH][KW][C * multiplier]
    tfl::DepthwiseConvParams p;
    std::memcpy(&p, n.builtin_data, sizeof p);
    g.oc = f[3], g.sh = p.stride_height, g.sw = p.stride_width;
    g.dh = p.dilation_height, g.dw = p.dilation_width, padding = p.padding;
  } else {  // filter [OC][KH][KW][C]
    tfl::ConvParams p;
    std::memcpy(&p, n.builtin_data, sizeof p);
    g.oc = f[0], g.sh = p.stride_height, g.sw = p.stride_width;
    g.dh = p.dilation_height, g.dw = p.dilation_width, padding = p.padding;
    if (f[3] <= 0 || x[3] % f[3] != 0) return std::nullopt;
    g.groups = x[3] / f[3];
  }
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1) return std::nullopt;
  g.Compute(padding);
  if (g.oh <= 0 || g.ow <= 0) return std::nullopt;
  return g;
}

LaunchCount ConvLaunches(const ConvGeometry& g, const DeviceInfo& dev) {
  const ConvAlgorithmDef& d = Def(SelectConvAlgorithm(g, dev, ""));
  return d.launches ? d.launches(dev, g) : LaunchCount{};
}

LaunchCount GraphConvLaunches(const GraphView& g, const NodeInfo& n, const DeviceInfo& dev) {
  if (n.inputs.empty() || !g.valid_tensor(n.inputs[0]) || IsQuantized(g.value_type(n.inputs[0])))
    return {};
  const std::optional<ConvGeometry> geometry = GraphConvGeometry(g, n);
  return geometry ? ConvLaunches(*geometry, dev) : LaunchCount{};
}

std::vector<Launch> EncodeConv(OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g, cl_mem in,
                               const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                               float act_max, cl_mem residual, cl_mem slopes) {
  return Def(a).encode(ctx, g, in, w, bias, out, act_min, act_max, residual, slopes);
}

bool WinogradSpreadsOutlier(const std::vector<float>& filter) {
  std::vector<float> mags;
  for (float v : filter)
    if (v != 0) mags.push_back(std::fabs(v));
  if (mags.empty()) return false;
  const auto mid = mags.begin() + mags.size() / 2;
  std::nth_element(mags.begin(), mid, mags.end());
  return *std::max_element(mags.begin(), mags.end()) > 1024.0 * *mid;
}

}  // namespace clgpu
