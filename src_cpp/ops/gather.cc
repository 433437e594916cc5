// GATHER of a float tensor along any axis with constant indices (batch_dims 0): an index map whose
// gathered axis reads through the index table (ops/strided_copy.h). TFLite's kernel fails on an
// index outside [0, extent), so such a node stays on the CPU (which reports that error).
#include <cstring>

#include "common/error.h"
#include "ops/gather_indexed.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// "" with the map (the input as [outer, extent, inner], the output as [outer, indices, inner])
// and the output shape, or why not.
std::string MapOf(const Shape& in, int axis, const std::vector<int64_t>& indices,
                  const Shape& index_shape, AxisMap* m, Shape* out) {
  const int rank = static_cast<int>(in.size());
  if (axis < 0 || axis >= rank) return "axis is out of range for " + ShapeString(in);
  int outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= in[a];
  for (int a = axis + 1; a < rank; ++a) inner *= in[a];
  *m = AxisMap{};
  m->in = {outer, in[axis], inner};
  m->out = {outer, static_cast<int>(indices.size()), inner};
  m->src = {0, 1, 2};
  m->step = {1, 1, 1};
  m->first = {0, 0, 0};
  m->table_axis = 1;
  for (int64_t i : indices) {
    if (i < 0 || i >= in[axis])
      return "index " + std::to_string(i) + " is outside [0, " + std::to_string(in[axis]) +
             ") (TFLite's kernel fails on it)";
    m->table.push_back(static_cast<int>(i));
  }
  out->assign(in.begin(), in.begin() + axis);
  out->insert(out->end(), index_shape.begin(), index_shape.end());
  out->insert(out->end(), in.begin() + axis + 1, in.end());
  return CheckAxisMap(*m);
}

class GatherOp : public StridedCopyOp {
 public:
  GatherOp(const NodeInfo& node, int axis, std::vector<int64_t> indices, Shape index_shape)
      : StridedCopyOp(node, {node.inputs[0]}, {node.outputs[0]}),
        axis_(axis),
        indices_(std::move(indices)),
        index_shape_(std::move(index_shape)) {}
  const char* type_name() const override { return "GATHER"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    AxisMap m;
    Shape out;
    if (auto why = MapOf(in.at(0), axis_, indices_, index_shape_, &m, &out); !why.empty())
      throw Error("GATHER from " + ShapeString(in.at(0)) + ": " + why);
    return {out};
  }
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    AxisMap m;
    Shape out;
    if (auto why = MapOf(in.at(0), axis_, indices_, index_shape_, &m, &out); !why.empty())
      throw Error("GATHER from " + ShapeString(in.at(0)) + ": " + why);
    return {m};
  }

 private:
  int axis_;
  std::vector<int64_t> indices_;
  Shape index_shape_;
};

// TFLite's kernel refuses (at invoke) a negative value anywhere in the indices' bytes, those past
// their shape too (a constant may hold more bytes than its shape needs).
std::string CheckAllIndexBytes(const TfLiteTensor& t) {
  if (t.allocation_type != kTfLiteMmapRo || !t.data.raw) return "";
  const size_t n = t.type == kTfLiteInt32 ? t.bytes / 4 : t.type == kTfLiteInt64 ? t.bytes / 8 : 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = t.type == kTfLiteInt32 ? static_cast<const int32_t*>(t.data.raw_const)[i]
                                             : static_cast<const int64_t*>(t.data.raw_const)[i];
    if (v < 0) return "GATHER indices hold a negative value (TFLite checks all their bytes)";
  }
  return "";
}

std::string Read(const GraphView& g, const NodeInfo& node, int* axis,
                 std::vector<int64_t>* indices) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  if (!node.builtin_data) return "missing GATHER params";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  tfl::GatherParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (p.batch_dims != 0)
    return "batch_dims " + std::to_string(p.batch_dims) + " (only 0 is claimed)";
  if (auto why = g.ReadConstantInts(node.inputs[1], "GATHER indices", indices); !why.empty())
    return why;
  const Shape in = g.shape(node.inputs[0]);
  *axis = p.axis < 0 ? p.axis + static_cast<int>(in.size()) : p.axis;
  AxisMap m;
  Shape out;
  if (auto why = MapOf(in, *axis, *indices, g.shape(node.inputs[1]), &m, &out); !why.empty())
    return why;
  if (auto why = CheckAllIndexBytes(g.tensor(node.inputs[1])); !why.empty()) return why;
  if (out != g.shape(node.outputs[0]))
    return "the model declares output " + ShapeString(g.shape(node.outputs[0])) +
           ", the gather gives " + ShapeString(out);
  return "";
}

// Positions computed at run time: ops/gather_indexed.h.
bool RunTimePositions(const GraphView& g, const NodeInfo& node) {
  return node.inputs.size() == 2 && g.valid_tensor(node.inputs[1]) &&
         !g.IsConstant(node.inputs[1]) && !g.FoldedIntsOf(node.inputs[1]);
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (RunTimePositions(g, node)) return CheckIndexedGather(g, node);
  int axis = 0;
  std::vector<int64_t> indices;
  return Read(g, node, &axis, &indices);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (RunTimePositions(g, node)) return CreateIndexedGather(g, node);
  int axis = 0;
  std::vector<int64_t> indices;
  if (auto why = Read(g, node, &axis, &indices); !why.empty()) throw Error(why);
  return std::make_unique<GatherOp>(node, axis, std::move(indices), g.shape(node.inputs[1]));
}

std::string Describe(const NodeInfo& n) {
  tfl::GatherParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "axis=" + std::to_string(p.axis) + " batch_dims=" + std::to_string(p.batch_dims);
}

}  // namespace

extern const OpHandler kGatherHandler = {tfl::kGather, "GATHER", Check,
                                         Create,       Describe, OutputsWork};

}  // namespace clgpu
