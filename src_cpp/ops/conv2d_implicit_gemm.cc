// Implicit GEMM: the convolution as [N*OH*OW, KH*KW*C] x [KH*KW*C, OC] with the im2col
// rows read in place, split along K when its output tiles cannot fill the device.
#include "ops/conv2d_algorithm.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

GemmTiles ImplicitGemmTiles(const ConvGeometry& g, const DeviceInfo& dev) {
  if (g.c <= 8) return TilesFor("igemm_thin", dev);
  return TilesFor(g.c >= 64 && g.oc >= 64 ? "igemm_big" : "igemm", dev);
}

bool Applies(const ConvGeometry&) { return true; }

std::vector<size_t> Scratch(const OpContext& ctx, const ConvGeometry& g) {
  const size_t bytes =
      GemmScratchBytes(PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits),
                       long(g.n) * g.oh * g.ow, g.oc);
  return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
}

std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual) {
  std::vector<Launch> launches;
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";
  const GemmPlan p = PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits);
  const long m = long(g.n) * g.oh * g.ow;
  // Split or whole, its own kernels (kernels/conv2d_implicit_gemm.cl); split, the split kernel
  // ignores the residual, the reduce adds it.
  auto prog = ctx.GetProgram("conv2d_implicit_gemm",
                             With(With(p.tiles.Defines(), rd), p.splits > 1 ? "-DSPLIT_K" : ""));
  if (p.splits <= 1) {
    Launch l = Make1d(prog, "conv2d_implicit_gemm", p.tiles.Global(m, g.oc), p.tiles.work_group());
    SetArgsAndOptional(l.kernel, residual, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c, g.oh,
                       g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left,
                       act_min, act_max);
    launches.push_back(std::move(l));
    return launches;
  }
  if (ctx.scratch.empty()) throw Error("split-K implicit GEMM without a scratch buffer");
  Launch l =
      Make1d(prog, "conv2d_implicit_gemm_splitk", p.tiles.Global(m, g.oc), p.tiles.work_group());
  SetArgs(l.kernel, in, w.filter.get(), ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.oc, g.kh,
          g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, p.k_per_split);
  l.dims = 2;
  l.global[1] = p.splits;
  l.local[1] = 1;
  launches.push_back(std::move(l));
  Launch r = Make1d(prog, "gemm_splitk_reduce", size_t(m) * g.oc);
  SetArgsAndOptional(r.kernel, residual, ctx.scratch[0], bias, out, static_cast<int>(m), g.oc,
                     p.splits, act_min, act_max);
  launches.push_back(std::move(r));
  return launches;
}

// The 1x1 convolution's GEMM over a depthwise's output: M its output pixels, K its channels.
GemmPlan PlanDepthwiseGemm(const DeviceInfo& dev, const ConvGeometry& dw, int oc,
                           int forced_splits) {
  ConvGeometry pw = dw;
  pw.h = dw.oh, pw.w = dw.ow, pw.oc = oc, pw.kh = pw.kw = 1;
  GemmPlan p;
  p.tiles = ImplicitGemmTiles(pw, dev);
  PlanSplitK(p, dev, p.tiles.Groups(long(dw.n) * dw.oh * dw.ow, oc), dw.c, forced_splits,
             /*work_items=*/2048, /*min_tiles=*/1);
  return p;
}

GemmPlan PlanDepthwiseGemm(const OpContext& ctx, const ConvGeometry& dw, int oc) {
  return PlanDepthwiseGemm(ctx.env.device(), dw, oc, ctx.options.gemm_splits);
}

// Split, a split kernel and its reduce.
int Launches(const DeviceInfo& dev, const ConvGeometry& g) {
  return PlanImplicitGemm(dev, g, 0).splits > 1 ? 2 : 1;
}

}  // namespace

int DepthwiseGemmLaunches(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  return PlanDepthwiseGemm(dev, dw, oc, 0).splits > 1 ? 2 : 1;
}

std::vector<size_t> DepthwiseGemmScratchBytes(const OpContext& ctx, const ConvGeometry& dw,
                                              int oc) {
  const size_t bytes =
      GemmScratchBytes(PlanDepthwiseGemm(ctx, dw, oc), long(dw.n) * dw.oh * dw.ow, oc);
  return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
}

std::vector<Launch> EncodeDepthwiseGemm(OpContext& ctx, const FloatDepthwiseA& dw, int oc,
                                        cl_mem in, const ConvWeights& w, cl_mem bias, cl_mem out,
                                        float act_min, float act_max, cl_mem residual) {
  const ConvGeometry& g = dw.g;
  if (g.oc != g.c) throw Error("a folded depthwise needs depth multiplier 1");
  const GemmPlan p = PlanDepthwiseGemm(ctx, g, oc);
  const long m = long(g.n) * g.oh * g.ow;
  const bool expand = dw.expand_filter != nullptr;
  const std::string defines =
      With(With(p.tiles.Defines(), "-DDW_A -DDW_KH=" + std::to_string(g.kh) + " -DDW_KW=" +
                                       std::to_string(g.kw) + (expand ? " -DEXPAND_A" : "")),
           dw.epilogue);
  // The expand's arguments follow the depthwise's (kernels/conv2d_implicit_gemm.cl).
  auto set_expand = [&](const Kernel& k, cl_uint next) {
    if (expand)
      SetArgsFrom(k, next, dw.expand_c, dw.expand_filter, dw.expand_bias, dw.expand_min,
                  dw.expand_max);
  };
  std::vector<Launch> launches;
  if (p.splits <= 1) {
    auto prog =
        ctx.GetProgram("conv2d_implicit_gemm", With(defines, residual ? "-DHAS_RESIDUAL" : ""));
    Launch l = Make1d(prog, "conv2d_implicit_gemm", p.tiles.Global(m, oc), p.tiles.work_group());
    SetArgs(l.kernel, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c, g.oh, g.ow, oc, g.kh, g.kw,
            g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, act_min, act_max);
    cl_uint next = 21;
    if (residual) SetArgsFrom(l.kernel, next++, residual);
    SetArgsFrom(l.kernel, next, dw.filter, dw.bias, dw.act_min, dw.act_max);
    set_expand(l.kernel, next + 4);
    launches.push_back(std::move(l));
    return launches;
  }
  if (ctx.scratch.empty()) throw Error("split-K depthwise GEMM without a scratch buffer");
  auto prog = ctx.GetProgram("conv2d_implicit_gemm",
                             With(With(defines, residual ? "-DHAS_RESIDUAL" : ""), "-DSPLIT_K"));
  Launch l =
      Make1d(prog, "conv2d_implicit_gemm_splitk", p.tiles.Global(m, oc), p.tiles.work_group());
  SetArgs(l.kernel, in, w.filter.get(), ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, oc, g.kh,
          g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, p.k_per_split, dw.filter, dw.bias,
          dw.act_min, dw.act_max);
  set_expand(l.kernel, 23);
  l.dims = 2;
  l.global[1] = p.splits;
  l.local[1] = 1;
  launches.push_back(std::move(l));
  Launch r = Make1d(prog, "gemm_splitk_reduce", size_t(m) * oc);
  SetArgsAndOptional(r.kernel, residual, ctx.scratch[0], bias, out, static_cast<int>(m), oc,
                     p.splits, act_min, act_max);
  launches.push_back(std::move(r));
  return launches;
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

extern const ConvAlgorithmDef kConvImplicitGemm = {
    ConvAlgorithm::kImplicitGemm, "implicit_gemm", Applies, PlainWeightBytes,
    UploadPlainWeights,           Scratch,         Encode,  Launches};

}  // namespace clgpu
