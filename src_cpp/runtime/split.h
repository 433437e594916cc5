// Tensors and work larger than the device's largest allocation: a tensor is stored
// as pieces (own buffers, each a box of the tensor), an op runs as chunks (sub-ops on
// staging buffers filled and drained by rectangular copies). Everything here plans;
// runtime/partition.cc owns the buffers and enqueues the commands.
#pragma once

#include <string>
#include <vector>

#include "ops/op.h"

namespace clgpu {

// A contiguous range [begin, end) of a tensor's elements (row-major).
struct Piece {
  size_t begin = 0, end = 0;
};

// Cuts a tensor into pieces of at most `max_elems` elements, each a box: one index
// of the axes before some axis a, a range of a, all of the axes after it (a is the
// outermost axis whose slices fit). Empty, with *why, if one element does not fit
// or more than kMaxPieces would be needed.
constexpr size_t kMaxPieces = 4096;
std::vector<Piece> PlanPieces(const Shape& shape, size_t max_elems, std::string* why);

// Where a tensor lives on the device: pieces, or one buffer [0, n). Piece i starts
// `offsets[i]` bytes into mems[i] (a tensor inside an arena is addressed through
// the arena: PoCL 3.1 crashes in clEnqueueCopyBufferRect on a sub-buffer).
struct Storage {
  std::vector<cl_mem> mems;
  std::vector<Piece> pieces;    // same length as mems
  std::vector<size_t> offsets;  // same length, or empty for all 0
};

// The chunks of one op: boxes of output 0 and of each input, in spec.views.
struct ChunkPlan {
  ChunkSpec spec;
  std::vector<Box> out;
  std::vector<std::vector<Box>> in;
  bool empty() const { return out.empty(); }
};

// Chunks of one op at most (each is a sub-op with its own kernels).
constexpr size_t kMaxChunks = 16384;

// Whether `op` can run on the device with these shapes, each buffer within
// ctx.max_alloc (storage ctx.storage_bytes per element): "" if so, else why not.
// *plan gets chunks when the op must run in them (a tensor it touches is larger
// than one buffer, or its weights or scratch would be), and stays empty otherwise.
// Chunks aim at `chunk_bytes` per buffer (memory for staging) and fall back to
// ctx.max_alloc when a chunk that small cannot be made.
std::string PlanOpChunks(const OpContext& ctx, const Op& op, const std::vector<Shape>& in,
                         const std::vector<Shape>& out, size_t chunk_bytes, ChunkPlan* plan);

// One copy between device buffers: linear (region[1] == region[2] == 1 and unit
// pitches) or rectangular, in bytes.
struct CopyCommand {
  cl_mem src = nullptr, dst = nullptr;
  size_t src_origin[3] = {0, 0, 0}, dst_origin[3] = {0, 0, 0}, region[3] = {0, 1, 1};
  size_t src_row_pitch = 0, src_slice_pitch = 0, dst_row_pitch = 0, dst_slice_pitch = 0;
  bool rect = false;
};

// Appends the copies that move box `from` of `src` (seen as `src_view`) to box `to`
// of `dst` (seen as `dst_view`); the boxes have the same rank and extents.
void AppendBoxCopies(const Storage& src, const Shape& src_view, const Box& from, const Storage& dst,
                     const Shape& dst_view, const Box& to, size_t elem_bytes,
                     std::vector<CopyCommand>* out);

// clEnqueueCopyBuffer / clEnqueueCopyBufferRect, without host synchronisation.
void EnqueueCopy(cl_command_queue q, const CopyCommand& c, cl_event* event);

// The boxes (in `view`) that flat elements [begin, end) cover: one when the range
// is aligned like a piece, at most 2 * rank - 1 otherwise.
std::vector<Box> RangeBoxes(const Shape& view, size_t begin, size_t end);

int64_t BoxElements(const Box& b);
Box WholeBox(const Shape& view);
bool SameBox(const Box& a, const Box& b);

}  // namespace clgpu
