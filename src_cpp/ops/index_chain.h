// Data movement as index stages: TRANSPOSE, PAD / PADV2 / MIRROR_PAD and the strided copies
// (STRIDED_SLICE, SLICE, ...) each say where an output element reads its input, in flat
// elements. A chain of them (fusion/gathers.cc) runs as one gather launch
// (kernels/gather_chain.cl) that walks the stages from the last op's output back to the first
// op's input; RESHAPE-like flat copies between them are no stage at all, since every stage
// reads and writes whole tensors in their element order.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// Output element (c_0..c_r-1 of `out`) reads flat input element
// base + sum_d q_d * coef[d], q_d = c_d - off[d]; where bound[d] > 0, a q_d outside
// [0, bound[d]) is the pad `value` (mode 0) or reflected into it (1 REFLECT, 2 SYMMETRIC, as
// MIRROR_PAD). An empty `out` is the identity (a flat copy).
struct IndexStage {
  Shape out;
  std::vector<int> coef, off, bound;
  int64_t base = 0;
  int mode = 0;
  float value = 0;
};

// One stage per axis walked with these strides: TRANSPOSE's output axis d reads input axis
// perm[d].
IndexStage TransposeStage(const Shape& in, const Shape& out, const std::vector<int>& perm);
// A PAD of `before` (the rest after) in `mode` with constant `value`.
IndexStage PadStage(const Shape& in, const Shape& out, const std::vector<int>& before, int mode,
                    float value);
// kernels/gather_chain.cl's meta array for `stages`, the last op's first (identities skipped).
std::vector<int> ChainMeta(const std::vector<IndexStage>& stages);

}  // namespace clgpu
