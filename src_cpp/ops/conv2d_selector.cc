#include "ops/conv2d_selector.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "cl/errors.h"
#include "common/error.h"
#include "ops/gemm.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

constexpr ConvAlgorithm kAll[] = {ConvAlgorithm::kDirect,        ConvAlgorithm::kGemm1x1,
                                  ConvAlgorithm::kImplicitGemm,  ConvAlgorithm::kWinograd,
                                  ConvAlgorithm::kWinograd4,     ConvAlgorithm::kDirectBlocked,
                                  ConvAlgorithm::kWinograd4Fused};

// Winograd variant: output tile size, positions per tile, kernel names.
struct WinogradKind {
  int tile, positions;
  const char* file;  // transforms
  const char* filter_transform;
  const char* input_transform;
  const char* output_transform;
};

const WinogradKind kF2 = {2,
                          16,
                          "conv2d_winograd",
                          "winograd_f2_filter_transform",
                          "winograd_f2_input_transform",
                          "winograd_f2_output_transform"};
const WinogradKind kF4 = {4,
                          36,
                          "conv2d_winograd4",
                          "winograd_f4_filter_transform",
                          "winograd_f4_input_transform",
                          "winograd_f4_output_transform"};

bool IsF4(ConvAlgorithm a) {
  return a == ConvAlgorithm::kWinograd4 || a == ConvAlgorithm::kWinograd4Fused;
}

const WinogradKind& Kind(ConvAlgorithm a) { return IsF4(a) ? kF4 : kF2; }

// F(4x4) runs filters over 3x3 as a sum of 3x3 sub-filters (conv2d_winograd4.cl): the GEMM
// reduces over subs * C columns.
int WinogradSubs(ConvAlgorithm a, const ConvGeometry& g) {
  return IsF4(a) ? ((g.kh + 2) / 3) * ((g.kw + 2) / 3) : 1;
}

// F(4x4) with half intermediates loses too much precision: its transformed
// buffers stay float under fp16 storage.
bool TransformedFloat(const OpContext& ctx, ConvAlgorithm a) {
  return a == ConvAlgorithm::kWinograd4 && ctx.storage_bytes == 2;
}
size_t TransformedBytes(const OpContext& ctx, ConvAlgorithm a) {
  return TransformedFloat(ctx, a) ? 4 : ctx.storage_bytes;
}
std::string WinogradDefines(const OpContext& ctx, ConvAlgorithm a) {
  return TransformedFloat(ctx, a) ? "-DTRANSFORMED_FLOAT" : "";
}

// Output tiles of a Winograd variant over the whole output: the rows of its batched GEMM.
long WinogradOutputTiles(const ConvGeometry& g, const WinogradKind& k) {
  return long(g.n) * ((g.oh + k.tile - 1) / k.tile) * ((g.ow + k.tile - 1) / k.tile);
}

// The batched GEMM's tiles: by OC, and the table's "_wide" entry where its bigger tiles still
// give every compute unit two work-groups (high-resolution layers; PyNET-512's 64x64 layers,
// 36 groups of 256 rows, would leave most of an H200 idle).
GemmTiles WinogradTiles(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm a) {
  const std::string name = g.oc <= 32    ? "winograd_gemm_thin"
                           : g.oc >= 128 ? "winograd_gemm_big"
                                         : "winograd_gemm";
  const WinogradKind& k = Kind(a);
  const long tiles = WinogradOutputTiles(g, k);
  const GemmTiles wide = TilesFor(name + "_wide", dev, name);
  if (k.positions * wide.Groups(tiles, g.oc) >= 2L * dev.compute_units) return wide;
  return TilesFor(name, dev);
}

GemmTiles ImplicitGemmTiles(const ConvGeometry& g, const DeviceInfo& dev) {
  if (g.c <= 8) return TilesFor("igemm_thin", dev);
  return TilesFor(g.c >= 64 && g.oc >= 64 ? "igemm_big" : "igemm", dev);
}

// Implicit GEMM tiles and, when its output tiles cannot fill the device (strided convs on
// 14x14 and 7x7 maps: 0.77 of ResNet-50's 2.16 ms of kernel time on an H200 before), K splits.
GemmPlan PlanImplicitGemm(const DeviceInfo& dev, const ConvGeometry& g, int forced_splits) {
  GemmPlan p;
  p.tiles = ImplicitGemmTiles(g, dev);
  PlanSplitK(p, dev, p.tiles.Groups(long(g.n) * g.oh * g.ow, g.oc), long(g.kh) * g.kw * g.c,
             forced_splits);
  return p;
}

// Tile rows per pass so V and Mo stay under the largest allowed buffer (and a
// share of device memory: scratch is not free).
int WinogradRowsPerPass(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  const WinogradKind& k = Kind(a);
  const long th = (g.oh + k.tile - 1) / k.tile, tw = (g.ow + k.tile - 1) / k.tile;
  // The kernels index V and Mo with 32-bit ints: a pass stays under 2^31 elements.
  const size_t tb = TransformedBytes(ctx, a);
  const size_t cap = std::min<size_t>(
      {ctx.max_alloc, std::max<size_t>(64u << 20, ctx.env.device().global_mem_bytes / 16),
       size_t(INT32_MAX) * tb});
  const size_t per_row =
      size_t(k.positions) * g.n * tw * std::max(WinogradSubs(a, g) * g.c, g.oc) * tb;
  return static_cast<int>(std::clamp<long>(long(cap / std::max<size_t>(per_row, 1)), 1, th));
}

// The smallest unit * 2^k that holds `need`, at most `cap` (a multiple of unit): the fused kernel's
// blocks shrink to small layers in few steps, so few programs get built.
int ShrinkTo(int need, int unit, int cap) {
  int x = unit;
  while (x < need && x < cap) x *= 2;
  return std::min(x, cap);
}

// winograd4_fused's blocking for this geometry: the table entry fitted to the device's work-group
// size and local memory, OCB no larger than OC needs and CC than the reduction has. OCB and CC
// lay out the filter, so they depend on the channels and the device only (a re-prepare for a
// new input size keeps its filter); only then does TP shrink to the tiles a row has.
WinogradFusedTiles FusedFor(const ConvGeometry& g, const DeviceInfo& dev) {
  WinogradFusedTiles t = WinogradFusedTilesFor("winograd4_fused", dev);
  t.ocb = ShrinkTo(g.oc, t.ro, t.ocb);
  t.cc = ShrinkTo(WinogradSubs(ConvAlgorithm::kWinograd4Fused, g) * g.c, 1, t.cc);
  const auto exchange = [&] { return t.ps > 1 ? size_t(4 * 36) * t.tp * t.ocb : 0; };
  const auto local = [&] {
    return std::max(size_t(4 * 36) * (t.tp * t.cc + t.u_local * t.cc * t.ocb), exchange());
  };
  const auto half = [](int x, int m) { return std::max(m, x / 2 / m * m); };  // a multiple of m
  const size_t max_group = std::max<size_t>(dev.max_work_group_size, 1);
  // The device's limit (NVIDIA's OpenCL reports its 48 KB per kernel: 49152 on the H200).
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
  return int(RoundUp(size_t(WinogradSubs(ConvAlgorithm::kWinograd4Fused, g)) * g.c, t.cc));
}

std::string FusedDefines(const WinogradFusedTiles& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "-DTP=%d -DOCB=%d -DCC=%d -DRT=%d -DRO=%d -DU_LOCAL=%d -DPS=%d",
                t.tp, t.ocb, t.cc, t.rt, t.ro, t.u_local, t.ps);
  return buf;
}

// direct_blocked's blocking for this geometry: the table entry, with the output channels spread
// evenly over the fewest blocks of at most its OCB (OC = 17 with OCB 16: two blocks of 9, not 16 +
// 16; OC = 3: one of 3), rounded up to a multiple of 4 when OC is one (float4 weights and stores),
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

int BlockedChannelBlocks(const ConvGeometry& g, const BlockedTiles& t) {
  return (g.oc + t.ocb - 1) / t.ocb;
}

std::string BlockedDefines(const ConvGeometry& g, const BlockedTiles& t) {
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

// Two sets of -D options as one (program cache keys stay as they were when `more` is empty).
std::string With(const std::string& defines, const std::string& more) {
  return more.empty() ? defines : defines.empty() ? more : defines + " " + more;
}

void Run(OpContext& ctx, const Kernel& k, size_t global) {
  const size_t g = RoundUp(std::max<size_t>(global, 1), 64);
  CheckCl(
      Cl().clEnqueueNDRangeKernel(ctx.queue, k.get(), 1, nullptr, &g, nullptr, 0, nullptr, nullptr),
      "clEnqueueNDRangeKernel");
}

Launch Make1d(std::shared_ptr<Program> prog, const char* name, size_t global, size_t local = 0) {
  Launch l;
  l.name = name;
  l.kernel = CreateKernel(*prog, name);
  l.dims = 1;
  l.global[0] = local ? global : RoundUp(std::max<size_t>(global, 1), 64);
  l.local[0] = local;
  return l;
}

// On a GPU, when neither Winograd's batched GEMM nor implicit GEMM has the output tiles to
// fill the compute units (14x14 and 7x7 maps of batch-1 ResNets), implicit GEMM splits K and
// fills them; Winograd does not. On an H200 that made ResNet-50's 3x3 layers 1.5-2.3x
// faster (14x14x256: 46 -> 26 us, 7x7x512: 73 -> 31 us).
bool SmallMapsFavourSplitK(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm w) {
  if (dev.type != "gpu") return false;
  const WinogradKind& k = Kind(w);
  const GemmTiles wt = WinogradTiles(g, dev, w);
  const long tiles = WinogradOutputTiles(g, k);
  const long wgroups = k.positions * wt.Groups(tiles, g.oc);
  // With 1.5 output tiles per compute unit Winograd wins even with few work-groups: on the
  // H200 PyNET's 64x64 layers (256 tiles, C 64-256 -> 64, 3x3 to 7x7) ran 1.15-1.7x faster
  // than split-K; at 56x56 (196 tiles) the two tied and below split-K won (ResNet-50,
  // Inception v1/v3; bench/conv_algorithms.py).
  if (2 * tiles >= 3L * dev.compute_units) return false;
  const GemmPlan ip = PlanImplicitGemm(dev, g, 0);
  return wgroups < dev.compute_units &&
         ip.tiles.Groups(long(g.n) * g.oh * g.ow, g.oc) < dev.compute_units && ip.splits > 1;
}

// The one launch of winograd4_fused. A kernel whose registers cap its groups below the planned
// size (CL_KERNEL_WORK_GROUP_SIZE; reqd_work_group_size makes most compilers fit it instead) is
// rebuilt with fewer tiles per group rather than left to fail at the enqueue.
Launch EncodeWinogradFused(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual) {
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
    size_t fits = 0;
    CheckCl(Cl().clGetKernelWorkGroupInfo(l.kernel.get(), dev.id, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof fits, &fits, nullptr),
            "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
    const size_t group = t.Group();
    if (group <= fits) break;
    if (t.tp == t.rt)
      throw Error("winograd4_fused: groups of " + std::to_string(group) +
                  " work-items, the kernel allows " + std::to_string(fits) +
                  " (lower OCB or RO in CLGPU_TUNE_WINOGRAD4_FUSED)");
    t.tp = std::max(t.rt, t.tp / 2 / t.rt * t.rt);
  }
  SetArgsAndOptional(l.kernel, residual, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c, g.oh,
                     g.ow, g.oc, g.pad_top, g.pad_left, g.kh, g.kw, w.cpad, act_min, act_max);
  const size_t th = (g.oh + 3) / 4, tw = (g.ow + 3) / 4;
  const size_t groups = size_t((g.oc + t.ocb - 1) / t.ocb) * g.n * th * ((tw + t.tp - 1) / t.tp);
  l.dims = 1;
  l.local[0] = t.Group();
  l.global[0] = groups * l.local[0];
  return l;
}

}  // namespace

std::string ConvAlgorithmName(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::kDirect:
      return "direct";
    case ConvAlgorithm::kGemm1x1:
      return "gemm";
    case ConvAlgorithm::kImplicitGemm:
      return "implicit_gemm";
    case ConvAlgorithm::kWinograd:
      return "winograd";
    case ConvAlgorithm::kWinograd4:
      return "winograd4";
    case ConvAlgorithm::kWinograd4Fused:
      return "winograd4_fused";
    case ConvAlgorithm::kDirectBlocked:
      return "direct_blocked";
  }
  return "?";
}

bool ConvAlgorithmApplies(ConvAlgorithm a, const ConvGeometry& g) {
  switch (a) {
    case ConvAlgorithm::kDirect:
    case ConvAlgorithm::kImplicitGemm:
    case ConvAlgorithm::kDirectBlocked:
      return true;
    case ConvAlgorithm::kGemm1x1:
      return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 &&
             g.pad_left == 0 && g.oh == g.h && g.ow == g.w;
    case ConvAlgorithm::kWinograd:
      return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
    case ConvAlgorithm::kWinograd4:
    case ConvAlgorithm::kWinograd4Fused:
      return g.kh >= 3 && g.kh <= 9 && g.kw >= 3 && g.kw <= 9 && g.sh == 1 && g.sw == 1 &&
             g.dh == 1 && g.dw == 1;
  }
  return false;
}

ConvAlgorithm SelectConvAlgorithm(const ConvGeometry& g, const DeviceInfo& dev,
                                  const std::string& forced) {
  for (ConvAlgorithm a : kAll)
    if (forced == ConvAlgorithmName(a) && ConvAlgorithmApplies(a, g)) return a;
  if (ConvAlgorithmApplies(ConvAlgorithm::kGemm1x1, g)) {
    // On a GPU the implicit GEMM's tiles beat the plain GEMM's on 1x1 layers of at least
    // 28x28 outputs: on the H200 in 50 of 56 such layers of the zoo models (MobileNets,
    // ResNet-50, Inceptions), 9.5% less time in all; below 28x28 GEMM won 42 of 56
    // (bench/conv_algorithms.py).
    const bool wide = dev.type == "gpu" && long(g.n) * g.oh * g.ow >= 784;
    return wide ? ConvAlgorithm::kImplicitGemm : ConvAlgorithm::kGemm1x1;
  }
  // Few input and output channels at high resolution: Winograd's transformed buffers and a
  // thin GEMM cost more than they save. On an H200 direct_blocked ran 16x2880x3968 3x3 -> 16
  // 1.58x, and 32x1440x1984 / 16x2880x3968 3x3 -> 3 2.1-2.7x faster than F(4x4); with at most
  // 4 output channels also 128x360x496 and 64x720x992 3x3 -> 3 (1.24x, 1.45x). It lost at
  // C = 32, OC = 32 (0.76x), 256x180x248 -> 3 (0.52x) and with C = 512 (0.18-0.26x).
  // In PyNET-512 it also beat F(4x4) on 48x512x512 3x3 -> 16 (1.12x) and implicit GEMM on
  // the stride-2 16x512x512 3x3 -> 24 (1.37x).
  const bool big_map = long(g.oh) * g.ow >= 65536;
  // Up to 32 input channels into 16 to 64 outputs at high resolution: the fused F(4x4) keeps
  // its transforms on chip. On an H200 it ran 4x1440x1984 3x3 -> 32 in 0.27 ms (implicit GEMM
  // 0.43, direct_blocked 0.48), 16x2880x3968 -> 16 in 1.51 (direct_blocked 2.18), and beat the
  // unfused F(4x4) at C = 32: 1.03 against 1.40 ms (3x3 -> 32), 0.50 / 0.58 (3x3 -> 64), 3.25 /
  // 3.67, 7.01 / 7.57 and 7.01 / 7.55 (5x5, 7x7, 9x9 -> 32). From C = 64 the unfused one's GEMM
  // wins (0.85 / 0.92 ms at 64 -> 64, 1.40 / 1.92 at 128 -> 64, 2.39 / 3.17 with 5x5); with 3
  // outputs direct_blocked does (0.56-1.00 ms against 0.78-1.08). Those figures are for the
  // blocking that splits the positions (NVIDIA's table entry); with the unsplit 2 x 2 blocks
  // it had only won 3x3 layers with C <= 16 (1.63 against 1.39 ms at 32 -> 32), so GPUs whose
  // entry does not split keep that range.
  if (dev.type == "gpu" && g.oc >= 16 && big_map &&
      ConvAlgorithmApplies(ConvAlgorithm::kWinograd4Fused, g)) {
    const bool split = WinogradFusedTilesFor("winograd4_fused", dev).ps > 1;
    if (split ? g.c <= 32 && g.oc <= 64 : g.c <= 16 && g.kh == 3 && g.kw == 3)
      return ConvAlgorithm::kWinograd4Fused;
  }
  if (dev.type == "gpu" && g.sh == 1 && g.sw == 1 &&
      ((g.c <= 48 && g.oc <= 16) || (g.c <= 128 && g.oc <= 4)) && big_map)
    return ConvAlgorithm::kDirectBlocked;
  if (dev.type == "gpu" && g.sh == 2 && g.sw == 2 && g.c <= 16 && g.oc <= 32 && big_map)
    return ConvAlgorithm::kDirectBlocked;
  if (ConvAlgorithmApplies(ConvAlgorithm::kWinograd4, g) && g.c >= 16) {
    // Winograd needs enough input channels to make its GEMMs worth the transforms
    // (with C = 4 implicit GEMM wins); F(4x4) beat F(2x2) on every 3x3 shape of the
    // conv set on an H200, even with 3 output channels, once the output fills its tiles,
    // and, as sums of 3x3 sub-filters, beat implicit GEMM 1.9-3.8x on every 5x5, 7x7 and
    // 9x9 shape there.
    const ConvAlgorithm w = g.oh >= 8 && g.ow >= 8 ? ConvAlgorithm::kWinograd4
                            : ConvAlgorithmApplies(ConvAlgorithm::kWinograd, g)
                                ? ConvAlgorithm::kWinograd
                                : ConvAlgorithm::kImplicitGemm;
    if (w == ConvAlgorithm::kImplicitGemm || !SmallMapsFavourSplitK(g, dev, w)) return w;
  }
  return ConvAlgorithm::kImplicitGemm;
}

size_t ConvWeightBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  const size_t ohwi = size_t(g.oc) * g.kh * g.kw * g.c * ctx.storage_bytes;
  if (a == ConvAlgorithm::kDirectBlocked) {
    const BlockedTiles t = BlockedFor(g, ctx.env.device());
    return size_t(BlockedChannelBlocks(g, t)) * t.ocb * g.kh * g.kw * g.c * ctx.storage_bytes;
  }
  if (a == ConvAlgorithm::kWinograd4Fused) {
    const WinogradFusedTiles t = FusedFor(g, ctx.env.device());
    const size_t blocks = (g.oc + t.ocb - 1) / t.ocb;
    return std::max(ohwi, blocks * t.ocb * FusedCpad(g, t) * 36 * sizeof(float));
  }
  if (a != ConvAlgorithm::kWinograd && a != ConvAlgorithm::kWinograd4) return ohwi;
  return std::max(
      ohwi, size_t(Kind(a).positions) * g.oc * WinogradSubs(a, g) * g.c * TransformedBytes(ctx, a));
}

ConvAlgorithm ChooseConvAlgorithm(const OpContext& ctx, const ConvGeometry& g) {
  const ConvAlgorithm a = SelectConvAlgorithm(g, ctx.env.device(), ctx.options.conv_algorithm);
  if (a != ConvAlgorithm::kWinograd && !IsF4(a)) return a;
  ConvGeometry one = g;
  one.oc = 1;
  return ConvWeightBytes(ctx, a, one) > ctx.max_alloc ? ConvAlgorithm::kImplicitGemm : a;
}

std::shared_ptr<ConvWeights> PrepareConvWeights(OpContext& ctx, ConvAlgorithm a,
                                                const ConvGeometry& g,
                                                const std::vector<float>& filter_ohwi) {
  auto w = std::make_shared<ConvWeights>();
  if (a == ConvAlgorithm::kDirectBlocked) {
    w->filter =
        UploadWeights(ctx, BlockFilter(g, BlockedFor(g, ctx.env.device()).ocb, filter_ohwi));
    return w;
  }
  if (a == ConvAlgorithm::kWinograd4Fused) {
    // Transformed once on the device into the blocked layout of conv2d_winograd4_fused.cl.
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
    return w;
  }
  if (a != ConvAlgorithm::kWinograd && a != ConvAlgorithm::kWinograd4) {
    w->filter = UploadWeights(ctx, filter_ohwi);
    return w;
  }
  // Winograd: transform the filter once, on the device.
  const WinogradKind& k = Kind(a);
  Buffer ohwi = UploadWeights(ctx, filter_ohwi);
  const int subs = WinogradSubs(a, g);
  w->filter = ctx.env.CreateBuffer(
      size_t(k.positions) * g.oc * subs * g.c * TransformedBytes(ctx, a), CL_MEM_READ_WRITE);
  auto prog = ctx.GetProgram(k.file, WinogradDefines(ctx, a));
  Kernel kern = CreateKernel(*prog, k.filter_transform);
  if (a == ConvAlgorithm::kWinograd4) {
    SetArgs(kern, ohwi.get(), w->filter.get(), g.c, g.oc, g.kh, g.kw);
  } else {
    SetArgs(kern, ohwi.get(), w->filter.get(), g.c, g.oc);
  }
  Run(ctx, kern, size_t(g.oc) * subs * g.c);
  CheckCl(Cl().clFinish(ctx.queue), "clFinish(filter transform)");
  return w;
}

std::vector<size_t> ConvScratchBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  if (a == ConvAlgorithm::kGemm1x1) {
    const long m = long(g.n) * g.h * g.w;
    const size_t bytes = GemmScratchBytes(
        PlanGemm(ctx.env.device(), m, g.oc, g.c, ctx.options.gemm_splits), m, g.oc);
    return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
  }
  if (a == ConvAlgorithm::kImplicitGemm) {
    const size_t bytes =
        GemmScratchBytes(PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits),
                         long(g.n) * g.oh * g.ow, g.oc);
    return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
  }
  // winograd4_fused keeps its transformed tiles on chip: no scratch.
  if (a != ConvAlgorithm::kWinograd && a != ConvAlgorithm::kWinograd4) return {};
  const WinogradKind& k = Kind(a);
  const size_t rows = WinogradRowsPerPass(ctx, a, g);
  const size_t tw = (g.ow + k.tile - 1) / k.tile;
  const size_t p = size_t(g.n) * rows * tw, tb = TransformedBytes(ctx, a);
  return {size_t(k.positions) * p * WinogradSubs(a, g) * g.c * tb,
          size_t(k.positions) * p * g.oc * tb};
}

std::vector<Launch> EncodeConv(OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g, cl_mem in,
                               const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                               float act_max, cl_mem residual) {
  std::vector<Launch> launches;
  const DeviceInfo& dev = ctx.env.device();
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";  // for the program that writes out
  switch (a) {
    case ConvAlgorithm::kDirect: {
      Launch l = Make1d(ctx.GetProgram("conv2d_direct", rd), "conv2d_direct", 0);
      SetArgsAndOptional(l.kernel, residual, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c,
                         g.oh, g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top,
                         g.pad_left, act_min, act_max);
      l.dims = 3;
      l.global[0] = g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
      launches.push_back(std::move(l));
      break;
    }
    case ConvAlgorithm::kDirectBlocked: {
      const BlockedTiles t = BlockedFor(g, dev);
      auto prog = ctx.GetProgram("conv2d_blocked", With(BlockedDefines(g, t), rd));
      Launch l;
      l.name = "conv2d_blocked";
      l.kernel = CreateKernel(*prog, l.name.c_str());
      SetArgsAndOptional(l.kernel, residual, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c,
                         g.oh, g.ow, g.oc, g.kh, g.sh, g.dh, g.pad_top, g.pad_left, act_min,
                         act_max);
      l.dims = 3;
      l.local[0] = 1, l.local[1] = t.wgx, l.local[2] = t.wgy;
      l.global[0] = BlockedChannelBlocks(g, t);
      l.global[1] = RoundUp((g.ow + t.px - 1) / t.px, t.wgx);
      l.global[2] = RoundUp(size_t(g.n) * g.oh, t.wgy);
      launches.push_back(std::move(l));
      break;
    }
    case ConvAlgorithm::kGemm1x1: {
      const long m = long(g.n) * g.h * g.w;
      launches =
          EncodeGemm(ctx, PlanGemm(dev, m, g.oc, g.c, ctx.options.gemm_splits), in, w.filter.get(),
                     bias, out, static_cast<int>(m), g.oc, g.c, act_min, act_max, residual);
      break;
    }
    case ConvAlgorithm::kImplicitGemm: {
      const GemmPlan p = PlanImplicitGemm(ctx.env.device(), g, ctx.options.gemm_splits);
      const long m = long(g.n) * g.oh * g.ow;
      // One program: the split kernel ignores the residual, the reduce adds it.
      auto prog = ctx.GetProgram("conv2d_implicit_gemm", With(p.tiles.Defines(), rd));
      if (p.splits <= 1) {
        Launch l =
            Make1d(prog, "conv2d_implicit_gemm", p.tiles.Global(m, g.oc), p.tiles.work_group());
        SetArgsAndOptional(l.kernel, residual, in, w.filter.get(), bias, out, g.n, g.h, g.w, g.c,
                           g.oh, g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top,
                           g.pad_left, act_min, act_max);
        launches.push_back(std::move(l));
        break;
      }
      if (ctx.scratch.empty()) throw Error("split-K implicit GEMM without a scratch buffer");
      Launch l = Make1d(prog, "conv2d_implicit_gemm_splitk", p.tiles.Global(m, g.oc),
                        p.tiles.work_group());
      SetArgs(l.kernel, in, w.filter.get(), ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.oc,
              g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left, p.k_per_split);
      l.dims = 2;
      l.global[1] = p.splits;
      l.local[1] = 1;
      launches.push_back(std::move(l));
      Launch r = Make1d(prog, "gemm_splitk_reduce", size_t(m) * g.oc);
      SetArgsAndOptional(r.kernel, residual, ctx.scratch[0], bias, out, static_cast<int>(m), g.oc,
                         p.splits, act_min, act_max);
      launches.push_back(std::move(r));
      break;
    }
    case ConvAlgorithm::kWinograd4Fused:
      launches.push_back(EncodeWinogradFused(ctx, g, in, w, bias, out, act_min, act_max, residual));
      break;
    case ConvAlgorithm::kWinograd:
    case ConvAlgorithm::kWinograd4: {
      if (ctx.scratch.size() < 2) throw Error("Winograd convolution without scratch buffers");
      const WinogradKind& k = Kind(a);
      const std::string wd = WinogradDefines(ctx, a);
      const GemmTiles t = WinogradTiles(g, dev, a);
      auto transforms = ctx.GetProgram(k.file, wd);
      auto outputs = residual ? ctx.GetProgram(k.file, With(wd, rd)) : transforms;
      auto gemm = ctx.GetProgram("conv2d_winograd", wd + " " + t.Defines());
      const int th = (g.oh + k.tile - 1) / k.tile, tw = (g.ow + k.tile - 1) / k.tile;
      const int rows = WinogradRowsPerPass(ctx, a, g);
      const int ck = WinogradSubs(a, g) * g.c;  // the GEMM's reduction length
      for (int r0 = 0; r0 < th; r0 += rows) {
        const int nr = std::min(rows, th - r0);
        const int p = g.n * nr * tw;
        Launch li = Make1d(transforms, k.input_transform, size_t(p) * ck);
        if (a == ConvAlgorithm::kWinograd4) {
          SetArgs(li.kernel, in, ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.pad_top,
                  g.pad_left, r0, nr, g.kh, g.kw);
        } else {
          SetArgs(li.kernel, in, ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.pad_top,
                  g.pad_left, r0, nr);
        }
        Launch lg = Make1d(gemm, "winograd_gemm", t.Global(p, g.oc), t.work_group());
        lg.dims = 2;
        lg.global[1] = k.positions;
        lg.local[1] = 1;
        SetArgs(lg.kernel, ctx.scratch[0], w.filter.get(), ctx.scratch[1], p, g.oc, ck);
        Launch lo = Make1d(outputs, k.output_transform, size_t(p) * g.oc);
        SetArgsAndOptional(lo.kernel, residual, ctx.scratch[1], bias, out, g.n, g.oh, g.ow, g.oc,
                           r0, nr, act_min, act_max);
        launches.push_back(std::move(li));
        launches.push_back(std::move(lg));
        launches.push_back(std::move(lo));
      }
      break;
    }
  }
  return launches;
}

}  // namespace clgpu
