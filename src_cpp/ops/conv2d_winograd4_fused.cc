// winograd4_fused: Winograd F(4x4) in one kernel (conv2d_winograd4_fused.cl) that keeps its
// transformed tiles on chip: no scratch, a filter transformed once into a blocked U
// [OC / OCB][CPAD][36][OCB].
#include <cstdio>

#include "ops/conv2d_algorithm.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

// The smallest unit * 2^k that holds `need`, at most `cap` (a multiple of unit): the fused kernel's
// blocks shrink to small layers in few steps, so few programs get built.
int ShrinkTo(int need, int unit, int cap) {
  int x = unit;
  while (x < need && x < cap) x *= 2;
  return std::min(x, cap);
}

// The blocking for this geometry: the table entry fitted to the device's work-group size and
// local memory, OCB no larger than OC needs and CC than the reduction has. OCB and CC lay out
// the filter, so they depend on the channels and the device only (a re-prepare for a new input
// size keeps its filter); only then does TP shrink to the tiles a row has.
WinogradFusedTiles FusedFor(const ConvGeometry& g, const DeviceInfo& dev) {
  WinogradFusedTiles t = WinogradFusedTilesFor("winograd4_fused", dev);
  t.ocb = ShrinkTo(g.oc, t.ro, t.ocb);
  t.cc = ShrinkTo(Winograd4Subs(g) * g.c, 1, t.cc);
  const auto exchange = [&] { return t.ps > 1 ? size_t(4 * 36) * t.tp * t.ocb : 0; };
  const auto local = [&] {
    return std::max(size_t(4 * 36) * (t.tp * t.cc + t.u_local * t.cc * t.ocb), exchange());
  };
  const auto half = [](int x, int m) { return std::max(m, x / 2 / m * m); };  // a multiple of m
  const size_t max_group = std::max<size_t>(dev.max_work_group_size, 1);
  // The device's limit (NVIDIA's OpenCL reports its 48 KB per kernel).
  const size_t max_local = dev.local_mem_bytes;
  while (t.Group() > max_group && t.tp > t.rt) t.tp = half(t.tp, t.rt);
  while (t.Group() > max_group && t.ocb > t.ro) t.ocb = half(t.ocb, t.ro);
  // Fewer tiles, not a smaller chunk, make the exchange of split positions fit.
  while (exchange() > max_local && t.tp > t.rt) t.tp = half(t.tp, t.rt);
  while (local() > max_local && t.cc > 1) t.cc = (t.cc + 1) / 2;
  if (local() > max_local) t.u_local = 0;
  while (local() > max_local && t.tp > t.rt) t.tp = half(t.tp, t.rt);
  if (t.Group() > max_group || local() > max_local)
    throw Error("winograd4_fused: no blocking fits the device (" + std::to_string(local()) +
                " bytes of local memory, groups of " + std::to_string(t.Group()) + ")");
  t.tp = ShrinkTo((g.ow + 3) / 4, t.rt, t.tp);
  return t;
}

// The reduction C' = subs * C rounded up to whole chunks: the fused filter's second dimension.
int FusedCpad(const ConvGeometry& g, const WinogradFusedTiles& t) {
  return int(RoundUp(size_t(Winograd4Subs(g)) * g.c, t.cc));
}

std::string FusedDefines(const WinogradFusedTiles& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "-DTP=%d -DOCB=%d -DCC=%d -DRT=%d -DRO=%d -DU_LOCAL=%d -DPS=%d",
                t.tp, t.ocb, t.cc, t.rt, t.ro, t.u_local, t.ps);
  return buf;
}

// As F(4x4): 3x3 to 9x9, stride 1, dilation 1.
bool Applies(const ConvGeometry& g) {
  return g.kh >= 3 && g.kh <= 9 && g.kw >= 3 && g.kw <= 9 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1;
}

// U with OC padded to its channel block, or the OHWI upload it is made from if larger.
size_t WeightBytes(const OpContext& ctx, const ConvGeometry& g) {
  const WinogradFusedTiles t = FusedFor(g, ctx.env.device());
  const size_t blocks = (g.oc + t.ocb - 1) / t.ocb;
  return std::max(OhwiBytes(ctx, g), blocks * t.ocb * FusedCpad(g, t) * 36 * sizeof(float));
}

// Transformed once on the device into the blocked layout of conv2d_winograd4_fused.cl.
void PrepareWeights(OpContext& ctx, const ConvGeometry& g, const std::vector<float>& filter_ohwi,
                    ConvWeights* w) {
  const WinogradFusedTiles t = FusedFor(g, ctx.env.device());
  w->ocb = t.ocb;
  w->cpad = FusedCpad(g, t);
  const size_t elements = size_t((g.oc + t.ocb - 1) / t.ocb) * t.ocb * w->cpad;
  Buffer ohwi = UploadWeights(ctx, filter_ohwi);
  w->filter = ctx.env.CreateBuffer(elements * 36 * sizeof(float), CL_MEM_READ_WRITE);
  Kernel kern = CreateKernel(*ctx.GetProgram("conv2d_winograd4_fused", FusedDefines(t)),
                             "winograd_f4_fused_filter_transform");
  SetArgs(kern, ohwi.get(), w->filter.get(), g.c, g.oc, g.kh, g.kw, w->cpad);
  Run(ctx, kern, elements);
  CheckCl(Cl().clFinish(ctx.queue), "clFinish(fused filter transform)");
  w->plain = std::move(ohwi);  // the tiles computed directly (not all finite) read it
}

// The one launch. A kernel whose registers cap its groups below the planned size
// (CL_KERNEL_WORK_GROUP_SIZE; reqd_work_group_size makes most compilers fit it instead) is
// rebuilt with fewer tiles per group rather than left to fail at the enqueue.
std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  const DeviceInfo& dev = ctx.env.device();
  WinogradFusedTiles t = FusedFor(g, dev);
  if (t.ocb != w.ocb || FusedCpad(g, t) != w.cpad)
    throw Error("winograd4_fused: the filter was laid out for OCB " + std::to_string(w.ocb) +
                " and " + std::to_string(w.cpad) + " reduction rows, the tuning now gives OCB " +
                std::to_string(t.ocb) + " (CLGPU_TUNE_WINOGRAD4_FUSED changed?)");
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";
  Launch l;
  l.name = "conv2d_winograd4_fused";
  for (;;) {
    l.kernel = CreateKernel(*ctx.GetProgram(l.name, With(FusedDefines(t), rd)), l.name);
    const size_t fits = KernelGroupLimit(ctx, l.kernel);
    const size_t group = t.Group();
    if (group <= fits) break;
    if (t.tp == t.rt)
      throw Error("winograd4_fused: groups of " + std::to_string(group) +
                  " work-items, the kernel allows " + std::to_string(fits) +
                  " (lower OCB or RO in CLGPU_TUNE_WINOGRAD4_FUSED)");
    t.tp = std::max(t.rt, t.tp / 2 / t.rt * t.rt);
  }
  SetArgsAndOptionals(l.kernel, {residual, slopes}, in, w.filter.get(), bias, out, g.n, g.h, g.w,
                      g.c, g.oh, g.ow, g.oc, g.pad_top, g.pad_left, g.kh, g.kw, w.cpad, act_min,
                      act_max, w.plain.get());
  const size_t th = (g.oh + 3) / 4, tw = (g.ow + 3) / 4;
  const size_t groups = size_t((g.oc + t.ocb - 1) / t.ocb) * g.n * th * ((tw + t.tp - 1) / t.tp);
  l.dims = 1;
  l.local[0] = t.Group();
  l.global[0] = groups * l.local[0];
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace

extern const ConvAlgorithmDef kConvWinograd4Fused = {ConvAlgorithm::kWinograd4Fused,
                                                     "winograd4_fused",
                                                     Applies,
                                                     WeightBytes,
                                                     PrepareWeights,
                                                     NoScratch,
                                                     Encode};

}  // namespace clgpu
