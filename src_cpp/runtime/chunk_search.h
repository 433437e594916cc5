// The search over chunk extents that runtime/split.cc's PlanOpChunks runs (TryChunks).
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "ops/op.h"
#include "runtime/split.h"

namespace clgpu {

inline size_t BoxBytes(const Box& b, size_t eb) { return size_t(BoxElements(b)) * eb; }

// The chunks of one op's output box: their count, a walk over them and the largest buffer one
// needs, for TryChunks' search over the chunks' extents.
class ChunkSearch {
 public:
  ChunkSearch(const OpContext& ctx, const Chunker& op, const std::vector<Shape>& in,
              const ChunkSpec& spec)
      : ctx_(ctx), op_(op), in_(in), ov_(spec.views.back()), rank_(ov_.size()), step_(rank_, 1) {
    for (size_t a = 0; a < std::min(rank_, spec.step.size()); ++a)
      step_[a] = std::max(spec.step[a], 1);
  }
  const Shape& output() const { return ov_; }

  size_t Count(const std::vector<int>& ext) const {
    size_t n = 1;
    for (size_t a = 0; a < rank_; ++a) {
      n *= size_t((ov_[a] + ext[a] - 1) / ext[a]);
      if (n > kMaxChunks) return kMaxChunks + 1;
    }
    return n;
  }
  // Calls fn(box) for every chunk of extents `ext`, row-major, until it returns false.
  bool Each(const std::vector<int>& ext, const std::function<bool(const Box&)>& fn) const {
    Box b;
    b.begin.assign(rank_, 0);
    b.size.assign(rank_, 0);
    for (;;) {
      for (size_t a = 0; a < rank_; ++a) b.size[a] = std::min(ext[a], ov_[a] - b.begin[a]);
      if (!fn(b)) return false;
      // Next chunk: an odometer over the axes, the last one fastest.
      size_t a = rank_;
      for (;;) {
        if (a == 0) return true;
        --a;
        b.begin[a] += ext[a];
        if (b.begin[a] < ov_[a]) break;
        b.begin[a] = 0;
      }
    }
  }
  // The largest buffer the chunk computing `b` needs: its output, weights, inputs, scratch.
  size_t Peak(const Box& b) const {
    const size_t eb = ctx_.storage_bytes;
    size_t p = std::max(BoxBytes(b, eb), op_.ChunkWeightBytes(ctx_, in_, b));
    std::vector<Shape> shapes;
    for (const Box& x : op_.ChunkInputs(in_, b)) {
      p = std::max(p, BoxBytes(x, eb));
      shapes.push_back(x.size);
    }
    if (auto sub = op_.MakeChunk(in_, b))
      for (size_t s : sub->ScratchBytes(ctx_, shapes)) p = std::max(p, s);
    return p;
  }
  // Past kMaxChunks a candidate counts as fitting without being tried (smaller chunks fit at
  // least as well): the search then ends on the fewest chunks.
  bool WeightsFit(const std::vector<int>& ext, size_t limit) const {
    return Count(ext) > kMaxChunks ||
           Each(ext, [&](const Box& b) { return op_.ChunkWeightBytes(ctx_, in_, b) <= limit; });
  }
  bool AllFit(const std::vector<int>& ext, size_t limit) const {
    return Count(ext) > kMaxChunks || Each(ext, [&](const Box& b) { return Peak(b) <= limit; });
  }
  // Axis a's extent: the largest multiple of its step for which `fits` holds (one step at least).
  void Shrink(std::vector<int>& ext, size_t a,
              const std::function<bool(const std::vector<int>&)>& fits) const {
    if (a >= rank_) return;
    int lo = 1, hi = (ov_[a] + step_[a] - 1) / step_[a];  // in steps; lo always taken
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      std::vector<int> t = ext;
      t[a] = std::min(mid * step_[a], ov_[a]);
      if (fits(t)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    ext[a] = std::min(lo * step_[a], ov_[a]);
  }

 private:
  const OpContext& ctx_;
  const Chunker& op_;
  const std::vector<Shape>& in_;
  const Shape& ov_;
  size_t rank_;
  std::vector<int> step_;
};

}  // namespace clgpu
