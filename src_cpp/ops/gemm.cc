#include "ops/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cl/int8_dot.h"
#include "common/env.h"
#include "common/error.h"

namespace clgpu {

void PlanSplitK(GemmPlan& p, const DeviceInfo& dev, long groups, long k, int forced_splits,
                long work_items, long min_tiles) {
  // A GEMM of a few tiles leaves compute units idle, or too few work-items on each to
  // hide memory latency, while each group walks the whole of K: split K so that every
  // unit gets two groups and about `work_items` work-items (2048: a full NVIDIA SM), keeping
  // at least four tiles of K per split (bench/results/gemm-*.md and conv2d-*.md have the
  // figures).
  // CLGPU_SPLITK_THREADS overrides the target (tuning; 0 = only fill every unit twice).
  // Tiles of 64 or more accumulators per work-item fill a unit's registers with one or two
  // groups, so more groups add no resident work-items: they only fill the units.
  p.splits = 1;
  p.k_per_split = 0;
  // An empty output (a batch resized to 0) or an empty reduction has nothing to split.
  if (groups <= 0 || k <= 0) return;
  int splits = forced_splits;
  if (splits <= 0 && dev.profile.gpu_plans) {
    long target = p.tiles.wpt_m * p.tiles.wpt_n >= 64 ? 0 : work_items;
    if (const auto v = GetEnv("CLGPU_SPLITK_THREADS")) target = std::atol(v->c_str());
    const long wg = static_cast<long>(p.tiles.work_group());
    const long fill =
        groups < dev.compute_units ? (2L * dev.compute_units + groups - 1) / groups : 1;
    const long want =
        std::max(fill, (target * dev.compute_units + groups * wg - 1) / (groups * wg));
    // CLGPU_SPLITK_MIN_TILES overrides the tiles of K a split keeps where min_tiles > 1 (tuning).
    const std::vector<double> tiles =
        EnvNumbers("CLGPU_SPLITK_MIN_TILES", 1, "a whole number of tiles >= 1",
                   [](const std::vector<double>& x) { return WholeAtLeast(x, 1); });
    if (!tiles.empty() && min_tiles > 1) min_tiles = static_cast<long>(tiles[0]);
    const long max_splits = k / (min_tiles * p.tiles.tile_k);
    if (want >= 2 && max_splits >= 2)
      splits = static_cast<int>(std::min<long>({want, max_splits, 32}));
  }
  if (splits <= 1) return;
  p.k_per_split = static_cast<int>(RoundUp((k + splits - 1) / splits, p.tiles.tile_k));
  p.splits = static_cast<int>((k + p.k_per_split - 1) / p.k_per_split);
  if (p.splits <= 1) p.splits = 1, p.k_per_split = 0;
}

bool SplitKLastOffered(const DeviceInfo& dev, int splits) {
  const std::vector<double> v =
      EnvNumbers("CLGPU_SPLITK_LAST_MAX", 1, "a whole number of splits >= 0",
                 [](const std::vector<double>& x) { return WholeAtLeast(x, 0); });
  if (!v.empty()) return splits > 1 && splits <= static_cast<int>(v[0]);
  // The profile's limit, where the PTX that the last group's reads rely on compiles and runs.
  return splits > 1 && splits <= dev.profile.split_k_last_max && !PtxDefines(dev).empty();
}

double SplitKLastUs(const DeviceInfo& dev, const GemmPlan& p) {
  // $CLGPU_SPLITK_LAST_US "US,NS_PER_SUM" in place of the profile's (tests, fitting them).
  const std::vector<double> v =
      EnvNumbers("CLGPU_SPLITK_LAST_US", 2, "US,NS_PER_SUM (0 < us < 1000, 0 <= ns < 1000)",
                 [](const std::vector<double>& x) {
                   return x[0] > 0 && x[0] < 1e3 && x[1] >= 0 && x[1] < 1e3;
                 });
  const double us = v.empty() ? dev.profile.split_k_last_us : v[0];
  const double ns = v.empty() ? dev.profile.split_k_last_ns_per_sum : v[1];
  if (us <= 0 || !SplitKLastOffered(dev, p.splits)) return -1;
  // Each work-item of the last group adds the other splits' partial sums of the outputs it holds.
  return us + double(p.splits - 1) * p.tiles.wpt_m * p.tiles.wpt_n * ns * 1e-3;
}

LaunchCount SplitLaunchCount(const DeviceInfo& dev, const GemmPlan& p) {
  if (p.splits <= 1) return {};
  return {2, SplitKLastUs(dev, p)};
}

GemmPlan PlanGemm(const DeviceInfo& dev, long m, long n, long k, int forced_splits) {
  GemmPlan p;
  if (m <= kGemvMaxM && forced_splits <= 0) {
    p.small_m = true;
    return p;
  }
  p.tiles = TilesFor(m <= 256 ? "gemm_small" : "gemm", dev);
  if (m > 256) {
    // The biggest tiles reuse each loaded value most, but only pay once they give the
    // device a couple of waves of groups.
    const GemmTiles big = TilesFor("gemm_big", dev);
    const long big_groups = big.Groups(m, n);
    if (big_groups >= 2L * dev.compute_units) p.tiles = big;
  }
  const long groups = p.tiles.Groups(m, n);
  PlanSplitK(p, dev, groups, k, forced_splits);
  return p;
}

size_t GemmScratchBytes(const GemmPlan& p, long m, long n) {
  return p.splits > 1 ? size_t(p.splits) * m * n * sizeof(float) : 0;
}

const char* GemmAlgorithm(const GemmPlan& p) {
  return p.small_m ? "gemv" : p.splits > 1 ? "gemm_splitk" : "gemm";
}

void SetReduceExtras(const Kernel& k, const OpContext& ctx, cl_mem residual, cl_mem slopes) {
  cl_uint next = residual ? 9 : 8;
  if (slopes) SetArgsFrom(k, next++, slopes);
  if (ctx.out_ldc > 0) SetArgsFrom(k, next, ctx.out_ldc, ctx.out_offset);
}

std::string AffineDefines(const AffineA* affine) {
  if (!affine) return "";
  return std::string("-DA_AFFINE") + (affine->scale ? " -DA_SCALE" : "") +
         (affine->shift ? " -DA_SHIFT" : "") + (affine->scale_one ? " -DA_SCALE_ONE" : "") +
         (affine->shift_one ? " -DA_SHIFT_ONE" : "");
}

namespace {

// A_AFFINE's arguments from `at` on (kernels/gemm_affine.cl's AFFINE_PARAM): the other buffer
// stands in for an absent one, never read. The next free index.
cl_uint SetAffineArgs(const Kernel& k, cl_uint at, const AffineA& a) {
  cl_mem s = a.scale ? a.scale : a.shift;
  SetArgsFrom(k, at, s, a.shift ? a.shift : s, a.lo1, a.hi1, a.lo2, a.hi2);
  return at + 6;
}

}  // namespace

float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::fabs(x) > m ? std::fabs(x) : m;  // a NaN compares false
  return m;
}

std::vector<Launch> EncodeGemm(OpContext& ctx, const GemmPlan& p, cl_mem a, cl_mem b, cl_mem bias,
                               cl_mem c, int m, int n, int k, float act_min, float act_max,
                               cl_mem residual, float b_max_abs, cl_mem slopes, cl_mem kscale,
                               const AffineA* affine) {
  std::vector<Launch> out;
  if (p.small_m && (kscale || affine || ctx.out_ldc || ctx.in_ldc))
    throw Error("the small-M GEMM takes no gate, no per-channel nodes and no concatenation");
  const bool slice = ctx.out_ldc > 0, pitch = ctx.in_ldc > 0;
  if (p.small_m) {
    // SM_N columns per group of SM_WG work-items (kernels/gemm_small_m.cl's defaults), each
    // work-item's SM_MAX_M x SM_N partial sums in local memory: 32 KiB and the maxima at 128
    // work-items, past the whole of it on GPUs of 32 KiB (Mali, Adreno; Oclgrind's device
    // refused the launch), which take groups of 64.
    constexpr size_t kSmallN = 8, kMaxima = 1 + kSmallN;
    const DeviceInfo& dev = ctx.env.device();
    size_t wg = 128;
    while (wg > 16 && (kGemvMaxM * kSmallN * wg * sizeof(float) + kMaxima * sizeof(int) >
                           dev.local_mem_bytes ||
                       wg > dev.max_work_group_size))
      wg /= 2;
    std::string defines = residual ? "-DHAS_RESIDUAL" : "";
    if (b_max_abs < 0) defines += " -DTRACK_B_MAX";
    if (wg != 128) defines += " -DSM_WG=" + std::to_string(wg);
    auto prog = ctx.GetProgram("gemm_small_m", defines);
    Launch l;
    l.name = "gemm_nt_small_m";
    l.kernel = CreateKernel(*prog, l.name);
    SetArgsAndOptionals(l.kernel, {residual, slopes}, a, b, bias, c, m, n, k, act_min, act_max,
                        b_max_abs < 0 ? 0.0f : b_max_abs);
    l.global[0] = RoundUp(static_cast<size_t>(n), kSmallN) / kSmallN * wg;
    l.local[0] = wg;
    out.push_back(std::move(l));
    return out;
  }
  // Whole tiles only: the kernel's loads skip their bounds checks.
  const bool even =
      m % p.tiles.tile_m == 0 && n % p.tiles.tile_n == 0 && k % p.tiles.tile_k == 0 && k % 4 == 0;
  // Split or whole: the program holds only the kernels it launches (kernels/gemm.cl).
  auto prog = ctx.GetProgram(
      "gemm", p.tiles.Defines() + (even ? " -DGEMM_EVEN=1" : "") +
                  (residual ? " -DHAS_RESIDUAL" : "") + (kscale ? " -DK_SCALE" : "") +
                  (affine ? " " + AffineDefines(affine) : "") + (p.splits > 1 ? " -DSPLIT_K" : "") +
                  (slice ? " -DOUT_SLICE" : "") + (pitch ? " -DA_PITCH" : ""));
  Launch l;
  l.dims = 1;
  l.global[0] = p.tiles.Global(m, n);
  l.local[0] = p.tiles.work_group();
  if (p.splits <= 1) {
    l.name = "gemm_nt";
    l.kernel = CreateKernel(*prog, l.name);
    SetArgsAndOptional(l.kernel, residual, a, b, bias, c, m, n, k, act_min, act_max);
    cl_uint next = residual ? 10 : 9;
    if (slopes) SetArgsFrom(l.kernel, next++, slopes);
    if (kscale) SetArgsFrom(l.kernel, next++, kscale);
    if (affine) next = SetAffineArgs(l.kernel, next, *affine);
    if (pitch) SetArgsFrom(l.kernel, next++, ctx.in_ldc);
    if (slice) SetArgsFrom(l.kernel, next, ctx.out_ldc, ctx.out_offset);
    out.push_back(std::move(l));
    return out;
  }
  if (ctx.scratch.empty()) throw Error("split-K GEMM without a scratch buffer");
  l.name = "gemm_nt_splitk";
  l.kernel = CreateKernel(*prog, l.name);
  SetArgs(l.kernel, a, b, ctx.scratch[0], m, n, k, p.k_per_split);
  cl_uint next = 7;
  if (kscale) SetArgsFrom(l.kernel, next++, kscale);
  if (affine) next = SetAffineArgs(l.kernel, next, *affine);
  if (pitch) SetArgsFrom(l.kernel, next, ctx.in_ldc);
  l.dims = 2;
  l.global[1] = p.splits;
  l.local[1] = 1;
  out.push_back(std::move(l));
  Launch r;
  r.name = "gemm_splitk_reduce";
  r.kernel = CreateKernel(*prog, r.name);
  SetArgsAndOptional(r.kernel, residual, ctx.scratch[0], bias, c, m, n, p.splits, act_min, act_max);
  SetReduceExtras(r.kernel, ctx, residual, slopes);
  r.dims = 1;
  r.global[0] = RoundUp(size_t(m) * n, 64);
  out.push_back(std::move(r));
  return out;
}

}  // namespace clgpu
