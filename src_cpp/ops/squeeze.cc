// The squeeze's launch (ops/squeeze.h, kernels/squeeze_int8.cl).
#include "ops/squeeze.h"

#include <algorithm>

#include "cl/int8_dot.h"
#include "common/error.h"

namespace clgpu {
namespace {

constexpr size_t kTile = 256;     // SQ_TILE in kernels/squeeze_int8.cl
constexpr int64_t kWarp = 32;     // channels per group at most: a warp's consecutive bytes
constexpr int64_t kGroups = 256;  // groups wanted for the mean: two per unit of a 132-unit GPU
constexpr int64_t kMinRows = 4;   // reduced rows per work-item at least, before splitting more

int64_t CeilPow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

bool SqueezeDenseFits(int n, int k) {
  return n > 0 && k > 0 && n <= kMaxSqueezeVector && k <= kMaxSqueezeVector &&
         int64_t(n) * k <= kMaxSqueezeWeights;
}

Launch EncodeInt8Squeeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                         const Int8MeanStage& mean, const std::vector<Int8Dense>& dense,
                         Int8SqueezeState* state) {
  bool fits = !dense.empty() && dense.size() <= 2 && channels <= kMaxSqueezeVector;
  for (const Int8Dense& d : dense) fits = fits && SqueezeDenseFits(d.w->n, d.w->kp);
  if (!fits || dense[0].w->k != channels || (dense.size() == 2 && dense[1].w->k != dense[0].w->n))
    throw Error("squeeze: dense ops do not chain over the mean's " + std::to_string(channels) +
                " channels");
  state->params = UploadInts(ctx, mean.params);
  state->up = UploadBytes(ctx, mean.up.data(), mean.up.size());
  state->stages.clear();
  for (const Int8Dense& d : dense) {
    OutputStage s = d.stage;
    if (s.table.empty()) {  // the identity: the kernel always maps through a table
      s.table.resize(256);
      for (int v = 0; v < 256; ++v) s.table[v] = static_cast<uint8_t>(v);
    }
    state->stages.push_back(UploadOutputStage(ctx, s));
  }
  auto program = ctx.GetProgram("squeeze_int8", PtxDefines(ctx.env.device()));
  Launch l;
  l.name = "squeeze_int8";
  l.kernel = CreateKernel(*program, l.name);
  const int64_t group = static_cast<int64_t>(RowGroup(ctx, l.kernel, kTile, INT64_MAX));
  const int64_t lx = std::min({CeilPow2(channels), kWarp, group});
  const int64_t ly = std::min(group / lx, CeilPow2(reduce));
  const int64_t blocks = (channels + lx - 1) / lx;
  int64_t slices = 1;
  if (blocks < kGroups)
    slices = std::max<int64_t>(
        1, std::min((kGroups + blocks - 1) / blocks, int64_t(reduce) / (ly * kMinRows)));
  state->sums = ZeroBuffer(ctx, sizeof(int) * size_t(channels));
  state->counter = ZeroBuffer(ctx, sizeof(int));
  const Int8Dense& d1 = dense[0];
  const Int8Dense& d2 = dense.size() == 2 ? dense[1] : dense[0];
  const bool two = dense.size() == 2;
  const cl_mem stage2 = state->stages[two ? 1 : 0].get();
  SetArgs(l.kernel, x, out, state->sums.get(), state->counter.get(), reduce, channels,
          static_cast<int>(slices), state->params.get(), state->up.get(),
          static_cast<int>(mean.up.size()), d1.w->b.get(), d1.w->bias.get(), state->stages[0].get(),
          d1.w->n, d1.w->kp, d1.stage.zero_point, d1.stage.act_min, d1.stage.act_max,
          d1.stage.up_below, d2.w->b.get(), d2.w->bias.get(), stage2, two ? d2.w->n : 0,
          two ? d2.w->kp : 0, d2.stage.zero_point, d2.stage.act_min, d2.stage.act_max,
          d2.stage.up_below, two ? 2 : 1);
  l.dims = 2;
  l.local[0] = static_cast<size_t>(lx), l.local[1] = static_cast<size_t>(ly);
  l.global[0] = static_cast<size_t>(blocks * slices * lx);
  l.global[1] = static_cast<size_t>(ly);
  return l;
}

}  // namespace clgpu
