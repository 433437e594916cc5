// Data movement as an index map: every output element reads one input element, at an index
// affine in the output coordinates, one axis possibly through a table (GATHER). STRIDED_SLICE,
// SLICE, GATHER, UNPACK, DEPTH_TO_SPACE and SPACE_TO_DEPTH describe themselves as maps; one
// kernel runs any map (kernels/strided_copy.cl), chunks of a map are maps, and a map that reads a
// contiguous range of the input in order is a flat copy (no kernel).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"

namespace clgpu {

// Output element c (a coordinate of `out`) reads input coordinate q of `in` where, per input
// axis a: q[a] = first[a] + c[d] * step[d] if output axis d walks it (src[d] == a), or
// table[c[d]] for the table axis, or first[a] if no output axis walks it. `in` and `out` are
// views: the tensors' elements in their order under another shape.
struct AxisMap {
  Shape in, out;
  std::vector<int> src;    // per output axis: the input axis it walks; -1: none (extent 1)
  std::vector<int> step;   // per output axis: input indices per output index (may be < 0)
  std::vector<int> first;  // per input axis
  int table_axis = -1;     // an output axis read through `table` (its step is unused)
  std::vector<int> table;  // input indices along src[table_axis], one per output index
};

// "" if every read of `m` lies inside `in` and its fields agree, else why not.
std::string CheckAxisMap(const AxisMap& m);

// The box of m.in that the elements `out_box` of m.out read.
Box AxisMapInputBox(const AxisMap& m, const Box& out_box);
// The map computing `out_box` from a buffer holding exactly AxisMapInputBox(m, out_box).
AxisMap AxisMapChunk(const AxisMap& m, const Box& out_box);
// true, with the first element, if the map reads one contiguous range of the input in order.
bool AxisMapFlatRange(const AxisMap& m, size_t* first);

// An op made of one map per output, each a launch of strided_copy, or flat copies when
// every map is a contiguous range. One activation input; a single output runs in chunks.
class StridedCopyOp : public Op, public Chunker {
 public:
  using Op::Op;
  // One map per output for these input shapes; throws Error if they do not fit the node.
  virtual std::vector<AxisMap> Maps(const std::vector<Shape>& in) const = 0;

  std::string algorithm() const override { return chained() ? "gather_chain" : algorithm_; }
  // A chained op runs whole (fusion/gathers.cc checked it fits).
  const Chunker* chunker() const override { return chained() ? nullptr : this; }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }
  bool FlatRanges(const std::vector<Shape>& in, std::vector<size_t>* first) const override;
  // One map without a table: its stage (ops/index_chain.h).
  bool IndexStageOf(const Shape& in, const Shape& out, IndexStage* stage) const override;
  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override;

  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override;
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override;
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override;

 protected:
  // A chunk: a fixed map between staging buffers.
  explicit StridedCopyOp(int node_index) : Op(node_index) {}

 private:
  std::string algorithm_ = "strided_copy";
  std::vector<Buffer> meta_;
};

// Work for the cost model: one move per element of every output.
double OutputsWork(const GraphView& g, const NodeInfo& n);

}  // namespace clgpu
