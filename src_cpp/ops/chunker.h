// An op that can run in chunks (runtime/split.h): the op as a sequence of sub-ops, each
// computing one box of the output from copies of the input boxes it reads. Ops that can
// implement it and return themselves from Op::chunker().
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "graph/graph.h"
#include "ops/op_parts.h"

namespace clgpu {

class Op;
struct OpContext;

class Chunker {
 public:
  // false if the op cannot run in chunks for these input shapes.
  virtual bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const = 0;
  // The box of each input (in spec.views) that the chunk computing `out` reads.
  virtual std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const = 0;
  // Bytes of the largest weight buffer the chunk computing `out` uploads.
  virtual size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>& in,
                                  const Box& out) const {
    (void)ctx, (void)in, (void)out;
    return 0;
  }
  // An op computing exactly `out` from buffers holding exactly the ChunkInputs boxes
  // (input shapes = their sizes). It shares this op's weights: it must not outlive it.
  virtual std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const = 0;

 protected:
  ~Chunker() = default;  // owned as the op it is part of
};

// Chunks of an op over rows (its last axis whole): boxes over every other axis, every input read
// over the box the output is written (inputs shaped like the output), and each chunk the same
// op. Derived: the op's class, with a constructor from the whole op (softmax, layer norm).
template <class Derived>
class RowChunker : public Chunker {
 public:
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    spec->views = in;
    spec->views.push_back(in.at(0));
    for (size_t a = 0; a + 1 < in[0].size(); ++a) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    return std::vector<Box>(in.size(), out);
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }

 protected:
  ~RowChunker() = default;
};

}  // namespace clgpu
