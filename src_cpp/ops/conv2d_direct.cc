// Direct convolution: one work-item per output element, any geometry, grouped too.
#include "ops/conv2d_algorithm.h"

namespace clgpu {
namespace {

bool Applies(const ConvGeometry&) { return true; }

std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";
  Launch l = Make1d(ctx.GetProgram("conv2d_direct", rd), "conv2d_direct", 0);
  SetArgsAndOptionals(l.kernel, {residual, slopes}, in, w.filter.get(), bias, out, g.n, g.h, g.w,
                      g.c, g.oh, g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top,
                      g.pad_left, g.c / g.groups, g.oc / g.groups, act_min, act_max);
  l.dims = 3;
  l.global[0] = g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace

extern const ConvAlgorithmDef kConvDirect = {
    ConvAlgorithm::kDirect, "direct",  Applies, PlainWeightBytes,
    UploadPlainWeights,     NoScratch, Encode};

}  // namespace clgpu
