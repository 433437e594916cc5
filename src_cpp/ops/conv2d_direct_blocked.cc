// direct_blocked: a direct convolution computing a block of output channels and PX output
// columns per work-item, from a filter laid out as [OC / OCB][KH][KW][C][OCB].
#include <cstdio>

#include "ops/conv2d_algorithm.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

// The blocking for this geometry: the table entry, with the output channels spread evenly over
// the fewest blocks of at most its OCB (OC = 17 with OCB 16: two blocks of 9, not 16 + 16;
// OC = 3: one of 3), rounded up to a multiple of 4 when OC is one (float4 weights and stores),
// and groups no larger than the work (small layers, chunks) or the device allows (the third
// dimension of a group is at most 64 on NVIDIA).
BlockedTiles BlockedFor(const ConvGeometry& g, const DeviceInfo& dev) {
  BlockedTiles t = BlockedTilesFor(g.oc <= 4 ? "direct_blocked_thin" : "direct_blocked", dev);
  const int blocks = (g.oc + t.ocb - 1) / t.ocb;
  const int even = (g.oc + blocks - 1) / blocks;
  t.ocb = (g.oc % 4 == 0 && RoundUp(even, 4) <= size_t(t.ocb)) ? int(RoundUp(even, 4)) : even;
  const int cols = (g.ow + t.px - 1) / t.px, rows = g.n * g.oh;
  t.wgx = std::min(t.wgx, std::max(cols, 1));
  t.wgy = std::min({t.wgy, std::max(rows, 1), 64,
                    std::max(static_cast<int>(dev.max_work_group_size / t.wgx), 1)});
  return t;
}

int ChannelBlocks(const ConvGeometry& g, const BlockedTiles& t) {
  return (g.oc + t.ocb - 1) / t.ocb;
}

std::string Defines(const ConvGeometry& g, const BlockedTiles& t) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "-DPX=%d -DOCB=%d -DWGX=%d -DWGY=%d -DKW=%d -DSW=%d -DDW=%d -DCV=%d -DVEC_OUT=%d",
                t.px, t.ocb, t.wgx, t.wgy, g.kw, g.sw, g.dw, g.c % 4 == 0 ? 4 : 1,
                g.oc % 4 == 0 && t.ocb % 4 == 0 ? 1 : 0);
  return buf;
}

// The filter OHWI -> [OC / OCB][KH][KW][C][OCB], zero past OC.
std::vector<float> BlockFilter(const ConvGeometry& g, int ocb, const std::vector<float>& ohwi) {
  const size_t taps = size_t(g.kh) * g.kw * g.c;
  const int blocks = (g.oc + ocb - 1) / ocb;
  std::vector<float> out(size_t(blocks) * ocb * taps, 0.f);
  for (int o = 0; o < g.oc; ++o)
    for (size_t t = 0; t < taps; ++t)
      out[(size_t(o / ocb) * taps + t) * ocb + o % ocb] = ohwi[size_t(o) * taps + t];
  return out;
}

bool Applies(const ConvGeometry&) { return true; }

size_t WeightBytes(const OpContext& ctx, const ConvGeometry& g) {
  const BlockedTiles t = BlockedFor(g, ctx.env.device());
  return size_t(ChannelBlocks(g, t)) * t.ocb * g.kh * g.kw * g.c * ctx.storage_bytes;
}

void PrepareWeights(OpContext& ctx, const ConvGeometry& g, const std::vector<float>& filter_ohwi,
                    ConvWeights* w) {
  w->filter = UploadWeights(ctx, BlockFilter(g, BlockedFor(g, ctx.env.device()).ocb, filter_ohwi));
}

std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";
  const BlockedTiles t = BlockedFor(g, ctx.env.device());
  auto prog = ctx.GetProgram("conv2d_blocked", With(Defines(g, t), rd));
  Launch l;
  l.name = "conv2d_blocked";
  l.kernel = CreateKernel(*prog, l.name.c_str());
  SetArgsAndOptionals(l.kernel, {residual, slopes}, in, w.filter.get(), bias, out, g.n, g.h, g.w,
                      g.c, g.oh, g.ow, g.oc, g.kh, g.sh, g.dh, g.pad_top, g.pad_left, act_min,
                      act_max);
  l.dims = 3;
  l.local[0] = 1, l.local[1] = t.wgx, l.local[2] = t.wgy;
  l.global[0] = ChannelBlocks(g, t);
  l.global[1] = RoundUp((g.ow + t.px - 1) / t.px, t.wgx);
  l.global[2] = RoundUp(size_t(g.n) * g.oh, t.wgy);
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace

extern const ConvAlgorithmDef kConvDirectBlocked = {ConvAlgorithm::kDirectBlocked,
                                                    "direct_blocked",
                                                    Applies,
                                                    WeightBytes,
                                                    PrepareWeights,
                                                    NoScratch,
                                                    Encode};

}  // namespace clgpu
