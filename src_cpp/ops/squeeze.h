// A squeeze: the int8 MEAN over the H and W of one image followed by one or two dense ops on
// its vector (FULLY_CONNECTED, or CONV_2D of a 1x1 filter over the 1x1 image): the pool,
// reduce and expand of a squeeze-and-excitation block (EfficientNet, MobileNetV3), three
// launches of microseconds each on a GPU where each launch costs the host microseconds too.
// The MEAN op runs them in one launch (kernels/squeeze_int8.cl), bit for bit with the three
// ops; the partition folds the dense ops in where the graph allows (fusion/squeeze.cc,
// AttachSqueeze). A float MEAN does the same (squeeze_float.cl), a global AVERAGE_POOL_2D takes
// the MEAN's place, and a SOFTMAX after the dense ops may run in the same launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/gemm_int8.h"
#include "ops/op.h"
#include "ops/quant.h"

namespace clgpu {

// A dense op as the int8 GEMM holds it (ops/gemm_int8.h), for one row.
struct Int8Dense {
  const Int8GemmWeights* w = nullptr;  // owned by the dense op
  OutputStage stage;                   // its table included (AttachTable)
};

// A dense op over float values as the float GEMM holds it (ops/gemm.h), for one row.
struct FloatDense {
  cl_mem weights = nullptr;  // [n][k] in the float storage, owned by the dense op
  cl_mem bias = nullptr;     // n float32 values, likewise
  int n = 0, k = 0;
  float act_min = 0, act_max = 0;  // its clamp (folded clamps included)
  std::string epilogue;            // its element-wise epilogue's defines (Op::epilogue_defines)
};

// A SOFTMAX over the last dense op's outputs (fusion/squeeze.cc), run by the squeeze's last group:
// float exp(beta * (x - max)) over their sum; int8 as kernels/softmax_int8.cl computes it, from
// the op's table of exp (owned by the op), bit for bit. At most kMaxSqueezeSoftmax values.
struct SqueezeSoftmax {
  float beta = 1.0f;
  cl_mem table = nullptr;
  float out_scale = 0;
  int zero_point = 0;
};
constexpr int kMaxSqueezeSoftmax = 256;  // SQ_TILE

// The widest vector a squeeze keeps in local memory (the mean, each dense op's output: SQ_VEC of
// kernels/squeeze_int8.cl and squeeze_float.cl), and the most weight bytes of one dense op: one
// work-group, on one compute unit, reads them all. On the H200 a float32 squeeze of 38 KiB of
// weights per dense op ran in 15 us against 18 us for its three kernels apart, one of 75 KiB in
// 20 against 19 us, one of 221 KiB in 45 against 18 us (docs/performance.md, "Squeezes").
constexpr int kMaxSqueezeVector = 4096;
constexpr int kMaxFloatSqueezeVector = 2048;
constexpr int64_t kMaxSqueezeWeightBytes = int64_t(64) << 10;

// Whether a dense op of n outputs over k inputs fits a squeeze, its weights `bytes` each.
bool SqueezeDenseFits(int n, int k, size_t bytes = 1);

// The groups of a tiled mean over [outer, reduce, inner] (kernels/mean_int8.cl's mean_int8_tiled
// and the squeezes, whose outer is 1): lx consecutive inner columns (a warp's bytes at most) by ly
// rows, both powers of 2 within the kernel's largest group and 256; blocks of lx columns per outer
// row; and slices of the reduced extent reduced apart, so that few columns over a large image
// still make about 256 groups (two per unit of a 132-unit GPU) while each work-item keeps four
// rows or more. The launch: local (lx, ly), global (outer * slices * blocks * lx, ly).
struct TiledMeanGroups {
  int64_t lx = 1, ly = 1, blocks = 1, slices = 1;
};
TiledMeanGroups TiledMeanGroupsFor(OpContext& ctx, const Kernel& k, int64_t outer, int64_t reduce,
                                   int64_t inner);
void SetTiledMeanGeometry(const TiledMeanGroups& g, int64_t outer, Launch* l);

// The MEAN's own arithmetic (ops/mean_int8.cc): out = clamp(quant_multiply(sum + params[0],
// params[1], params[2], up[c % up.size()]) + params[3]).
// pool_count > 0: an AVERAGE_POOL_2D's instead (pool.cl's avg_pool2d_int), the sum divided by
// that count, rounded half away from zero; params and up unused.
struct Int8MeanStage {
  std::vector<int> params;
  std::vector<uint8_t> up;
  int pool_count = 0;
};

// What the squeeze's launch keeps: the mean's int32 sums and group counter (zero between
// launches), its parameters, each dense op's stage with a table.
struct Int8SqueezeState {
  Buffer sums, counter, params, up;
  std::vector<Buffer> stages;
};

// The launch computing out (the last dense op's n integers) from x [reduce][channels].
// With `softmax`, out is that SOFTMAX over them.
Launch EncodeInt8Squeeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                         const Int8MeanStage& mean, const std::vector<Int8Dense>& dense,
                         Int8SqueezeState* state, const SqueezeSoftmax* softmax = nullptr);

// A squeeze run by the last group of an int8 GEMM's launch over the GEMM's output (one image of
// `channels` = the GEMM's n; fusion/squeeze_tail.cc, kernels/gemm_int8.cl's TAIL_SQUEEZE).
struct Int8TailSqueeze {
  Int8MeanStage mean;
  std::vector<Int8Dense> dense;
  SqueezeSoftmax softmax;
  bool has_softmax = false;
};
// The squeeze `mean` (a MEAN or whole-image AVERAGE_POOL_2D with its folded dense ops) over an
// input of shape `in`, its parts uploaded; false where it has no int8 form of that shape.
bool GetFoldedInt8TailSqueeze(OpContext& ctx, Op& mean, const Shape& in, Int8TailSqueeze* tail);
// Its buffers for the GEMM's launch: *sums, the column sums then their counter (zero), and
// *consts, its integers (gemm_int8.cl's tail) with its constants packed after them. Throws Error
// where the dense ops do not chain over the channels.
void PrepareInt8TailSqueeze(OpContext& ctx, const Int8TailSqueeze& tail, int channels, Buffer* sums,
                            Buffer* consts);

// The float launch's own buffers: the groups' column sums and their counter.
struct FloatSqueezeState {
  Buffer partial, counter;
};

// The launch computing out (the last dense op's n values) from x [reduce][channels]: the mean
// (the sum over `reduce` divided by `divisor`; `bounded`: then clamped to +-FLT_MAX, as an
// AVERAGE_POOL_2D's activation range bounds it in TFLite and a MEAN's does not), then the dense
// ops (and `softmax`, as above).
Launch EncodeFloatSqueeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                          float divisor, bool bounded, const std::vector<FloatDense>& dense,
                          FloatSqueezeState* state, const SqueezeSoftmax* softmax = nullptr);

// The same for `op`'s folded squeeze (its squeeze_dense() and squeeze_softmax()), their forms
// taken from them now; *flops: the dense ops' arithmetic.
Launch EncodeFoldedInt8Squeeze(OpContext& ctx, const Op& op, cl_mem x, cl_mem out, int reduce,
                               int channels, const Int8MeanStage& mean, Int8SqueezeState* state,
                               double* flops);
Launch EncodeFoldedFloatSqueeze(OpContext& ctx, const Op& op, cl_mem x, cl_mem out, int reduce,
                                int channels, float divisor, bool bounded, FloatSqueezeState* state,
                                double* flops);

}  // namespace clgpu
