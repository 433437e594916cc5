// 1x1 convolution as a plain GEMM: [N*H*W, C] x [C, OC] (ops/gemm.h).
#include "ops/conv2d_algorithm.h"

namespace clgpu {
namespace {

bool Applies(const ConvGeometry& g) { return g.Pointwise(); }

GemmPlan Plan(const OpContext& ctx, const ConvGeometry& g) {
  return PlanGemm(ctx.env.device(), long(g.n) * g.h * g.w, g.oc, g.c, ctx.options.gemm_splits);
}

// Split (not the small-M kernel), a split kernel and its reduce (EncodeGemm).
LaunchCount Launches(const DeviceInfo& dev, const ConvGeometry& g) {
  return {PlanGemm(dev, long(g.n) * g.h * g.w, g.oc, g.c).splits > 1 ? 2 : 1};
}

std::vector<size_t> Scratch(const OpContext& ctx, const ConvGeometry& g) {
  const size_t bytes = GemmScratchBytes(Plan(ctx, g), long(g.n) * g.h * g.w, g.oc);
  return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
}

std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  const long m = long(g.n) * g.h * g.w;
  return EncodeGemm(ctx, Plan(ctx, g), in, w.filter.get(), bias, out, static_cast<int>(m), g.oc,
                    g.c, act_min, act_max, residual, w.max_abs, slopes);
}

}  // namespace

bool Gemm1x1Tiled(const DeviceInfo& dev, const ConvGeometry& g) {
  return Applies(g) && !PlanGemm(dev, long(g.n) * g.h * g.w, g.oc, g.c).small_m;
}

bool GemmWritesSlices(ConvAlgorithm a, const DeviceInfo& dev, const ConvGeometry& g) {
  return a == ConvAlgorithm::kImplicitGemm ||
         (a == ConvAlgorithm::kGemm1x1 && Gemm1x1Tiled(dev, g));
}

std::vector<Launch> EncodeGemm1x1With(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                                      const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                                      float act_max, cl_mem residual, cl_mem slopes, cl_mem gate,
                                      const AffineA* affine) {
  const long m = long(g.n) * g.h * g.w;
  return EncodeGemm(ctx, Plan(ctx, g), in, w.filter.get(), bias, out, static_cast<int>(m), g.oc,
                    g.c, act_min, act_max, residual, w.max_abs, slopes, gate, affine);
}

extern const ConvAlgorithmDef kConvGemm1x1 = {
    ConvAlgorithm::kGemm1x1, "gemm",  Applies, PlainWeightBytes,
    UploadPlainWeights,      Scratch, Encode,  Launches};

}  // namespace clgpu
