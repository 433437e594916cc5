// A squeeze: the int8 MEAN over the H and W of one image followed by one or two dense ops on
// its vector (FULLY_CONNECTED, or CONV_2D of a 1x1 filter over the 1x1 image): the pool,
// reduce and expand of a squeeze-and-excitation block (EfficientNet, MobileNetV3), three
// launches of microseconds each on a GPU where each launch costs the host microseconds too.
// The MEAN op runs them in one launch (kernels/squeeze_int8.cl), bit for bit with the three
// ops; the partition folds the dense ops in where the graph allows (Partition::FoldSqueezes,
// Op::FoldSqueeze).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/gemm_int8.h"
#include "ops/op.h"
#include "ops/quant.h"

namespace clgpu {

// A dense op as the int8 GEMM holds it (ops/gemm_int8.h), for one row.
struct Int8Dense {
  const Int8GemmWeights* w = nullptr;  // owned by the dense op
  OutputStage stage;                   // its table included (Op::FoldTable)
};

// The widest vector a squeeze keeps in local memory (the mean, each dense op's output), and the
// most weights of one dense op (one work-group runs it).
constexpr int kMaxSqueezeVector = 4096;
constexpr int64_t kMaxSqueezeWeights = int64_t(1) << 18;

// Whether a dense op of n outputs over k inputs fits a squeeze.
bool SqueezeDenseFits(int n, int k);

// The MEAN's own arithmetic (ops/mean_int8.cc): out = clamp(quant_multiply(sum + params[0],
// params[1], params[2], up[c % up.size()]) + params[3]).
struct Int8MeanStage {
  std::vector<int> params;
  std::vector<uint8_t> up;
};

// What the squeeze's launch keeps: the mean's int32 sums and group counter (zero between
// launches), its parameters, each dense op's stage with a table.
struct Int8SqueezeState {
  Buffer sums, counter, params, up;
  std::vector<Buffer> stages;
};

// The launch computing out (the last dense op's n integers) from x [reduce][channels].
Launch EncodeInt8Squeeze(OpContext& ctx, cl_mem x, cl_mem out, int reduce, int channels,
                         const Int8MeanStage& mean, const std::vector<Int8Dense>& dense,
                         Int8SqueezeState* state);

}  // namespace clgpu
