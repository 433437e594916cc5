// One reduction over the middle axis of an [outer, reduce, inner] view, by kernels/reduce.cl's
// reduce_tiled: shared by the reductions (ops/reduce.cc) and whole-image pooling (ops/pool.cc),
// whose window over a 128x128 map ran as one work-item per channel.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/op.h"

namespace clgpu {

struct TiledReduction {
  int red_op = 0;  // kernels/reduce.cl's RED_OP
  int64_t outer = 1, reduce = 1, inner = 1;
  float divisor = 1;      // the result is divided by it (a mean's count)
  int compute_units = 0;  // the device's (DeviceInfo), which the split fills; 0: 32
  // Clamp applied to the result (a pool's fused activation), then the epilogue that the op's
  // programs are built with (OpContext::storage_defines). Slices of a split reduction must get
  // neither, so an op with a folded epilogue is never split.
  float act_lo = -std::numeric_limits<float>::infinity();
  float act_hi = std::numeric_limits<float>::infinity();
  bool has_epilogue = false;
};

// Groups would hold so few work-items that one work-item per output does better (the caller
// then takes another kernel).
bool TiledReductionIsTiny(int64_t reduce, int64_t inner);
// Slices of the reduced extent reduced apart and then combined, when few groups would each walk
// a long extent (a squeeze-excite MEAN over a large image); 1 when not split.
int TiledReductionSlices(const TiledReduction& r);
// Scratch (OpContext::scratch[0]) the split needs, 0 if none.
size_t TiledReductionScratchBytes(const TiledReduction& r, size_t elem_bytes);
// Appends its launches (two when split) and returns "tiled" or "tiled_split".
std::string AppendTiledReduction(OpContext& ctx, const TiledReduction& r, cl_mem in, cl_mem out,
                                 std::vector<Launch>* launches);

}  // namespace clgpu
