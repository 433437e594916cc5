#include "ops/gemm_int8.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "cl/int8_dot.h"
#include "common/env.h"
#include "common/error.h"
#include "ops/gemm.h"
#include "ops/squeeze.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

// The launch's integers (kernels/gemm_int8.cl's prm): the constant buffers' offsets, then from kM
// the GEMM's and the geometry's, from kDwInZero the folded depthwise's, from kExC its expand's,
// from kPoolH a pool's, from kGate a gate's.
enum GemmInt8Param {
  kM = 10,
  kDwInZero = 32,
  kExC = 36,
  kPoolH = 41,
  kGate = 43,
  kParamCount = 50
};

struct Int8Tiles {
  int tm, tn, tk4, wm, wn;
  size_t work_group() const { return size_t(tm / wm) * (tn / wn); }
};

// The "gemm_int8" entry of the tuning table (ops/tuning.cc); CLGPU_TUNE_GEMM_INT8="TM,TN,TK4,WM,WN"
// overrides it (bench/bench_int8.py), checked here: the int8 kernel needs its own limits.
Int8Tiles TunedTiles(const DeviceInfo& dev) {
  if (const auto value = GetEnv("CLGPU_TUNE_GEMM_INT8")) {
    const char* env = value->c_str();
    Int8Tiles o{};
    if (std::sscanf(env, "%d,%d,%d,%d,%d", &o.tm, &o.tn, &o.tk4, &o.wm, &o.wn) != 5 || o.wm < 1 ||
        o.wn < 1 || o.tk4 < 1 || o.tm % o.wm || o.tn % o.wn || o.tm > 256 || o.tn > 256)
      throw Error(std::string("CLGPU_TUNE_GEMM_INT8 must be TM,TN,TK4,WM,WN, not '") + env + "'");
    return o;
  }
  const GemmTiles g = clgpu::TilesFor("gemm_int8", dev);
  return {g.tile_m, g.tile_n, g.tile_k, g.wpt_m, g.wpt_n};
}

// The tiles' groups over an m x n output.
long Groups(const Int8Tiles& t, long m, long n) {
  return ((m + t.tm - 1) / t.tm) * ((n + t.tn - 1) / t.tn);
}

// Whether an m x n GEMM over k (kp) leaves the device's units idle in the tuned tiles even with
// K split into every step (PlanSplitK's fill: two groups per unit): batch-1 layers of small
// models, whose fused kernels wait on latency chains, not on throughput.
bool ShortK(const DeviceInfo& dev, long m, long n, long kp) {
  const Int8Tiles t = TunedTiles(dev);
  const long groups = Groups(t, m, n);
  const long units = std::max(dev.compute_units, 1);
  return groups > 0 && groups < units && kp / (4 * t.tk4) < (2 * units + groups - 1) / groups;
}

// The tiles of a GEMM; with a depthwise folded in and a short K (short_dw: ShortK), the
// "gemm_int8_dw" entry where the device has one (unless overridden): each step of k carries the
// depthwise's taps, and shorter steps split K finer. Where long steps split enough, shorter ones
// only leave more of a group's work-items waiting at each step's barrier (Xception int8's
// 728-channel layers ran slower).
Int8Tiles TilesFor(const DeviceInfo& dev, bool short_dw = false) {
  if (!short_dw || GetEnv("CLGPU_TUNE_GEMM_INT8")) return TunedTiles(dev);
  const GemmTiles g = clgpu::TilesFor("gemm_int8_dw", dev, "gemm_int8");
  return {g.tile_m, g.tile_n, g.tile_k, g.wpt_m, g.wpt_n};
}

// Which GEMMs the small tiles ("gemm_int8_small") may run where the tuned tiles spread them over
// fewer groups than the device has units: 0 none, 1 those without a folded depthwise, 2 all,
// 3 (the default) those with one. On the H200 (bench/results/ab-options-int8-small-*.md) the
// plain GEMMs' large layers ran slower in small tiles (ResNet50V2 int8 1.12x) and the folded
// depthwise's gained on small models (0.86-0.95x). Research: $CLGPU_INT8_SMALL_TILES
// (bench/ab_options.py env.*), read at each use.
int SmallTilesMode() {
  const std::vector<double> v =
      EnvNumbers("CLGPU_INT8_SMALL_TILES", 1, "0, 1, 2 or 3", [](const std::vector<double>& x) {
        return x[0] == 0 || x[0] == 1 || x[0] == 2 || x[0] == 3;
      });
  return v.empty() ? 3 : int(v[0]);
}

Int8Tiles SmallTiles(const DeviceInfo& dev) {
  const GemmTiles g = clgpu::TilesFor("gemm_int8_small", dev, "gemm_int8");
  return {g.tile_m, g.tile_n, g.tile_k, g.wpt_m, g.wpt_n};
}

// The tiles of an m x n GEMM over kp (dw: with a folded depthwise). Where the tuned tiles leave
// units without a group (batch-1 layers of small models) and SmallTilesMode takes the GEMM, the
// device profile's small tiles, if they give it more groups: a group's time there is its chain of
// loads (the depthwise's taps), and more groups of fewer rows shorten it; where they give it as
// many (a 4x4 map), they would only take the short-K row's finer split. Else the tuned tiles, or
// TilesFor's for a folded depthwise's short K. CLGPU_TUNE_GEMM_INT8 overrides them all.
Int8Tiles Tiles(const DeviceInfo& dev, long m, long n, long kp, bool dw) {
  if (GetEnv("CLGPU_TUNE_GEMM_INT8")) return TunedTiles(dev);
  const long groups = Groups(TunedTiles(dev), m, n);
  const int mode = SmallTilesMode();
  if ((mode == 2 || (mode == 1 && !dw) || (mode == 3 && dw)) &&
      groups < std::max(dev.compute_units, 1)) {
    const Int8Tiles small = SmallTiles(dev);
    if (Groups(small, m, n) > groups) return small;
  }
  return TilesFor(dev, dw && ShortK(dev, m, n, kp));
}

// Splits of K as the float GEMM chooses them (PlanSplitK: option gemm_splits, GPUs only,
// CLGPU_SPLITK_THREADS), a tile of K being TK4 groups of four, aiming at 1024 work-items per
// compute unit: on the H200 that ran ResNet50V2's 3x3 layers faster than splits that only give
// every unit two groups, the other models the same (docs/int8.md has the figures).
// With a depthwise folded in (dw), a tile of K also carries nine or more loads and four
// requantizations per element of A: K splits down to one tile.
GemmPlan PlanInt8(const OpContext& ctx, const Int8Tiles& t, long m, long n, long kp,
                  size_t max_alloc, bool dw) {
  GemmPlan p;
  p.tiles = GemmTiles{t.tm, t.tn, 4 * t.tk4, t.wm, t.wn};
  const long groups = Groups(t, m, n);
  PlanSplitK(p, ctx.env.device(), groups, kp, ctx.options.gemm_splits, /*work_items=*/1024,
             /*min_tiles=*/dw ? 1 : 4);
  // Its int32 sums and tile counters are one buffer: none larger than the device allows (chunks
  // of a convolution count them, Int8GemmSumBytes).
  if (p.splits > 1 && (size_t(m) * n + size_t(groups)) * sizeof(int32_t) > max_alloc) p.splits = 1;
  return p;
}

// The launch's integers but the offsets, in kernels/gemm_int8.cl's order (GemmInt8Param).
ParamBlock LaunchIntegers(const Int8GemmWeights& w, int m, int a_zero, const OutputStage& s,
                          const ConvGeometry& geo, int k_per_split, const Int8DepthwiseA* dw,
                          const Int8Pool* pool, const Int8Gate* gate) {
  ParamBlock prm(kParamCount);
  const int scalars[] = {m,          w.n,       w.k,    w.kp,   a_zero, s.up_below,  s.zero_point,
                         s.act_min,  s.act_max, geo.h,  geo.w,  geo.c,  geo.ow,      geo.oh,
                         geo.kw,     geo.sh,    geo.sw, geo.dh, geo.dw, geo.pad_top, geo.pad_left,
                         k_per_split};
  static_assert(sizeof scalars / sizeof(int) == kDwInZero - kM, "gemm_int8.cl's order");
  for (size_t i = 0; i < std::size(scalars); ++i) prm.Int(kM + i, scalars[i]);
  if (dw) {
    const int d[] = {dw->in_zero, dw->up_below, dw->act_min, dw->act_max};
    for (size_t i = 0; i < std::size(d); ++i) prm.Int(kDwInZero + i, d[i]);
  }
  if (dw && dw->expand) {
    const int e[] = {dw->expand->k, dw->expand_up_below, dw->expand_zero, dw->expand_min,
                     dw->expand_max};
    for (size_t i = 0; i < std::size(e); ++i) prm.Int(kExC + i, e[i]);
  }
  if (pool) prm.Int(kPoolH, pool->ph), prm.Int(kPoolH + 1, pool->pw);
  if (gate) {
    const int q[] = {gate->x_offset, gate->gate_offset, gate->multiplier, gate->shift,
                     gate->zero,     gate->lo,          gate->hi};
    for (size_t i = 0; i < std::size(q); ++i) prm.Int(kGate + i, q[i]);
  }
  return prm;
}

}  // namespace

bool Int8GemmTakesPool(const DeviceInfo& dev) {
  return TilesFor(dev).tm % 4 == 0 && SmallTiles(dev).tm % 4 == 0;
}

bool Int8GemmTakesSqueezeTail(const DeviceInfo& dev) {
  auto fits = [](const Int8Tiles& t) {
    const int wg = t.work_group();
    return wg <= 256 && (wg & (wg - 1)) == 0;
  };
  return fits(TilesFor(dev, false)) && fits(SmallTiles(dev)) && fits(TilesFor(dev, true));
}

int Int8DepthwiseGemmTileN(const DeviceInfo& dev, int m, int n, int k) {
  return Tiles(dev, m, n, (k + 3) / 4 * 4, true).tn;
}

bool Int8GemmSplits(const OpContext& ctx, int m, int n, int k, bool dw) {
  const long kp = (k + 3) / 4 * 4;
  const Int8Tiles t = Tiles(ctx.env.device(), m, n, kp, dw);
  return PlanInt8(ctx, t, m, n, kp, ctx.max_alloc, dw).splits > 1;
}

size_t Int8GemmSumBytes(const OpContext& ctx, int m, int n, int k) {
  const long kp = (k + 3) / 4 * 4;
  const Int8Tiles t = Tiles(ctx.env.device(), m, n, kp, false);
  const GemmPlan p = PlanInt8(ctx, t, m, n, kp, SIZE_MAX, false);
  const size_t groups = size_t(Groups(t, m, n));
  return p.splits > 1 ? (size_t(m) * n + groups) * sizeof(int32_t) : 0;
}

const std::string& Int8DotPathOf(const OpContext& ctx) { return Int8DotPath(ctx.env.device()); }

Int8GemmWeights PrepareInt8Gemm(OpContext& ctx, const std::vector<int8_t>& b, int n, int k,
                                const std::vector<int32_t>& bias, int a_zero,
                                const OutputStage& stage) {
  Int8GemmWeights w;
  w.n = n, w.k = k, w.kp = (k + 3) / 4 * 4;
  std::vector<int8_t> packed(size_t(n) * w.kp, 0);
  std::vector<int32_t> folded(n);
  for (int r = 0; r < n; ++r) {
    int64_t sum = 0;
    for (int c = 0; c < k; ++c) {
      const int8_t v = b[size_t(r) * k + c];
      packed[size_t(r) * w.kp + c] = v;
      sum += v;
    }
    const int64_t f = (bias.empty() ? 0 : int64_t(bias[r])) - int64_t(a_zero) * sum;
    if (f < INT_MIN || f > INT_MAX) throw Error("int8 GEMM: a folded bias leaves int32");
    folded[r] = static_cast<int32_t>(f);
  }
  w.b = UploadBytes(ctx, packed.data(), packed.size());
  w.bias = UploadBytes(ctx, folded.data(), folded.size() * 4);
  w.stage = UploadOutputStage(ctx, stage);
  return w;
}

namespace {

// A squeeze after the GEMM (TAIL_SQUEEZE): its buffers into *state, the program's defines.
std::string TailDefines(OpContext& ctx, const Int8TailSqueeze& tail, const Int8Tiles& t, int n,
                        Int8GemmState* state) {
  const size_t wg = t.work_group();
  if (wg > 256 || (wg & (wg - 1)))
    throw Error("int8 GEMM: a folded squeeze needs groups of a power of 2 up to 256");
  PrepareInt8TailSqueeze(ctx, tail, n, &state->tail_sums, &state->tail_consts);
  return tail.has_softmax ? " -DTAIL_SQUEEZE -DSQ_SOFTMAX" : " -DTAIL_SQUEEZE";
}

// The GEMM's program on the device's dot-product path; should it not build (a driver that takes
// the probe but not the whole kernel), on the portable one. *path_used: the path it runs.
std::shared_ptr<Program> GemmProgram(OpContext& ctx, const std::string& defines,
                                     std::string* path_used) {
  std::string path = Int8DotPathOf(ctx);
  std::shared_ptr<Program> prog;
  try {
    const std::string dot = Int8DotDefines(path);
    prog = ctx.GetProgram("gemm_int8", dot.empty() ? defines : defines + " " + dot);
  } catch (const BuildError&) {
    if (path == "portable") throw;
    path = "portable";
    prog = ctx.GetProgram("gemm_int8", defines);
  }
  if (path_used) *path_used = path;
  return prog;
}

}  // namespace

std::vector<Launch> EncodeInt8Gemm(OpContext& ctx, const Int8GemmWeights& w, cl_mem a, cl_mem out,
                                   int m, int a_zero, const OutputStage& s, Int8GemmState* state,
                                   const ConvGeometry* g, std::string* path_used,
                                   const Int8Residual* residual, const Int8DepthwiseA* dw,
                                   const Int8Pool* pool, const Int8TailSqueeze* tail,
                                   const Int8Gate* gate) {
  if (tail && (pool || residual)) throw Error("int8 GEMM: a folded squeeze with a pool or an ADD");
  if (gate && (g || dw || pool || !gate->gate))
    throw Error("int8 GEMM: a folded gate needs a plain A");
  if (dw && (g || dw->g.c != w.k || dw->g.c % 4 || dw->g.oc != dw->g.c ||
             m != dw->g.n * dw->g.oh * dw->g.ow))
    throw Error("int8 GEMM: the folded depthwise does not match its A");
  if (pool && (!g || dw || residual || m != 4 * g->n * pool->ph * pool->pw ||
               2 * pool->ph > g->oh || 2 * pool->pw > g->ow))
    throw Error("int8 GEMM: the folded pool does not match its convolution");
  cl_mem stage = w.stage.get();
  if (!s.table.empty()) {
    state->table_stage = UploadOutputStage(ctx, s);
    stage = state->table_stage.get();
  }
  // Decided once: the tiles and the tap loads follow the same rule.
  const bool short_dw = dw && ShortK(ctx.env.device(), m, w.n, w.kp);
  const Int8Tiles t = Tiles(ctx.env.device(), m, w.n, w.kp, dw != nullptr);
  const GemmPlan p = PlanInt8(ctx, t, m, w.n, w.kp, ctx.max_alloc, dw != nullptr);
  const bool split = p.splits > 1;
  const long groups = Groups(t, m, w.n);
  char tiles[96];
  std::snprintf(tiles, sizeof tiles, "-DTM=%d -DTN=%d -DTK4=%d -DWM=%d -DWN=%d", t.tm, t.tn, t.tk4,
                t.wm, t.wn);
  std::string defines = tiles;
  const bool vec = g ? g->c % 4 == 0 : w.k % 4 == 0;
  if (g) defines += " -DIM2COL";
  if (dw)
    defines += " -DDW_A -DDW_KH=" + std::to_string(dw->g.kh) +
               " -DDW_KW=" + std::to_string(dw->g.kw) +
               (dw->expand ? " -DEXPAND_A -DEX_C=" + std::to_string(dw->expand->k) : "");
  // Short K: the depthwise's taps load together (kernels/gemm_int8.cl's DW_TAPS_TOGETHER).
  if (short_dw) defines += " -DDW_TAPS_TOGETHER";
  if (dw && dw->expand &&
      (dw->expand->k % 4 || dw->expand->kp != dw->expand->k || dw->expand->n != dw->g.c))
    throw Error("int8 GEMM: the folded expand does not match its depthwise");
  if (vec) defines += " -DVEC_A";
  if (split) defines += " -DSPLIT_K";
  if (residual) defines += " -DQUANT_RESIDUAL";
  if (gate) defines += " -DGATE_A";
  if (pool) {
    if (t.tm % 4) throw Error("int8 GEMM: a pool needs tiles of four rows at a time");
    defines += " -DPOOL2";
  }
  if (tail) defines += TailDefines(ctx, *tail, t, w.n, state);
  // The launch's integers, in kernels/gemm_int8.cl's order (GemmInt8Param), read from memory.
  ConvGeometry none;
  const ConvGeometry& g_ = g ? *g : dw ? dw->g : none;
  ParamBlock prm =
      LaunchIntegers(w, m, a_zero, s, g_, split ? p.k_per_split : w.kp, dw, pool, gate);
  // The constant buffers, each at its slot of prm's first ten.
  state->residual_params = residual ? UploadInts(ctx, residual->params) : Buffer();
  std::vector<cl_mem> slots = {w.b.get(), w.bias.get(), stage, state->residual_params.get()};
  if (dw) slots.insert(slots.end(), {dw->filter, dw->bias, dw->stage});
  if (dw && dw->expand)
    slots.insert(slots.end(),
                 {dw->expand->b.get(), dw->expand->bias.get(), dw->expand->stage.get()});
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i]) prm.Slot(i, slots[i]);
  const std::string packed = prm.Upload(ctx);
  if (!packed.empty()) defines += " " + packed;
  state->consts = prm.TakeBuffer();
  const std::shared_ptr<Program> prog = GemmProgram(ctx, defines, path_used);
  Launch l;
  l.name = std::string(g    ? "gemm_int8_im2col"
                       : dw ? "gemm_int8_depthwise"
                            : "gemm_int8") +
           (gate ? "_gate" : "") + (pool ? "_pool" : "") + (split ? "_splitk" : "") +
           (tail ? "_squeeze" : "");
  l.kernel = CreateKernel(*prog, "gemm_int8");
  SetArgs(l.kernel, a, out);
  cl_uint next = prm.Set(l.kernel, 2);
  if (split) {
    // All zero now; the last group of each tile leaves its sums and counter zero again.
    state->sums = ZeroBuffer(ctx, (size_t(m) * w.n + size_t(groups)) * sizeof(int32_t));
    SetArgsFrom(l.kernel, next++, state->sums.get());
  }
  if (residual) SetArgsFrom(l.kernel, next++, residual->operand);
  if (gate) SetArgsFrom(l.kernel, next++, gate->gate);
  if (tail) {
    SetArgsFrom(l.kernel, next++, state->tail_sums.get());
    SetArgsFrom(l.kernel, next++, state->tail_consts.get());
  }
  l.dims = split ? 2 : 1;
  l.global[0] = size_t(groups) * t.work_group();
  l.local[0] = t.work_group();
  if (split) l.global[1] = p.splits, l.local[1] = 1;
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace clgpu
