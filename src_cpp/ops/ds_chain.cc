// The depthwise-separable chain kernel's plan, cost and launch (ops/ds_chain.h).
#include "ops/ds_chain.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "cl/loader.h"
#include "common/env.h"
#include "common/error.h"
#include "common/half.h"
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
  if (blocks.empty() || dev.max_work_group_size < 64) return std::nullopt;
  DsChainPlan p;
  p.wg = wg ? wg : GroupSize(dev);
  const ConvGeometry& g0 = blocks[0].dw;
  long xf = 0;
  for (const DsBlockShape& b : blocks) {
    const ConvGeometry& g = b.dw;
    if (g.n <= 0 || g.c <= 0 || b.oc <= 0 || g.c % 4 || b.oc % 4 || g.oc != g.c || g.sh != 1 ||
        g.sw != 1 || g.oh != g.h || g.ow != g.w || g.groups != 1 || g.kh != g0.kh ||
        g.kw != g0.kw || g.kh <= 0 || g.kw <= 0 || g.kh * g.kw > 25 || g.n != g0.n || g.h != g0.h ||
        g.w != g0.w)
      return std::nullopt;
    xf = std::max(xf, long(g.h) * g.w * std::max(g.c, b.oc));
  }
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

bool DsBlockFits(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  return PlanDsChain(dev, {{dw, oc}}).has_value();
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

bool DsBlockPays(const DeviceInfo& dev, const ConvGeometry& dw, int oc) {
  const double saved = dev.profile.launch_us[kFusedLaunch];
  return DsBlockFits(dev, dw, oc) && DsBlockUs(dev, dw, oc) < (saved > 0 ? saved : 6);
}

namespace {

// A buffer of `count` values of the float storage (`elem` bytes each) or float32, as floats.
std::vector<float> ReadFloats(OpContext& ctx, cl_mem m, size_t count, size_t elem) {
  if (BufferBytes(m) < count * elem) throw Error("ds_chain: a constant buffer is short");
  std::vector<char> raw(count * elem);
  CheckCl(Cl().clEnqueueReadBuffer(ctx.queue, m, CL_TRUE, 0, raw.size(), raw.data(), 0, nullptr,
                                   nullptr),
          "clEnqueueReadBuffer(ds_chain constants)");
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (elem == 2) {
      uint16_t h;
      std::memcpy(&h, &raw[i * 2], 2);
      out[i] = HalfToFloat(h);
    } else {
      std::memcpy(&out[i], &raw[i * 4], 4);
    }
  }
  return out;
}

}  // namespace

std::vector<Launch> EncodeDsChain(OpContext& ctx, const std::vector<DsChainBlock>& blocks,
                                  cl_mem in, cl_mem out) {
  std::vector<DsBlockShape> shapes;
  for (const DsChainBlock& b : blocks) {
    if (b.pw.k != b.dw.g.c) throw Error("ds_chain: a 1x1 reads other channels than its depthwise");
    shapes.push_back({b.dw.g, b.pw.n});
  }
  std::optional<DsChainPlan> plan = PlanDsChain(ctx.env.device(), shapes);
  if (blocks.size() < 2 || !plan)
    throw Error("a depthwise-separable chain's blocks no longer fit its kernel");
  const ConvGeometry& g0 = blocks[0].dw.g;
  // Each block's constants as float32, laid out as local memory holds them (kernels/ds_chain.cl),
  // after the table, 16-byte aligned.
  const size_t elem = ctx.storage_bytes;
  std::vector<std::vector<float>> regions;
  for (const DsChainBlock& b : blocks) {
    const ConvGeometry& g = b.dw.g;
    const size_t taps = size_t(g.kh) * g.kw;
    std::vector<float> r = ReadFloats(ctx, b.dw.filter, taps * g.c, elem);
    for (const auto& [m, count, size] : {std::make_tuple(b.dw.bias, size_t(g.c), size_t(4)),
                                         std::make_tuple(b.pw.bias, size_t(b.pw.n), size_t(4))}) {
      const std::vector<float> v = ReadFloats(ctx, m, count, size);
      r.insert(r.end(), v.begin(), v.end());
    }
    // The 1x1's [OC][C] weights as [C][OC]: a chunk of rows is then one run of memory, and a
    // warp's neighbouring channel quads read neighbouring float4s.
    const std::vector<float> w = ReadFloats(ctx, b.pw.weights, size_t(b.pw.n) * b.pw.k, elem);
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
    const long first =
        long(g.kh) * g.kw * g.c + g.c + blocks[i].pw.n + long(plan->rows[i]) * blocks[i].pw.n;
    const int f[kFields] = {g.c,
                            blocks[i].pw.n,
                            g.dh,
                            g.dw,
                            g.pad_top,
                            g.pad_left,
                            int(at[i]),
                            plan->rows[i],
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
