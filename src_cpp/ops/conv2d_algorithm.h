// The contract of one convolution algorithm (one file each, ops/conv2d_<name>.cc): the
// shapes it applies to ("can"), its device-side filter, its scratch and its launches.
// Which one runs ("should") is ops/conv2d_selector.cc's business.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cl/errors.h"
#include "common/error.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm.h"

namespace clgpu {

struct ConvAlgorithmDef {
  ConvAlgorithm id;
  const char* name;  // the conv_algorithm option's value that forces it
  // Correct for this geometry?
  bool (*applies)(const ConvGeometry& g);
  // Bytes of the device-side filter (the largest buffer PrepareWeights makes).
  size_t (*weight_bytes)(const OpContext& ctx, const ConvGeometry& g);
  // Fills w->filter (and the blocking it was laid out for) from the OHWI filter.
  void (*prepare_weights)(OpContext& ctx, const ConvGeometry& g,
                          const std::vector<float>& filter_ohwi, ConvWeights* w);
  // Scratch bytes per slot (OpContext::scratch).
  std::vector<size_t> (*scratch_bytes)(const OpContext& ctx, const ConvGeometry& g);
  // The launches; residual and slopes as in EncodeConv (every algorithm takes both). The
  // kernel that writes the output takes them after its other arguments, in that order
  // (kernels/common.cl's RESIDUAL_PARAM, SLOPES_PARAM); the op's context builds every program
  // with -DCHANNEL_SLOPES when it has slopes (Op::epilogue_defines).
  std::vector<Launch> (*encode)(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                                const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                                float act_max, cl_mem residual, cl_mem slopes);
  // How many kernels encode launches, from the same plan (the cost model's count, before an
  // op exists; default options); null: one.
  LaunchCount (*launches)(const DeviceInfo& dev, const ConvGeometry& g) = nullptr;
};

// The algorithms, each defined in its own file.
extern const ConvAlgorithmDef kConvDirect;
extern const ConvAlgorithmDef kConvImplicitGemm;
extern const ConvAlgorithmDef kConvGemm1x1;
extern const ConvAlgorithmDef kConvWinograd;
extern const ConvAlgorithmDef kConvWinograd4;
extern const ConvAlgorithmDef kConvDirectBlocked;
extern const ConvAlgorithmDef kConvWinograd4Fused;

// --- what the selector reads of the algorithms' plans ---

// Implicit GEMM tiles and, when its output tiles cannot fill the device, K splits
// (ops/conv2d_implicit_gemm.cc).
GemmPlan PlanImplicitGemm(const DeviceInfo& dev, const ConvGeometry& g, int forced_splits);
// Winograd F(2x2) or F(4x4) (a): output tiles over the whole output, and the work-groups
// of its batched GEMM (ops/conv2d_winograd.cc).
long WinogradOutputTiles(const ConvGeometry& g, ConvAlgorithm a);
long WinogradGemmGroups(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm a);

// --- helpers shared by the algorithm files ---

// F(4x4) runs filters over 3x3 as a sum of 3x3 sub-filters (conv2d_winograd4.cl): the GEMM
// reduces over subs * C columns.
inline int Winograd4Subs(const ConvGeometry& g) { return ((g.kh + 2) / 3) * ((g.kw + 2) / 3); }

inline size_t OhwiBytes(const OpContext& ctx, const ConvGeometry& g) {
  return size_t(g.oc) * g.kh * g.kw * (g.c / g.groups) * ctx.storage_bytes;
}

// Two sets of -D options as one (program cache keys stay as they were when `more` is empty).
inline std::string With(const std::string& defines, const std::string& more) {
  return more.empty() ? defines : defines.empty() ? more : defines + " " + more;
}

// Enqueues a one-off 1-D kernel now (filter transforms).
inline void Run(OpContext& ctx, const Kernel& k, size_t global) {
  const size_t g = RoundUp(std::max<size_t>(global, 1), 64);
  CheckCl(
      Cl().clEnqueueNDRangeKernel(ctx.queue, k.get(), 1, nullptr, &g, nullptr, 0, nullptr, nullptr),
      "clEnqueueNDRangeKernel");
}

inline Launch Make1d(std::shared_ptr<Program> prog, const char* name, size_t global,
                     size_t local = 0) {
  Launch l;
  l.name = name;
  l.kernel = CreateKernel(*prog, name);
  l.dims = 1;
  l.global[0] = local ? global : RoundUp(std::max<size_t>(global, 1), 64);
  l.local[0] = local;
  return l;
}

inline std::vector<size_t> NoScratch(const OpContext&, const ConvGeometry&) { return {}; }

// The plain OHWI filter (direct, GEMM, implicit GEMM).
inline size_t PlainWeightBytes(const OpContext& ctx, const ConvGeometry& g) {
  return OhwiBytes(ctx, g);
}
inline void UploadPlainWeights(OpContext& ctx, const ConvGeometry&,
                               const std::vector<float>& filter_ohwi, ConvWeights* w) {
  w->filter = UploadWeights(ctx, filter_ohwi);
}

}  // namespace clgpu
