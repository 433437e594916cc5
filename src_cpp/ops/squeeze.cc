// The squeezes' launches (ops/squeeze.h; kernels/squeeze_int8.cl, squeeze_float.cl).
#include "ops/squeeze.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "cl/errors.h"
#include "cl/int8_dot.h"
#include "cl/loader.h"
#include "common/error.h"
#include "ops/epilogue.h"

namespace clgpu {
namespace {

constexpr size_t kTile = 256;     // SQ_TILE / MQ_TILE: the largest group
constexpr int64_t kWarp = 32;     // inner columns per group at most: a warp's consecutive bytes
constexpr int64_t kGroups = 256;  // groups wanted: two per unit of a 132-unit GPU
constexpr int64_t kMinRows = 4;   // reduced rows per work-item at least, before splitting more

int64_t CeilPow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// An epilogue's defines under the names of dense op `layer` of kernels/squeeze_float.cl
// (-DSQ1_EPILOGUE=..., ...).
std::string LayerDefines(const std::string& epilogue, int layer) {
  return EpilogueDefinesAs(epilogue, "SQ" + std::to_string(layer) + "_");
}

}  // namespace

TiledMeanGroups TiledMeanGroupsFor(OpContext& ctx, const Kernel& k, int64_t outer, int64_t reduce,
                                   int64_t inner) {
  TiledMeanGroups g;
  const int64_t group = static_cast<int64_t>(RowGroup(ctx, k, kTile, INT64_MAX));
  g.lx = std::min({CeilPow2(inner), kWarp, group});
  g.ly = std::min(group / g.lx, CeilPow2(reduce));
  g.blocks = (inner + g.lx - 1) / g.lx;
  const int64_t rows = outer * g.blocks;
  if (rows < kGroups)
    g.slices =
        std::max<int64_t>(1, std::min((kGroups + rows - 1) / rows, reduce / (g.ly * kMinRows)));
  return g;
}

void SetTiledMeanGeometry(const TiledMeanGroups& g, int64_t outer, Launch* l) {
  l->dims = 2;
  l->local[0] = static_cast<size_t>(g.lx), l->local[1] = static_cast<size_t>(g.ly);
  l->global[0] = static_cast<size_t>(outer * g.slices * g.blocks * g.lx);
  l->global[1] = static_cast<size_t>(g.ly);
}

bool SqueezeDenseFits(int n, int k, size_t bytes) {
  return n > 0 && k > 0 && n <= kMaxSqueezeVector && k <= kMaxSqueezeVector &&
         int64_t(n) * k * int64_t(bytes) <= kMaxSqueezeWeightBytes;
}

namespace {

// What both forms of the int8 squeeze check and upload (its own launch, or at the end of a GEMM):
// the dense ops chained over the mean's channels, the mean's parameters, each dense op's stage
// with a table (the identity where it has none), in *state; returns the kernel's constant
// buffers in squeeze_int8.cl's order (mp, up, b1, bias1, stage1, b2, bias2, stage2 [,
// sm_table]; layer 2's are layer 1's where there is one).
std::vector<cl_mem> UploadInt8Squeeze(OpContext& ctx, int channels, const Int8MeanStage& mean,
                                      const std::vector<Int8Dense>& dense,
                                      const SqueezeSoftmax* softmax, Int8SqueezeState* state) {
  bool fits = !dense.empty() && dense.size() <= 2 && channels <= kMaxSqueezeVector;
  for (const Int8Dense& d : dense) fits = fits && SqueezeDenseFits(d.w->n, d.w->kp, 1);
  if (!fits || dense[0].w->k != channels || (dense.size() == 2 && dense[1].w->k != dense[0].w->n))
    throw Error("squeeze: dense ops do not chain over the mean's " + std::to_string(channels) +
                " channels");
  const int n = dense.back().w->n;
  if (softmax && (n > kMaxSqueezeSoftmax || !softmax->table))
    throw Error("squeeze: a SOFTMAX over " + std::to_string(n) + " values");
  std::vector<int> params = mean.params;
  params.resize(4);
  params.push_back(mean.pool_count);
  state->params = UploadInts(ctx, params);
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
  const bool two = dense.size() == 2;
  const Int8Dense& d1 = dense[0];
  const Int8Dense& d2 = two ? dense[1] : dense[0];
  std::vector<cl_mem> parts = {
      state->params.get(),    state->up.get(), d1.w->b.get(),    d1.w->bias.get(),
      state->stages[0].get(), d2.w->b.get(),   d2.w->bias.get(), state->stages[two ? 1 : 0].get()};
  if (softmax) parts.push_back(softmax->table);
  return parts;
}

}  // namespace

Launch EncodeInt8Squeeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                         const Int8MeanStage& mean, const std::vector<Int8Dense>& dense,
                         Int8SqueezeState* state, const SqueezeSoftmax* softmax) {
  const std::vector<cl_mem> parts = UploadInt8Squeeze(ctx, channels, mean, dense, softmax, state);
  const Int8Dense& d1 = dense[0];
  const bool two = dense.size() == 2;
  const Int8Dense& d2 = two ? dense[1] : dense[0];
  std::vector<int> at;
  Buffer consts;
  const bool packed = PackConstants(ctx, parts, &consts, &at);
  auto c = [&](size_t i) { return ConstArg{parts[i], packed ? at[i] : 0, packed}; };
  auto program = ctx.GetProgram("squeeze_int8", PtxDefines(ctx.env.device()) +
                                                    (softmax ? " -DSQ_SOFTMAX" : "") +
                                                    (packed ? " -DPACKED" : ""));
  Launch l;
  l.name = "squeeze_int8";
  l.kernel = CreateKernel(*program, l.name);
  l.consts = std::move(consts);
  const TiledMeanGroups g = TiledMeanGroupsFor(ctx, l.kernel, 1, reduce, channels);
  state->sums = ZeroBuffer(ctx, sizeof(int) * size_t(channels));
  state->counter = ZeroBuffer(ctx, sizeof(int));
  SetArgs(l.kernel, x, out, state->sums.get(), state->counter.get(), reduce, channels,
          static_cast<int>(g.slices), c(0), c(1), static_cast<int>(mean.up.size()), c(2), c(3),
          c(4), d1.w->n, d1.w->kp, d1.stage.zero_point, d1.stage.act_min, d1.stage.act_max,
          d1.stage.up_below, c(5), c(6), c(7), two ? d2.w->n : 0, two ? d2.w->kp : 0,
          d2.stage.zero_point, d2.stage.act_min, d2.stage.act_max, d2.stage.up_below, two ? 2 : 1);
  cl_uint next = 29;
  if (softmax) {
    SetArgsFrom(l.kernel, next, c(8), softmax->out_scale, softmax->zero_point);
    next += 3;
  }
  if (packed) SetArgsFrom(l.kernel, next, l.consts.get());
  SetTiledMeanGeometry(g, 1, &l);
  return l;
}

Launch EncodeFloatSqueeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                          float divisor, bool bounded, const std::vector<FloatDense>& dense,
                          FloatSqueezeState* state, const SqueezeSoftmax* softmax) {
  bool fits = !dense.empty() && dense.size() <= 2 && channels <= kMaxFloatSqueezeVector;
  for (const FloatDense& d : dense)
    fits = fits && SqueezeDenseFits(d.n, d.k, ctx.storage_bytes) && d.n <= kMaxFloatSqueezeVector &&
           d.k <= kMaxFloatSqueezeVector;
  if (!fits || dense[0].k != channels || (dense.size() == 2 && dense[1].k != dense[0].n))
    throw Error("squeeze: dense ops do not chain over the mean's " + std::to_string(channels) +
                " channels");
  const FloatDense& d1 = dense[0];
  const bool two = dense.size() == 2;
  const FloatDense& d2 = two ? dense[1] : dense[0];
  std::string defines = PtxDefines(ctx.env.device()) + " " + LayerDefines(d1.epilogue, 1);
  if (two) defines += " " + LayerDefines(d2.epilogue, 2);
  if (softmax && dense.back().n > kMaxSqueezeSoftmax)
    throw Error("squeeze: a SOFTMAX over " + std::to_string(dense.back().n) + " values");
  if (softmax) defines += " -DSQ_SOFTMAX";
  if (bounded) defines += " -DSQ_MEAN_BOUNDED";
  const std::vector<cl_mem> parts = {d1.weights, d1.bias, d2.weights, d2.bias};
  std::vector<int> at;
  Buffer consts;
  const bool packed = PackConstants(ctx, parts, &consts, &at);
  if (packed) defines += " -DPACKED";
  auto c = [&](size_t i) { return ConstArg{parts[i], packed ? at[i] : 0, packed}; };
  auto program = ctx.GetProgram("squeeze_float", defines);
  Launch l;
  l.name = "squeeze_float";
  l.kernel = CreateKernel(*program, l.name);
  l.consts = std::move(consts);
  const TiledMeanGroups g = TiledMeanGroupsFor(ctx, l.kernel, 1, reduce, channels);
  state->partial = ZeroBuffer(ctx, sizeof(float) * size_t(g.slices) * size_t(channels));
  state->counter = ZeroBuffer(ctx, sizeof(int));
  SetArgs(l.kernel, x, out, state->partial.get(), state->counter.get(), reduce, channels,
          static_cast<int>(g.slices), divisor, c(0), c(1), d1.n, d1.k, d1.act_min, d1.act_max, c(2),
          c(3), two ? d2.n : 0, two ? d2.k : 0, d2.act_min, d2.act_max);
  cl_uint next = 20;
  if (softmax) SetArgsFrom(l.kernel, next++, softmax->beta);
  if (packed) SetArgsFrom(l.kernel, next, l.consts.get());
  SetTiledMeanGeometry(g, 1, &l);
  return l;
}

Launch EncodeFoldedInt8Squeeze(OpContext& ctx, const Op& op, cl_mem x, cl_mem out, int reduce,
                               int channels, const Int8MeanStage& mean, Int8SqueezeState* state,
                               double* flops) {
  std::vector<Int8Dense> dense(op.squeeze_dense().size());
  Shape row = {1, channels};
  *flops = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (!op.squeeze_dense()[i]->fold_source()->GetInt8Dense(ctx, row, &dense[i]))
      throw Error(std::string(op.type_name()) + ": a folded dense op has no int8 form");
    row = {1, dense[i].w->n};
    *flops += 2.0 * dense[i].w->n * dense[i].w->k;
  }
  SqueezeSoftmax softmax;
  if (op.squeeze_softmax() &&
      !op.squeeze_softmax()->fold_source()->GetSqueezeSoftmax(ctx, row[1], true, &softmax))
    throw Error(std::string(op.type_name()) + ": a folded SOFTMAX has no int8 form");
  return EncodeInt8Squeeze(ctx, x, out, reduce, channels, mean, dense, state,
                           op.squeeze_softmax() ? &softmax : nullptr);
}

Launch EncodeFoldedFloatSqueeze(OpContext& ctx, const Op& op, cl_mem x, cl_mem out, int reduce,
                                int channels, float divisor, bool bounded, FloatSqueezeState* state,
                                double* flops) {
  std::vector<FloatDense> dense(op.squeeze_dense().size());
  Shape row = {1, channels};
  *flops = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (!op.squeeze_dense()[i]->fold_source()->GetFloatDense(ctx, row, &dense[i]))
      throw Error(std::string(op.type_name()) + ": a folded dense op has no float form");
    row = {1, dense[i].n};
    *flops += 2.0 * dense[i].n * dense[i].k;
  }
  SqueezeSoftmax softmax;
  if (op.squeeze_softmax() &&
      !op.squeeze_softmax()->fold_source()->GetSqueezeSoftmax(ctx, row[1], false, &softmax))
    throw Error(std::string(op.type_name()) + ": a folded SOFTMAX has no float form");
  return EncodeFloatSqueeze(ctx, x, out, reduce, channels, divisor, bounded, dense, state,
                            op.squeeze_softmax() ? &softmax : nullptr);
}

bool GetFoldedInt8TailSqueeze(OpContext& ctx, Op& mean, const Shape& in, Int8TailSqueeze* tail) {
  FoldSource* source = mean.fold_source();
  if (!source || mean.squeeze_dense().empty() || in.empty() ||
      !source->GetInt8MeanStage(in, &tail->mean))
    return false;
  const int channels = static_cast<int>(in.back());
  Shape row = {1, channels};
  tail->dense.assign(mean.squeeze_dense().size(), Int8Dense{});
  for (size_t i = 0; i < tail->dense.size(); ++i) {
    FoldSource* d = mean.squeeze_dense()[i]->fold_source();
    if (!d || !d->GetInt8Dense(ctx, row, &tail->dense[i])) return false;
    row = {1, tail->dense[i].w->n};
  }
  tail->has_softmax = mean.squeeze_softmax() != nullptr;
  return !tail->has_softmax || (mean.squeeze_softmax()->fold_source() &&
                                mean.squeeze_softmax()->fold_source()->GetSqueezeSoftmax(
                                    ctx, int(row[1]), true, &tail->softmax));
}

void PrepareInt8TailSqueeze(OpContext& ctx, const Int8TailSqueeze& t, int channels, Buffer* sums,
                            Buffer* consts) {
  const std::vector<Int8Dense>& dense = t.dense;
  Int8SqueezeState parts_state;  // the parts, until copied into *consts
  std::vector<cl_mem> parts = UploadInt8Squeeze(ctx, channels, t.mean, dense,
                                                t.has_softmax ? &t.softmax : nullptr, &parts_state);
  parts.resize(9, nullptr);  // sm_table's slot without a SOFTMAX
  const bool two = dense.size() == 2;
  const Int8Dense& d1 = dense[0];
  const Int8Dense& d2 = two ? dense[1] : dense[0];
  // gemm_int8.cl's tail: [0..8] the parts' byte offsets (below), then the integers.
  std::vector<int> head(9, 0);
  for (int v : {channels, int(t.mean.up.size()), d1.w->n, d1.w->kp, d1.stage.zero_point,
                d1.stage.act_min, d1.stage.act_max, d1.stage.up_below, two ? d2.w->n : 0,
                two ? d2.w->kp : 0, d2.stage.zero_point, d2.stage.act_min, d2.stage.act_max,
                d2.stage.up_below, two ? 2 : 1, t.softmax.zero_point, 0})
    head.push_back(v);
  std::memcpy(&head[25], &t.softmax.out_scale, sizeof(float));
  size_t at = (head.size() * sizeof(int) + 15) / 16 * 16;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < parts.size(); ++i) {
    sizes.push_back(parts[i] ? BufferBytes(parts[i]) : 0);
    head[i] = static_cast<int>(at);
    at = (at + sizes[i] + 15) / 16 * 16;
  }
  if (at > size_t(INT_MAX)) throw Error("squeeze: its constants leave int32 offsets");
  Buffer b = ctx.env.CreateBuffer(at, CL_MEM_READ_ONLY);
  CheckCl(Cl().clEnqueueWriteBuffer(ctx.queue, b.get(), CL_TRUE, 0, head.size() * sizeof(int),
                                    head.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer(squeeze constants)");
  for (size_t i = 0; i < parts.size(); ++i)
    if (sizes[i])
      CheckCl(Cl().clEnqueueCopyBuffer(ctx.queue, parts[i], b.get(), 0, size_t(head[i]), sizes[i],
                                       0, nullptr, nullptr),
              "clEnqueueCopyBuffer(squeeze constants)");
  *consts = std::move(b);
  *sums = ZeroBuffer(ctx, sizeof(int) * (size_t(channels) + 1));
}

}  // namespace clgpu
