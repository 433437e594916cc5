// The dense chain kernel's plan, cost and launch (ops/dense_chain.h).
#include "ops/dense_chain.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "common/env.h"
#include "common/error.h"
#include "ops/conv2d_algorithm.h"
#include "ops/ds_chain.h"
#include "ops/op_helpers.h"

namespace clgpu {
namespace {

// The kernel's group (kernels/dense_chain_grid.cl's DCG_WG), one a compute unit, and its int
// fields per layer. Groups of 1024 would hold more weight loads in flight, but on the H200
// NVIDIA's driver gave builds for 1024 and 512 a group limit (CL_KERNEL_WORK_GROUP_SIZE) under
// their size, though ptxas counted 58 registers.
constexpr size_t kWg = 256;
constexpr int kFields = 8;
// Weights a group takes at least (floats): fewer groups meet at each barrier where a layer is
// small.
constexpr long kFloatsPerGroup = 4096;

long CeilDiv(long a, long b) { return (a + b - 1) / b; }

int FloatBits(float v) {
  int i;
  std::memcpy(&i, &v, sizeof i);
  return i;
}

// The form's figures: the device profile's, or $CLGPU_DENSE_GRID_US="STAGE_US,GBPS" (research:
// fitting them); $CLGPU_DENSE_GRID=0 turns the form off, =1 on where the profile has no figure
// (4 us, 50 GB/s, nothing hidden, no bound on the weights: tests on a CPU device). Read at each
// use.
struct Figures {
  double stage_us = 0, gbps = 0, hidden_us = 0, max_mb = 0;
};
Figures FiguresFor(const DeviceInfo& dev) {
  const std::optional<bool> on = EnvSwitch("CLGPU_DENSE_GRID");
  if (on == false) return {};
  const DeviceProfile& p = dev.profile;
  Figures f{p.dense_grid_stage_us, p.dense_grid_gbps, p.dense_grid_hidden_us, p.dense_grid_max_mb};
  if (on && (f.stage_us <= 0 || f.gbps <= 0)) f = {4.0, 50.0, 0, 0};
  const std::vector<double> knob =
      EnvNumbers("CLGPU_DENSE_GRID_US", 2, "STAGE_US,GBPS (0 < us < 1000, 0 < GB/s < 1e6)",
                 [](const std::vector<double>& x) {
                   return x[0] > 0 && x[0] < 1e3 && x[1] > 0 && x[1] < 1e6;
                 });
  if (!knob.empty() && f.stage_us > 0) f.stage_us = knob[0], f.gbps = knob[1];
  return f;
}

// A layer's lanes with `groups` groups: the fewest that give every group its share of the
// columns in one pass, and no more than the row's float4s need.
int LanesFor(const DenseLayerShape& l, int groups) {
  long cols = 1;
  while (cols < long(kWg) && cols * groups < l.n) cols *= 2;
  int lanes = int(long(kWg) / cols);
  while (lanes > 1 && lanes / 2 >= l.k / 4) lanes /= 2;
  return lanes;
}

// A layer's time: the fixed part, and its weights read at the figures' rate by the share of the
// device its busy groups hold.
double LayerUs(const Figures& f, const DeviceInfo& dev, const DenseLayerShape& l, int groups,
               int lanes) {
  const long cols = long(kWg) / lanes;
  const long busy = std::min<long>(groups, CeilDiv(l.n, cols));
  const double share = std::min(1.0, double(busy) / std::max(dev.compute_units, 1));
  const double bytes = double(l.n) * l.k * sizeof(float);
  return f.stage_us + bytes / (f.gbps * 1e3 * share);
}

}  // namespace

std::optional<DenseChainPlan> PlanDenseChain(const DeviceInfo& dev,
                                             const std::vector<DenseLayerShape>& layers) {
  const Figures f = FiguresFor(dev);
  if (f.stage_us <= 0 || layers.empty() || dev.max_work_group_size < kWg || dev.compute_units < 1 ||
      !GridSyncSound(dev))
    return std::nullopt;
  long kmax = 0, weights = 0;
  double bytes = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const DenseLayerShape& l = layers[i];
    if (l.n <= 0 || l.k <= 0 || l.k % 4 || (i > 0 && l.k != layers[i - 1].n)) return std::nullopt;
    kmax = std::max<long>(kmax, l.k);
    weights = std::max(weights, long(l.n) * l.k);
    bytes += double(l.n) * l.k * sizeof(float);
  }
  // The figures hold where the weights stay in the device's cache between invokes.
  if (f.max_mb > 0 && bytes > f.max_mb * 1e6) return std::nullopt;
  DenseChainPlan p;
  p.wg = kWg;
  p.local_floats = kWg + 4 + size_t(kmax) + 4;
  if (p.local_floats > BlockLocalFloats(dev)) return std::nullopt;
  p.groups = int(std::min<long>(dev.compute_units, CeilDiv(weights, kFloatsPerGroup)));
  for (size_t i = 0; i < layers.size(); ++i) {
    p.lanes.push_back(LanesFor(layers[i], p.groups));
    p.layer_us.push_back(LayerUs(f, dev, layers[i], p.groups, p.lanes.back()));
    if (i + 1 < layers.size()) p.act_floats = std::max<long>(p.act_floats, layers[i].n);
  }
  p.act_floats = long(RoundUp(size_t(std::max<long>(p.act_floats, 4)), 4));
  return p;
}

std::optional<double> DenseChainUs(const DeviceInfo& dev,
                                   const std::vector<DenseLayerShape>& layers) {
  const std::optional<DenseChainPlan> p = PlanDenseChain(dev, layers);
  if (!p) return std::nullopt;
  double us = 0;
  for (double u : p->layer_us) us += u;
  return std::max(0.0, us - FiguresFor(dev).hidden_us);
}

bool DenseLayerPays(const DeviceInfo& dev, const DenseLayerShape& layer) {
  const std::optional<DenseChainPlan> p = PlanDenseChain(dev, {layer});
  if (!p) return false;
  const double launch =
      dev.profile.launch_us[kGemmLaunch] > 0 ? dev.profile.launch_us[kGemmLaunch] : 6;
  return p->layer_us[0] < launch;
}

std::vector<Launch> EncodeDenseChain(OpContext& ctx, const std::vector<FloatDense>& layers,
                                     cl_mem in, cl_mem out) {
  std::vector<DenseLayerShape> shapes;
  for (const FloatDense& d : layers) {
    if (!d.epilogue.empty()) throw Error("dense_chain: a layer carries an epilogue");
    shapes.push_back({d.n, d.k});
  }
  const DeviceInfo& dev = ctx.env.device();
  const std::optional<DenseChainPlan> p = PlanDenseChain(dev, shapes);
  if (layers.size() < 2 || !p) throw Error("a dense chain's layers no longer fit its kernel");
  auto prog = ctx.GetProgram("dense_chain_grid",
                             "-DDCG_WG=" + std::to_string(p->wg) + GridSyncDefines(dev));
  Launch l = Make1d(prog, "dense_chain_grid", size_t(p->groups) * p->wg, p->wg);
  if (KernelGroupLimit(ctx, l.kernel) < p->wg) return {};
  // The table, then each layer's weights [N][K] and bias as float32, 16-byte aligned.
  std::vector<std::vector<float>> weights, biases;
  size_t total = layers.size() * kFields * sizeof(int);
  std::vector<std::array<size_t, 2>> at;
  for (const FloatDense& d : layers) {
    weights.push_back(ReadBackFloats(ctx, d.weights, size_t(d.n) * d.k, ctx.storage_bytes));
    biases.push_back(ReadBackFloats(ctx, d.bias, size_t(d.n), sizeof(float)));
    const size_t w = RoundUp(total, 16);
    const size_t b = RoundUp(w + weights.back().size() * sizeof(float), 16);
    at.push_back({w, b});
    total = b + biases.back().size() * sizeof(float);
  }
  if (total > size_t(INT32_MAX) || total > dev.max_alloc_bytes)
    throw Error("a dense chain's constants do not fit one buffer");
  std::vector<char> host(total, 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    float w_max = 0;
    for (float v : weights[i]) w_max = std::fabs(v) > w_max ? std::fabs(v) : w_max;
    const int fields[kFields] = {layers[i].k,
                                 layers[i].n,
                                 int(at[i][0]),
                                 int(at[i][1]),
                                 p->lanes[i],
                                 FloatBits(layers[i].act_min),
                                 FloatBits(layers[i].act_max),
                                 FloatBits(w_max)};
    std::memcpy(&host[i * kFields * sizeof(int)], fields, sizeof fields);
    std::memcpy(&host[at[i][0]], weights[i].data(), weights[i].size() * sizeof(float));
    std::memcpy(&host[at[i][1]], biases[i].data(), biases[i].size() * sizeof(float));
  }
  l.consts = UploadBytes(ctx, host.data(), host.size());
  // The barrier's two ints (zero), padding to 16 floats, the two buffers between layers.
  l.state = ZeroBuffer(ctx, (16 + 2 * size_t(p->act_floats)) * sizeof(float));
  SetArgsFrom(l.kernel, 0, in, out, l.consts.get(), l.state.get(), int(layers.size()),
              int(p->act_floats), LocalBytes{p->local_floats * sizeof(float)});
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace clgpu
