#include "ops/conv2d_selector.h"

#include "common/error.h"
#include "delegate/options.h"

namespace clgpu {

std::string ConvAlgorithmName(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::kDirect: return "direct";
    case ConvAlgorithm::kGemm1x1: return "gemm";
    case ConvAlgorithm::kImplicitGemm: return "implicit_gemm";
    case ConvAlgorithm::kWinograd: return "winograd";
    case ConvAlgorithm::kWinograd4: return "winograd4";
  }
  return "?";
}

bool ConvAlgorithmApplies(ConvAlgorithm a, const ConvGeometry&, const DeviceInfo&) {
  return a == ConvAlgorithm::kDirect;
}

ConvAlgorithm SelectConvAlgorithm(const ConvGeometry& g, const DeviceInfo& dev,
                                  const Options& options) {
  if (options.conv_algorithm != "auto") {
    for (ConvAlgorithm a : {ConvAlgorithm::kDirect, ConvAlgorithm::kGemm1x1,
                            ConvAlgorithm::kImplicitGemm, ConvAlgorithm::kWinograd,
                            ConvAlgorithm::kWinograd4}) {
      if (ConvAlgorithmName(a) == options.conv_algorithm && ConvAlgorithmApplies(a, g, dev))
        return a;
    }
  }
  return ConvAlgorithm::kDirect;
}

std::shared_ptr<ConvWeights> PrepareConvWeights(OpContext& ctx, ConvAlgorithm,
                                                const ConvGeometry&,
                                                const std::vector<float>& filter_ohwi,
                                                const Shape&) {
  auto w = std::make_shared<ConvWeights>();
  w->filter = UploadWeights(ctx, filter_ohwi);
  return w;
}

std::vector<Launch> EncodeConv(OpContext& ctx, ConvAlgorithm, const ConvGeometry& g, cl_mem in,
                               const std::shared_ptr<ConvWeights>& w, cl_mem bias, cl_mem out,
                               float act_min, float act_max) {
  auto prog = ctx.GetProgram("conv2d_direct");
  Launch l;
  l.name = "conv2d_direct";
  l.kernel = CreateKernel(*prog, l.name);
  SetArgs(l.kernel, in, w->filter.get(), bias, out, g.n, g.h, g.w, g.c, g.oh, g.ow, g.oc, g.kh,
          g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, act_min, act_max);
  l.dims = 3;
  l.global[0] = g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
  std::vector<Launch> out_launches;
  out_launches.push_back(std::move(l));
  return out_launches;
}

}  // namespace clgpu
