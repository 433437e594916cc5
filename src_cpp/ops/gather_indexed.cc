// GATHER through run-time int32 positions and EMBEDDING_LOOKUP (ops/gather_indexed.h). The
// params are an activation or a constant (an embedding table: float, a folded DEQUANTIZE's, or
// int8 dynamic-range weights, ops/hybrid_weights.h), uploaded once in the storage format.
#include "ops/gather_indexed.h"

#include <climits>
#include <cstring>

#include "common/error.h"
#include "graph/validate.h"
#include "ops/hybrid_weights.h"
#include "ops/op_helpers.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Where the operands are: GATHER(params, positions), EMBEDDING_LOOKUP(ids, table).
struct Operands {
  int params, ids, axis;
  const char* what;  // the invoke error's start, as TFLite's kernels name the op
};

Operands OperandsOf(const GraphView& g, const NodeInfo& n) {
  if (n.op == tfl::kEmbeddingLookup) return {n.inputs[1], n.inputs[0], 0, "Embedding Lookup"};
  tfl::GatherParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  const int rank = static_cast<int>(g.shape(n.inputs[0]).size());
  return {n.inputs[0], n.inputs[1], p.axis < 0 ? p.axis + rank : p.axis, "GATHER"};
}

// params[:axis] + ids + params[axis + 1:].
Shape GatheredShape(const Shape& params, int axis, const Shape& ids) {
  Shape out(params.begin(), params.begin() + axis);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), params.begin() + axis + 1, params.end());
  return out;
}

class IndexedGatherOp : public Op {
 public:
  IndexedGatherOp(const GraphView& g, const NodeInfo& node, const Operands& o)
      : Op(node,
           g.IsConstant(o.params) ? std::vector<int>{o.ids} : std::vector<int>{o.params, o.ids},
           {node.outputs[0]}),
        axis_(o.axis),
        ids_(o.ids),
        what_(o.what),
        constant_(g.IsConstant(o.params)),
        params_shape_(g.shape(o.params)) {
    if (constant_) table_ = LazyConstant(g, o.params);
    name_ = node.op == tfl::kEmbeddingLookup ? "EMBEDDING_LOOKUP" : "GATHER";
  }
  const char* type_name() const override { return name_; }
  std::string algorithm() const override { return constant_ ? "rows_of_constant" : "rows"; }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }
  double WeightBytes() const override { return double(table_buffer_.bytes()); }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& params = constant_ ? params_shape_ : in.at(0);
    if (axis_ < 0 || axis_ >= static_cast<int>(params.size()))
      throw Error(std::string(name_) + " axis is out of range for " + ShapeString(params));
    return {GatheredShape(params, axis_, in.back())};
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>& out,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& outs) override {
    const Shape& params = constant_ ? params_shape_ : in_shapes[0];
    int64_t inner = 1;
    for (size_t a = axis_ + 1; a < params.size(); ++a) inner *= params[a];
    const int64_t extent = params[axis_], n_ids = NumElements(in_shapes.back());
    const int64_t total = NumElements(out[0]);
    index_inputs_ = {{ids_, extent, what_}};
    launches_.clear();
    if (total == 0) return;
    if (extent == 0) throw Error(std::string(name_) + " reads from an empty axis");
    if (total > INT32_MAX || NumElements(params) > INT32_MAX)
      throw Error(std::string(name_) + " is too large for 32-bit indexing");
    if (constant_ && !table_buffer_) table_buffer_ = UploadWeights(ctx, table_.values());
    cl_mem source = constant_ ? table_buffer_.get() : in[0];
    Launch l;
    l.name = "gather_indexed";
    l.kernel = CreateKernel(*ctx.GetProgram("gather_indexed"), l.name);
    SetArgs(l.kernel, source, in.back(), outs[0], int(total), int(n_ids), int(extent), int(inner));
    l.global[0] = RoundUp(size_t(total), 64);
    launches_.push_back(std::move(l));
  }

 private:
  int axis_, ids_;
  const char* what_;
  const char* name_ = "GATHER";
  bool constant_;
  Shape params_shape_;
  LazyConstant table_;
  Buffer table_buffer_;
};

}  // namespace

std::string CheckIndexedGather(const GraphView& g, const NodeInfo& node) {
  if (auto why = CheckInputs(node, node.op == tfl::kGather ? "GATHER" : "EMBEDDING_LOOKUP", 2);
      !why.empty())
    return why;
  if (auto why = CheckOutputs(node, "GATHER", 1); !why.empty()) return why;
  if (node.op == tfl::kGather) {
    if (!node.builtin_data) return "missing GATHER params";
    tfl::GatherParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    if (p.batch_dims != 0)
      return "batch_dims " + std::to_string(p.batch_dims) + " (only 0 is claimed)";
  }
  const Operands o = OperandsOf(g, node);
  if (!g.valid_tensor(o.params) || !g.valid_tensor(o.ids)) return "invalid tensor index";
  if (node.op == tfl::kEmbeddingLookup)  // an int8 table: dynamic-range weights
    if (auto why = CheckHybridWeights(g, node); !why.empty()) return why;
  if (g.type(o.ids) != kTfLiteInt32)
    return std::string(o.what) + " positions are not int32 (run-time int64 ones stay on the CPU)";
  if (g.IsConstant(o.ids)) return "constant positions (a constant GATHER's case)";
  if (auto why = CheckFloatTensors(g, {o.params, node.outputs[0]}); !why.empty()) return why;
  const Shape params = g.shape(o.params), ids = g.shape(o.ids);
  if (node.op == tfl::kEmbeddingLookup && (ids.size() != 1 || params.size() < 2))
    return "EMBEDDING_LOOKUP needs 1-D ids and a table of rank 2 or more";
  if (o.axis < 0 || o.axis >= static_cast<int>(params.size()))
    return "axis is out of range for " + ShapeString(params);
  if (GatheredShape(params, o.axis, ids) != g.shape(node.outputs[0]))
    return "the model declares output " + ShapeString(g.shape(node.outputs[0])) +
           ", the gather gives " + ShapeString(GatheredShape(params, o.axis, ids));
  return "";
}

std::unique_ptr<Op> CreateIndexedGather(const GraphView& g, const NodeInfo& node) {
  return std::make_unique<IndexedGatherOp>(g, node, OperandsOf(g, node));
}

namespace {

std::unique_ptr<Op> CreateLookup(const GraphView& g, const NodeInfo& node) {
  return CreateIndexedGather(g, node);
}

}  // namespace

extern const OpHandler kEmbeddingLookupHandler = {tfl::kEmbeddingLookup,
                                                  "EMBEDDING_LOOKUP",
                                                  CheckIndexedGather,
                                                  CreateLookup,
                                                  nullptr,
                                                  OutputsWork};

}  // namespace clgpu
