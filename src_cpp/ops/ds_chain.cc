// The depthwise-separable chain kernel's plan, cost and launch (ops/ds_chain.h).
#include "ops/ds_chain.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <tuple>

#include "cl/int8_dot.h"
#include "cl/loader.h"
#include "common/env.h"
#include "common/error.h"
#include "ops/conv2d_algorithm.h"
#include "ops/op_helpers.h"

namespace clgpu {
namespace {

// The kernel's int fields per block (kernels/ds_chain.cl's DSC_FIELDS).
constexpr int kFields = 16;
// The largest group the kernel asks for (256, 512 and 1024 ran alike on the H200; 1024 needs
// registers its tiles would spill for).
constexpr size_t kMaxWg = 512;
// The 1x1's pixels per work-item (DSC_PX), the depthwise's rows per work-item (DSC_R).
constexpr int kPixels = 4;
constexpr int kRows = 4;
// A block's time in its group (DsBlockUs): a fixed part for its barriers and local copies, and
// its arithmetic at this share of one compute unit's nominal rate. Fitted on the H200 to the
// chain kernel's event times over 4 blocks of 8-64 channels on 125 pixels (3.9 us a block of
// 16 channels, 11.2 of 64; bench/results/ds-chain-NVIDIA_H200.md).
constexpr double kStageUs = 3.2;
constexpr double kUnitEfficiency = 0.58;

// The grid form's group (kernels/ds_chain_grid.cl's DSG_WG) and its least pixels per group:
// fewer leave most of a group idle in the 1x1 of a narrow block.
constexpr size_t kGridWg = 256;
// The share of the launches a block saves that its grid-form time must stay under (DsBlockPays).
constexpr double kGridShare = 0.8;

// Each block of stride 1 keeping the map's size, one filter size for all, channels in fours:
// what both kernels take.
bool ChainShapesValid(const std::vector<DsBlockShape>& blocks) {
  if (blocks.empty()) return false;
  const ConvGeometry& g0 = blocks[0].dw;
  for (const DsBlockShape& b : blocks) {
    const ConvGeometry& g = b.dw;
    if (g.n <= 0 || g.c <= 0 || b.oc <= 0 || g.c % 4 || b.oc % 4 || g.oc != g.c || g.sh != 1 ||
        g.sw != 1 || g.oh != g.h || g.ow != g.w || g.groups != 1 || g.kh != g0.kh ||
        g.kw != g0.kw || g.kh <= 0 || g.kw <= 0 || g.kh * g.kw > 25 || g.n != g0.n || g.h != g0.h ||
        g.w != g0.w)
      return false;
  }
  for (size_t i = 1; i < blocks.size(); ++i)
    if (blocks[i].dw.c != blocks[i - 1].oc) return false;
  return true;
}

size_t GroupSize(const DeviceInfo& dev) {
  size_t wg = 64;
  while (wg * 2 <= std::min(kMaxWg, dev.max_work_group_size)) wg *= 2;
  return wg;
}

long CeilDiv(long a, long b) { return (a + b - 1) / b; }

int FloatBits(float v) {
  int i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}

}  // namespace

std::optional<DsChainPlan> PlanDsChain(const DeviceInfo& dev,
                                       const std::vector<DsBlockShape>& blocks, size_t wg) {
  if (!ChainShapesValid(blocks) || dev.max_work_group_size < 64) return std::nullopt;
  DsChainPlan p;
  p.wg = wg ? wg : GroupSize(dev);
  long xf = 0;
  for (const DsBlockShape& b : blocks)
    xf = std::max(xf, long(b.dw.h) * b.dw.w * std::max(b.dw.c, b.oc));
  // The activations, the table and the largest block's constants through its first rows.
  const long budget = long(BlockLocalFloats(dev)) - 3 - long(blocks.size()) * kFields - xf;
  p.x_floats = int(xf);
  long kmax = 0;
  for (const DsBlockShape& b : blocks) {
    const ConvGeometry& g = b.dw;
    const long fixed = long(g.kh) * g.kw * g.c + g.c + b.oc;
    long rows = std::min<long>(g.c, (budget - fixed) / b.oc);
    rows -= rows % 4;
    if (rows < 4) return std::nullopt;
    p.rows.push_back(int(rows));
    kmax = std::max(kmax, fixed + rows * b.oc);
    const long hw = long(g.h) * g.w;
    p.dwpt = int(std::max<long>(p.dwpt, CeilDiv(CeilDiv(g.h, kRows) * g.w * g.c / 4, long(p.wg))));
    p.pwt = int(std::max<long>(p.pwt, CeilDiv(CeilDiv(hw, kPixels) * b.oc / 4, long(p.wg))));
  }
  p.k_floats = int(kmax);
  p.pf = int(CeilDiv(kmax / 4, long(p.wg)));
  return p;
}

double DsBlockUs(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  // $CLGPU_DS_CHAIN_US="STAGE_US,EFFICIENCY" replaces the two constants (research: fitting them).
  const std::vector<double> knob =
      EnvNumbers("CLGPU_DS_CHAIN_US", 2, "STAGE_US,EFFICIENCY (0 <= us < 1000, 0 < efficiency)",
                 [](const std::vector<double>& x) { return x[0] >= 0 && x[0] < 1e3 && x[1] > 0; });
  const double stage_us = knob.empty() ? kStageUs : knob[0];
  const double efficiency = knob.empty() ? kUnitEfficiency : knob[1];
  const double flops = 2.0 * dw.h * dw.w * dw.c * (double(dw.kh) * dw.kw + oc);
  const double unit_gflops = NominalGflops(dev) / std::max(dev.compute_units, 1) * efficiency;
  return stage_us + flops / (unit_gflops * 1e3);
}

namespace {

// The grid form's figures: the device profile's, or $CLGPU_DS_GRID_US="STAGE_US,STEP_US"
// (research: fitting them); $CLGPU_DS_GRID=0 turns the form off, =1 on where the profile has no
// figure (with 5 and 0.4 us: tests on a CPU device). Read at each use.
struct GridFigures {
  double stage_us = 0, step_us = 0;
};
GridFigures GridFiguresFor(const DeviceInfo& dev) {
  const std::optional<bool> on = EnvSwitch("CLGPU_DS_GRID");
  if (on == false) return {};
  GridFigures f{dev.profile.ds_grid_stage_us, dev.profile.ds_grid_step_us};
  if (on && f.stage_us <= 0) f = {5.0, 0.4};
  const std::vector<double> knob =
      EnvNumbers("CLGPU_DS_GRID_US", 2, "STAGE_US,STEP_US (0 < each < 1000)",
                 [](const std::vector<double>& x) {
                   return x[0] > 0 && x[0] < 1e3 && x[1] > 0 && x[1] < 1e3;
                 });
  if (!knob.empty() && f.stage_us > 0) f = {knob[0], knob[1]};
  return f;
}

// The lanes of a chain's 1x1s with `pixels` per group: a power of 2, at most every block's
// channel quads, while every block's (pixel, output quad, lane) items fit one pass of the group.
int GridLanes(const std::vector<DsBlockShape>& blocks, long pixels) {
  long quads = 0, cmin = LONG_MAX;
  for (const DsBlockShape& b : blocks)
    quads = std::max(quads, pixels * b.oc / 4), cmin = std::min<long>(cmin, b.dw.c);
  int lanes = 1;
  while (lanes * 2 <= cmin / 4 && quads * lanes * 2 <= long(kGridWg)) lanes *= 2;
  return lanes;
}

// A block's time in the grid form: its fixed part (the kernel's share of a start, the
// barrier, the first loads) and its steps, each a chain of loads from L2 in one work-item: the
// depthwise's passes over the group's (pixel, channel quad) items, and the 1x1's passes times
// the channel quads each of its work-items sums (their weights read from L2 one quad at a time).
double DsGridBlockUs(const GridFigures& f, const DsBlockShape& b, long pixels, int lanes) {
  const long c4 = b.dw.c / 4, oc4 = b.oc / 4;
  const long dw = CeilDiv(pixels * c4, long(kGridWg));
  const long pw = CeilDiv(pixels * oc4 * lanes, long(kGridWg)) * CeilDiv(c4, long(lanes));
  return f.stage_us + double(dw + pw) * f.step_us;
}

}  // namespace

bool GridSyncSound(const DeviceInfo& dev) {
  return dev.profile.cpu || (dev.profile.nvidia_ptx && dev.id && !PtxDefines(dev).empty());
}

std::string GridSyncDefines(const DeviceInfo& dev) {
  return dev.profile.cpu ? "" : " " + PtxDefines(dev);
}

std::optional<DsGridPlan> PlanDsGrid(const DeviceInfo& dev,
                                     const std::vector<DsBlockShape>& blocks) {
  const GridFigures f = GridFiguresFor(dev);
  // The groups' hand-over needs PTX's fences and L2 loads on a GPU (kernels/group_sync.cl), where
  // the probe ran them.
  if (f.stage_us <= 0 || !ChainShapesValid(blocks) || dev.max_work_group_size < kGridWg ||
      dev.compute_units < 1 || !GridSyncSound(dev))
    return std::nullopt;
  const ConvGeometry& g0 = blocks[0].dw;
  const long np = long(g0.n) * g0.h * g0.w;
  long cmax = 0;
  for (const DsBlockShape& b : blocks) cmax = std::max<long>(cmax, b.dw.c);
  // $CLGPU_DS_GRID_PIXELS: the pixels per group (research), else the fastest count by the
  // figures, a power of 2, with no more groups than compute units.
  const std::vector<double> px =
      EnvNumbers("CLGPU_DS_GRID_PIXELS", 1, "a positive integer",
                 [](const std::vector<double>& x) { return WholeAtLeast(x, 1); });
  std::optional<DsGridPlan> best;
  double best_us = 0;
  for (long pixels = 1; pixels <= 2 * np; pixels *= 2) {
    const long at = px.empty() ? pixels : long(px[0]);
    DsGridPlan p;
    p.wg = kGridWg;
    p.pixels = int(at);
    p.groups = int(CeilDiv(np, at));
    p.lanes = GridLanes(blocks, at);
    p.local_floats = size_t(at) * cmax + 4 * p.wg + 4;
    if (p.groups <= dev.compute_units && p.local_floats <= BlockLocalFloats(dev)) {
      double us = 0;
      for (size_t i = 0; i < blocks.size(); ++i) {
        if (i + 1 < blocks.size()) p.act_floats = std::max(p.act_floats, np * blocks[i].oc);
        p.block_us.push_back(DsGridBlockUs(f, blocks[i], at, p.lanes));
        us += p.block_us.back();
      }
      if (!best || us < best_us) best = std::move(p), best_us = us;
    }
    if (!px.empty()) break;
  }
  return best;
}

std::optional<DsChainChoice> ChooseDsChain(const DeviceInfo& dev,
                                           const std::vector<DsBlockShape>& blocks) {
  std::optional<DsChainChoice> best;
  if (PlanDsChain(dev, blocks)) {
    double us = 0;
    for (const DsBlockShape& b : blocks) us += DsBlockUs(dev, b.dw, b.oc);
    best = DsChainChoice{false, us};
  }
  if (const std::optional<DsGridPlan> grid = PlanDsGrid(dev, blocks)) {
    double us = 0;
    for (double u : grid->block_us) us += u;
    if (!best || us < best->us) best = DsChainChoice{true, us};
  }
  return best;
}

bool DsBlockPays(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  const std::array<double, kLaunchKinds>& launch = dev.profile.launch_us;
  const double fused = launch[kFusedLaunch] > 0 ? launch[kFusedLaunch] : 6;
  // In one group: under the fused launch it saves (fitted so, ds-chain-NVIDIA_H200.md).
  if (PlanDsChain(dev, {{dw, oc}}) && DsBlockUs(dev, dw, oc) < fused) return true;
  // In the grid form: under a share of the launches the block's folded GEMM takes (a split's
  // further one too), as that GEMM's own device time partly hides behind the host's enqueue:
  // on the H200 blocks estimated at 14-14.5 us of 15 ran 0.90-0.93x as fast chained, one at
  // 10.1 1.24x faster (bench/results/ab-options-grid-ds3-NVIDIA_H200.md).
  const std::optional<DsGridPlan> grid = PlanDsGrid(dev, {{dw, oc}});
  if (!grid) return false;
  const double saved =
      fused + (DepthwiseGemmLaunches(dev, dw, oc, 0).count - 1) * launch[kSplitLaunch];
  return grid->block_us[0] < kGridShare * saved;
}

namespace {

// The grid form's launch over the chain's table and constants, or none where this device cannot
// run it after all (no PTX on a GPU, a group the compiler cannot fit): the group form then.
std::vector<Launch> EncodeDsGrid(OpContext& ctx, const std::vector<DsBlockShape>& shapes,
                                 Buffer& consts, cl_mem in, cl_mem out) {
  const DeviceInfo& dev = ctx.env.device();
  const std::optional<DsGridPlan> p = PlanDsGrid(dev, shapes);
  if (!p) return {};
  const ConvGeometry& g0 = shapes[0].dw;
  auto prog = ctx.GetProgram(
      "ds_chain_grid", "-DDSG_WG=" + std::to_string(p->wg) + " -DDSG_KH=" + std::to_string(g0.kh) +
                           " -DDSG_KW=" + std::to_string(g0.kw) + GridSyncDefines(dev));
  Launch l = Make1d(prog, "ds_chain_grid", size_t(p->groups) * p->wg, p->wg);
  if (KernelGroupLimit(ctx, l.kernel) < p->wg) return {};
  // The barrier's two ints (zero), padding to 16 floats, the two buffers between blocks.
  l.state = ZeroBuffer(ctx, (16 + 2 * size_t(p->act_floats)) * sizeof(float));
  SetArgsFrom(l.kernel, 0, in, out, consts.get(), l.state.get(), g0.n * g0.h * g0.w, g0.h, g0.w,
              int(shapes.size()), int(p->act_floats), p->pixels, p->lanes,
              LocalBytes{p->local_floats * sizeof(float)});
  l.consts = std::move(consts);
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace

std::vector<Launch> EncodeDsChain(OpContext& ctx, const std::vector<DsChainBlock>& blocks,
                                  cl_mem in, cl_mem out) {
  std::vector<DsBlockShape> shapes;
  for (const DsChainBlock& b : blocks) {
    if (b.pw.k != b.dw.g.c) throw Error("ds_chain: a 1x1 reads other channels than its depthwise");
    shapes.push_back({b.dw.g, b.pw.n});
  }
  const DeviceInfo& dev = ctx.env.device();
  std::optional<DsChainPlan> plan = PlanDsChain(dev, shapes);
  const std::optional<DsChainChoice> choice = ChooseDsChain(dev, shapes);
  if (blocks.size() < 2 || !choice)
    throw Error("a depthwise-separable chain's blocks no longer fit its kernel");
  const ConvGeometry& g0 = blocks[0].dw.g;
  // Each block's constants as float32, laid out as local memory holds them (kernels/ds_chain.cl),
  // after the table, 16-byte aligned.
  const size_t elem = ctx.storage_bytes;
  std::vector<std::vector<float>> regions;
  for (const DsChainBlock& b : blocks) {
    const ConvGeometry& g = b.dw.g;
    const size_t taps = size_t(g.kh) * g.kw;
    std::vector<float> r = ReadBackFloats(ctx, b.dw.filter, taps * g.c, elem);
    for (const auto& [m, count, size] : {std::make_tuple(b.dw.bias, size_t(g.c), size_t(4)),
                                         std::make_tuple(b.pw.bias, size_t(b.pw.n), size_t(4))}) {
      const std::vector<float> v = ReadBackFloats(ctx, m, count, size);
      r.insert(r.end(), v.begin(), v.end());
    }
    // The 1x1's [OC][C] weights as [C][OC]: a chunk of rows is then one run of memory, and a
    // warp's neighbouring channel quads read neighbouring float4s.
    const std::vector<float> w = ReadBackFloats(ctx, b.pw.weights, size_t(b.pw.n) * b.pw.k, elem);
    for (int c = 0; c < b.pw.k; ++c)
      for (int o = 0; o < b.pw.n; ++o) r.push_back(w[size_t(o) * b.pw.k + c]);
    regions.push_back(std::move(r));
  }
  std::vector<size_t> at;
  size_t total = blocks.size() * kFields * sizeof(int);
  for (const std::vector<float>& r : regions) {
    total = RoundUp(total, 16);
    at.push_back(total);
    total += r.size() * sizeof(float);
  }
  std::vector<char> host(total, 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ConvGeometry& g = blocks[i].dw.g;
    // The group kernel's rows of the 1x1 held at a time (the grid kernel reads none of them).
    const int rows = plan ? plan->rows[i] : 0;
    const long first = long(g.kh) * g.kw * g.c + g.c + blocks[i].pw.n + long(rows) * blocks[i].pw.n;
    const int f[kFields] = {g.c,
                            blocks[i].pw.n,
                            g.dh,
                            g.dw,
                            g.pad_top,
                            g.pad_left,
                            int(at[i]),
                            rows,
                            int(first / 4),
                            0,
                            0,
                            0,
                            FloatBits(blocks[i].dw.act_min),
                            FloatBits(blocks[i].dw.act_max),
                            FloatBits(blocks[i].pw.act_min),
                            FloatBits(blocks[i].pw.act_max)};
    std::memcpy(&host[i * kFields * sizeof(int)], f, sizeof f);
    std::memcpy(&host[at[i]], regions[i].data(), regions[i].size() * sizeof(float));
  }
  Buffer consts = UploadBytes(ctx, host.data(), host.size());
  if (choice->grid)
    if (std::vector<Launch> l = EncodeDsGrid(ctx, shapes, consts, in, out); !l.empty()) return l;
  if (!plan) throw Error("a depthwise-separable chain's blocks no longer fit its kernel");
  for (size_t wg = plan->wg;;) {
    auto prog = ctx.GetProgram(
        "ds_chain",
        "-DDSC_WG=" + std::to_string(wg) + " -DDSC_KH=" + std::to_string(g0.kh) +
            " -DDSC_KW=" + std::to_string(g0.kw) + " -DDSC_R=" + std::to_string(kRows) +
            " -DDSC_PX=" + std::to_string(kPixels) + " -DDSC_DWPT=" + std::to_string(plan->dwpt) +
            " -DDSC_PWT=" + std::to_string(plan->pwt) + " -DDSC_PF=" + std::to_string(plan->pf));
    Launch l = Make1d(prog, "ds_chain", size_t(g0.n) * wg, wg);
    // A compiler that cannot fit the group: half of it (each work-item then holds more).
    if (KernelGroupLimit(ctx, l.kernel) < wg) {
      if (wg <= 64) throw Error("ds_chain: the device cannot run its smallest group");
      wg /= 2;
      plan = PlanDsChain(ctx.env.device(), shapes, wg);
      if (!plan) throw Error("a depthwise-separable chain's blocks no longer fit its kernel");
      continue;
    }
    const size_t lm = size_t(plan->x_floats) + plan->k_floats + blocks.size() * kFields + 3;
    SetArgsFrom(l.kernel, 0, in, out, consts.get(), LocalBytes{lm * sizeof(float)}, g0.h, g0.w,
                int(blocks.size()), plan->x_floats, plan->k_floats);
    l.consts = std::move(consts);
    std::vector<Launch> launches;
    launches.push_back(std::move(l));
    return launches;
  }
}

}  // namespace clgpu
