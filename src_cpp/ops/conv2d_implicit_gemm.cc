// Implicit GEMM: the convolution as [N*OH*OW, KH*KW*C] x [KH*KW*C, OC] with the im2col
// rows read in place, split along K when its output tiles cannot fill the device.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/conv2d_algorithm.h"
#include "ops/split_k_forms.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

bool BigTiles(const ConvGeometry& g) { return g.c >= 64 && g.oc >= 64; }

GemmTiles ImplicitGemmTiles(const ConvGeometry& g, const DeviceInfo& dev) {
  if (g.c <= 8) return TilesFor("igemm_thin", dev);
  return TilesFor(BigTiles(g) ? "igemm_big" : "igemm", dev);
}

bool Applies(const ConvGeometry&) { return true; }

// kernels/conv2d_implicit_gemm.cl's prm: the constant buffers' slots (kFilter .. kShift), then
// the geometry from kGeometry (N, H, W, C, OH, OW, OC, KH, KW, SH, SW, DH, DW, PT, PL), and the
// rest at their indices.
enum IgParam {
  kFilter,
  kBias,
  kDwFilter,
  kDwBias,
  kExFilter,
  kExBias,
  kScale,
  kShift,
  kGeometry = 8,
  kKPerSplit = 23,
  kAct = 24,
  kDwAct = 26,
  kExC = 28,
  kExAct = 29,
  kAffine = 31,
  kSlopes = 35,
  kOutSlice = 36,
  kInPitch = 38,
  kIgParams = 39
};

// A launch's scalars and constant buffers as the kernel reads them (ParamBlock): the geometry,
// the output's bias and clamp, the filter.
ParamBlock IgParams(const ConvGeometry& g, int oc, cl_mem filter, cl_mem bias, float act_min,
                    float act_max) {
  ParamBlock p(kIgParams);
  const int geo[] = {g.n,  g.h,  g.w,  g.c,  g.oh, g.ow,      oc,        g.kh,
                     g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left};
  for (size_t i = 0; i < std::size(geo); ++i) p.Int(kGeometry + i, geo[i]);
  p.Slot(kFilter, filter), p.Slot(kBias, bias);
  p.Float(kAct, act_min), p.Float(kAct + 1, act_max);
  return p;
}

// ctx's concatenation slice (OpContext::out_ldc) into the launch's parameters; its define.
std::string SliceParams(const OpContext& ctx, ParamBlock& args) {
  if (!ctx.out_ldc) return "";
  args.Int(kOutSlice, ctx.out_ldc), args.Int(kOutSlice + 1, ctx.out_offset);
  return "-DOUT_SLICE";
}

// ctx's input pitch (OpContext::in_ldc, a concatenation chain) likewise.
std::string PitchParams(const OpContext& ctx, ParamBlock& args) {
  if (!ctx.in_ldc) return "";
  args.Int(kInPitch, ctx.in_ldc);
  return "-DIN_PITCH";
}

std::vector<size_t> Scratch(const OpContext& ctx, const ConvGeometry& g) {
  const size_t bytes =
      GemmScratchBytes(PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits),
                       long(g.n) * g.oh * g.ow, g.oc);
  return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
}

// The plain convolution's launches, its input seen through `affine` when one is given.
std::vector<Launch> EncodeWith(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                               const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                               float act_max, cl_mem residual, const AffineA* affine,
                               cl_mem slopes) {
  std::vector<Launch> launches;
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";
  const std::string ad = AffineDefines(affine);
  const GemmPlan p = PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits);
  const long m = long(g.n) * g.oh * g.ow;
  ParamBlock args = IgParams(g, g.oc, w.filter.get(), bias, act_min, act_max);
  args.Int(kKPerSplit, p.k_per_split);
  if (affine) {
    cl_mem s = affine->scale ? affine->scale : affine->shift;
    args.Slot(kScale, s), args.Slot(kShift, affine->shift ? affine->shift : s);
    args.Float(kAffine, affine->lo1), args.Float(kAffine + 1, affine->hi1);
    args.Float(kAffine + 2, affine->lo2), args.Float(kAffine + 3, affine->hi2);
  }
  if (slopes) args.Slot(kSlopes, slopes);
  const std::string slice = With(SliceParams(ctx, args), PitchParams(ctx, args));
  const std::string packed = args.Upload(ctx);
  // Split or whole, its own kernels (kernels/conv2d_implicit_gemm.cl).
  auto prog = ctx.GetProgram("conv2d_implicit_gemm",
                             With(With(With(With(With(p.tiles.Defines(), rd),
                                                 p.splits > 1 ? SplitDefines(ctx, p.splits) : ""),
                                            ad),
                                       packed),
                                  slice));
  if (p.splits <= 1) {
    Launch l = Make1d(prog, "conv2d_implicit_gemm", p.tiles.Global(m, g.oc), p.tiles.work_group());
    SetArgsAndOptional(l.kernel, residual, in, out);
    args.Set(l.kernel, residual ? 3 : 2);
    l.consts = args.TakeBuffer();
    launches.push_back(std::move(l));
    return launches;
  }
  if (ctx.scratch.empty()) throw Error("split-K implicit GEMM without a scratch buffer");
  return SplitLaunches(ctx, prog, p, m, g.oc, in, args, bias, out, act_min, act_max, residual,
                       slopes);
}

std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  return EncodeWith(ctx, g, in, w, bias, out, act_min, act_max, residual, nullptr, slopes);
}

// The 1x1 convolution's GEMM over a depthwise's output: M its output pixels, K its channels.
GemmPlan PlanDepthwiseGemm(const DeviceInfo& dev, const ConvGeometry& dw, int oc,
                           int forced_splits) {
  ConvGeometry pw = dw;
  pw.h = dw.oh, pw.w = dw.ow, pw.oc = oc, pw.kh = pw.kw = 1;
  GemmPlan p;
  p.tiles = ImplicitGemmTiles(pw, dev);
  const long m = long(dw.n) * dw.oh * dw.ow;
  // Each column of tiles computes the depthwise again, so the columns stay igemm_big's; where
  // its rows leave the device short of one group per compute unit (a spectrogram's small maps),
  // the profile's "igemm_dw_small" splits them finer (bench/results/ab-options-dwsmall-*.md).
  if (BigTiles(pw) && p.tiles.Groups(m, oc) < dev.compute_units)
    p.tiles = TilesFor("igemm_dw_small", dev, "igemm_big");
  PlanSplitK(p, dev, p.tiles.Groups(m, oc), dw.c, forced_splits, /*work_items=*/2048,
             /*min_tiles=*/1);
  return p;
}

GemmPlan PlanDepthwiseGemm(const OpContext& ctx, const ConvGeometry& dw, int oc) {
  return PlanDepthwiseGemm(ctx.env.device(), dw, oc, ctx.options.gemm_splits);
}

// The inverted-residual block kernel (kernels/inverted_residual.cl): its group size, and the
// most outputs one work-item sums (IRB_OPT) and expands it computes (IRB_YPT) in a pass.
constexpr int kBlockWg = 256, kBlockOutputsPerItem = 8, kBlockExpandsPerItem = 8;
// The project's weights one work-item holds in registers across a pass (IRB_PWI x IRB_OPT
// float4s): more would cost the group its occupancy on larger maps.
constexpr int kBlockHeldWeights = 12;

struct BlockPlan {
  int rows = 1, chunk = 0, lanes = 1;
  int outputs_per_item = 1, expands_per_item = 1, held_steps = 0;
  bool vec = false;
  size_t local_floats = 0;
  long groups = 0;
  // The kernel's defines for this plan.
  std::string Defines() const {
    return "-DIRB_OPT=" + std::to_string(outputs_per_item) +
           " -DIRB_YPT=" + std::to_string(expands_per_item) +
           " -DIRB_PWI=" + std::to_string(held_steps) + (vec ? " -DIRB_VEC" : "");
  }
};

long CeilDiv(long a, long b) { return (a + b - 1) / b; }

// How the block kernel runs expand -> depthwise -> project on this device, or nullopt where it
// cannot: a group takes `rows` output rows of one image (about one group per compute unit: rows
// of 1 were the fastest on the H200, bench/results/ab-options-irblock-*.md), all their output
// channels, and `chunk` expanded channels at a time, with the block's input pixels, the chunk's
// weights and the expand's and depthwise's outputs in local memory (at most 7/8 of the
// device's, and 44 KB), in as few passes over the expanded channels as fit, at most two, of
// equal size: each pass is a chain of loads and barriers whatever its width
// (bench/results/irb-probe-*.md).
std::optional<BlockPlan> PlanBlock(const DeviceInfo& dev, const ConvGeometry& dw, int ec, int oc) {
  if (ec <= 0 || dw.n <= 0 || dw.oh <= 0 || dw.ow <= 0 || dw.c <= 0 || oc <= 0 || dw.kh <= 0 ||
      dev.max_work_group_size < size_t(kBlockWg))
    return std::nullopt;
  const long budget = long(BlockLocalFloats(dev)) - 3;
  const long units = std::max(dev.compute_units, 1);
  const bool vec = ec % 4 == 0 && dw.c % 4 == 0;
  // The expand's weight rows as the kernel strides them (IRB_WSTRIDE).
  const long wstride = vec ? ec + ((ec / 4) % 2 == 0 ? 4 : 0) : ec + 1;
  int rows = int(std::clamp<long>((long(dw.n) * dw.oh + units - 1) / units, 1, dw.oh));
  for (; rows >= 1; --rows) {
    const long outputs = long(rows) * dw.ow * oc;
    if (outputs > long(kBlockWg) * kBlockOutputsPerItem) continue;
    BlockPlan p;
    p.rows = rows;
    p.vec = vec;
    // Lanes per output: as many as the slots allow, no more than the channels' fours.
    const long lane_cap = std::min<long>(32, std::max<long>(1, (dw.c + 3) / 4));
    while (p.lanes * 2 <= lane_cap &&
           outputs * p.lanes * 2 <= long(kBlockWg) * kBlockOutputsPerItem)
      p.lanes *= 2;
    const long in_pixels = (long(rows - 1) * dw.sh + long(dw.kh - 1) * dw.dh + 1) * dw.w;
    const long fixed = in_pixels * ec;  // the input pixels
    if (fixed >= budget || !BlockItemsFit(dev, in_pixels, dw.c, ec)) continue;
    // Per expanded channel: its expand weights (a padded row), depthwise taps, two biases and
    // its outputs at the input and output pixels (kernels/inverted_residual.cl's layout).
    const long per_channel = wstride + long(dw.kh) * dw.kw + 2 + in_pixels + long(rows) * dw.ow;
    long chunk = std::min<long>(
        {dw.c, (budget - fixed) / per_channel, long(kBlockWg) * kBlockExpandsPerItem / in_pixels});
    // More passes over the expanded channels than two: slower than the GEMM on the H200 (blocks
    // of 432 and 576 expanded channels in four passes, 25-28 us against 19-22 us for its
    // kernels; docs/performance.md).
    if (chunk < dw.c) chunk -= chunk % 4;
    if (chunk <= 0 || CeilDiv(dw.c, chunk) > 2) continue;
    if (const long cap = BlockChunkCap()) chunk = std::min(chunk, cap);
    if (chunk < dw.c) {
      // Passes of equal width (a second of a few channels costs as much as the first).
      const long even = CeilDiv(CeilDiv(dw.c, CeilDiv(dw.c, chunk)), 4) * 4;
      chunk = std::min(chunk - chunk % 4, even);
    }
    if (chunk <= 0 || outputs * p.lanes > budget) continue;
    p.chunk = int(chunk);
    p.outputs_per_item = int(CeilDiv(outputs * p.lanes, kBlockWg));
    p.expands_per_item = int(CeilDiv(in_pixels * chunk, kBlockWg));
    if (dw.c % 4 == 0)
      p.held_steps =
          int(std::min<long>(CeilDiv(chunk, 4L * p.lanes), kBlockHeldWeights / p.outputs_per_item));
    p.local_floats = size_t(std::max(fixed + per_channel * chunk, outputs * p.lanes) + 3);
    p.groups = long(dw.n) * ((dw.oh + rows - 1) / rows);
    return p;
  }
  return std::nullopt;
}

std::vector<Launch> EncodeBlock(OpContext& ctx, const FloatDepthwiseA& dw, const BlockPlan& p,
                                int oc, cl_mem in, const ConvWeights& w, cl_mem bias, cl_mem out,
                                float act_min, float act_max, cl_mem residual) {
  const ConvGeometry& g = dw.g;
  const std::vector<cl_mem> parts = {dw.expand_filter, dw.expand_bias, dw.filter,
                                     dw.bias,          w.filter.get(), bias};
  std::vector<int> at;
  Buffer consts;
  const bool packed = PackConstants(ctx, parts, &consts, &at);
  auto prog = ctx.GetProgram("inverted_residual",
                             With(With(With("-DDW_KH=" + std::to_string(g.kh) + " -DDW_KW=" +
                                                std::to_string(g.kw) + " " + p.Defines(),
                                            dw.epilogue),
                                       residual ? "-DHAS_RESIDUAL" : ""),
                                  packed ? "-DPACKED" : ""));
  Launch l = Make1d(prog, "inverted_residual_block", size_t(p.groups) * kBlockWg, kBlockWg);
  l.consts = std::move(consts);
  // A compiler that cannot fit the group: the GEMM runs the block instead (nothing launched here).
  if (!BlockGroupFits(ctx, l.kernel, kBlockWg, "inverted_residual_block")) return {};
  auto c = [&](size_t i) { return ConstArg{parts[i], packed ? at[i] : 0, packed}; };
  SetArgsAndOptional(l.kernel, residual, in, c(0), c(1), c(2), c(3), c(4), c(5), out,
                     LocalBytes{p.local_floats * sizeof(float)}, g.n, g.h, g.w, dw.expand_c, g.c,
                     g.oh, g.ow, oc, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, p.rows, p.chunk,
                     p.lanes, dw.expand_min, dw.expand_max, dw.act_min, dw.act_max, act_min,
                     act_max);
  if (packed) SetArgsFrom(l.kernel, residual ? 33 : 32, l.consts.get());
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

// Split, a split kernel and its reduce: the form with the shorter device time, which the estimate
// counts (a partition runs the other where it measures that faster).
LaunchCount Launches(const DeviceInfo& dev, const ConvGeometry& g) {
  return SplitLaunchCount(dev, PlanImplicitGemm(dev, g, 0));
}

}  // namespace

LaunchCount DepthwiseGemmLaunches(const DeviceInfo& dev, const ConvGeometry& dw, int oc,
                                  int expand_c) {
  if (expand_c > 0 && BlockKernelAllowed() && PlanBlock(dev, dw, expand_c, oc)) return {};
  return SplitLaunchCount(dev, PlanDepthwiseGemm(dev, dw, oc, 0));
}

GemmTiles DepthwiseGemmTiles(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  return PlanDepthwiseGemm(dev, dw, oc, 0).tiles;
}

double BlockExpandProducts(const DeviceInfo& dev, const ConvGeometry& dw, int oc, int expand_c) {
  if (expand_c <= 0 || !BlockKernelAllowed()) return -1;
  const std::optional<BlockPlan> p = PlanBlock(dev, dw, expand_c, oc);
  if (!p) return -1;
  const double in_pixels = (double(p->rows - 1) * dw.sh + double(dw.kh - 1) * dw.dh + 1) * dw.w;
  return double(p->groups) * in_pixels * dw.c * expand_c;
}

std::vector<size_t> DepthwiseGemmScratchBytes(const OpContext& ctx, const ConvGeometry& dw,
                                              int oc) {
  const size_t bytes =
      GemmScratchBytes(PlanDepthwiseGemm(ctx, dw, oc), long(dw.n) * dw.oh * dw.ow, oc);
  return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
}

std::vector<Launch> EncodeDepthwiseGemm(OpContext& ctx, const FloatDepthwiseA& dw, int oc,
                                        cl_mem in, const ConvWeights& w, cl_mem bias, cl_mem out,
                                        float act_min, float act_max, cl_mem residual,
                                        cl_mem slopes) {
  const ConvGeometry& g = dw.g;
  if (g.oc != g.c) throw Error("a folded depthwise needs depth multiplier 1");
  if (ctx.in_ldc) throw Error("a folded depthwise reads no input of a wider pitch");
  // The block kernel takes no slopes and writes no concatenation: the GEMM runs such a block.
  if (dw.expand_filter && !slopes && !ctx.out_ldc && BlockKernelAllowed())
    if (const std::optional<BlockPlan> b = PlanBlock(ctx.env.device(), g, dw.expand_c, oc))
      if (std::vector<Launch> l =
              EncodeBlock(ctx, dw, *b, oc, in, w, bias, out, act_min, act_max, residual);
          !l.empty())
        return l;
  const GemmPlan p = PlanDepthwiseGemm(ctx, g, oc);
  const long m = long(g.n) * g.oh * g.ow;
  const bool expand = dw.expand_filter != nullptr;
  ParamBlock args = IgParams(g, oc, w.filter.get(), bias, act_min, act_max);
  args.Int(kKPerSplit, p.k_per_split);
  args.Slot(kDwFilter, dw.filter), args.Slot(kDwBias, dw.bias);
  args.Float(kDwAct, dw.act_min), args.Float(kDwAct + 1, dw.act_max);
  if (expand) {
    args.Slot(kExFilter, dw.expand_filter), args.Slot(kExBias, dw.expand_bias);
    args.Int(kExC, dw.expand_c);
    args.Float(kExAct, dw.expand_min), args.Float(kExAct + 1, dw.expand_max);
  }
  if (slopes) args.Slot(kSlopes, slopes);
  const std::string slice = SliceParams(ctx, args);
  const std::string packed = args.Upload(ctx);
  const std::string defines = With(
      With(With(With(p.tiles.Defines(), "-DDW_A -DDW_KH=" + std::to_string(g.kh) + " -DDW_KW=" +
                                            std::to_string(g.kw) + (expand ? " -DEXPAND_A" : "")),
                dw.epilogue),
           packed),
      slice);
  std::vector<Launch> launches;
  if (p.splits <= 1) {
    auto prog =
        ctx.GetProgram("conv2d_implicit_gemm", With(defines, residual ? "-DHAS_RESIDUAL" : ""));
    Launch l = Make1d(prog, "conv2d_implicit_gemm", p.tiles.Global(m, oc), p.tiles.work_group());
    SetArgsAndOptional(l.kernel, residual, in, out);
    args.Set(l.kernel, residual ? 3 : 2);
    l.consts = args.TakeBuffer();
    launches.push_back(std::move(l));
    return launches;
  }
  if (ctx.scratch.empty()) throw Error("split-K depthwise GEMM without a scratch buffer");
  auto prog = ctx.GetProgram(
      "conv2d_implicit_gemm",
      With(With(defines, residual ? "-DHAS_RESIDUAL" : ""), SplitDefines(ctx, p.splits)));
  return SplitLaunches(ctx, prog, p, m, oc, in, args, bias, out, act_min, act_max, residual,
                       slopes);
}

// K splits when the output tiles cannot fill the device (strided convs on 14x14 and 7x7
// maps; bench/results/ has the figures).
GemmPlan PlanImplicitGemm(const DeviceInfo& dev, const ConvGeometry& g, int forced_splits) {
  GemmPlan p;
  p.tiles = ImplicitGemmTiles(g, dev);
  PlanSplitK(p, dev, p.tiles.Groups(long(g.n) * g.oh * g.ow, g.oc), long(g.kh) * g.kw * g.c,
             forced_splits);
  return p;
}

std::vector<Launch> EncodeImplicitGemmConv(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                                           const ConvWeights& w, cl_mem bias, cl_mem out,
                                           float act_min, float act_max, cl_mem residual,
                                           const AffineA* affine, cl_mem slopes) {
  return EncodeWith(ctx, g, in, w, bias, out, act_min, act_max, residual, affine, slopes);
}

extern const ConvAlgorithmDef kConvImplicitGemm = {
    ConvAlgorithm::kImplicitGemm, "implicit_gemm", Applies, PlainWeightBytes,
    UploadPlainWeights,           Scratch,         Encode,  Launches};

}  // namespace clgpu
