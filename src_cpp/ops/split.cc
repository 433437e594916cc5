// SPLIT and SPLIT_V of float tensors along a constant axis: each output is copied out of
// its slice of the input, one launch per output (kernels/concat.cl: split_copy, a row copy
// like concatenation's the other way round). The axis and the sizes must be constants: the output
// shapes are then fixed at Prepare like every other tensor of a partition.
#include <cstring>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "ops/row_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

class SplitOp : public Op {
 public:
  // `data` is the one activation input; `sizes` the extent of each output along `axis`.
  SplitOp(const NodeInfo& node, int data, int axis, std::vector<int> sizes, const char* name)
      : Op(node, {data}, node.outputs), axis_(axis), sizes_(std::move(sizes)), name_(name) {}

  const char* type_name() const override { return name_; }
  std::string algorithm() const override { return vec4_ ? "copy_vec4" : "copy"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    if (axis_ >= static_cast<int>(s.size()))
      throw Error(std::string(name_) + " axis " + std::to_string(axis_) + " is out of range for " +
                  ShapeString(s));
    int total = 0;
    for (int n : sizes_) total += n;
    if (total != s[axis_])
      throw Error(std::string(name_) + " sizes add up to " + std::to_string(total) + ", not " +
                  std::to_string(s[axis_]) + " of " + ShapeString(s));
    std::vector<Shape> out;
    for (int n : sizes_) {
      Shape o = s;
      o[axis_] = n;
      out.push_back(o);
    }
    return out;
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }
  // No GetChunkSpec: runtime/split.h chunks boxes of output 0 only, so a SPLIT with a tensor
  // over the largest allocation is declined by PlanOpChunks ("SPLIT cannot run in chunks").

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    // The input as [rows, in_cols]: rows = the axes before `axis`, a row = the rest.
    const Shape& s = in_shapes[0];
    int rows = 1, inner = 1;
    for (int a = 0; a < axis_; ++a) rows *= s[a];
    for (size_t a = axis_ + 1; a < s.size(); ++a) inner *= s[a];
    const int in_cols = s[axis_] * inner;
    auto prog = ctx.GetProgram("concat");
    launches_.clear();
    vec4_ = true;
    int col0 = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const int cols = sizes_[i] * inner;
      if (rows > 0 && cols > 0)
        launches_.push_back(
            RowCopyLaunch(*prog, "split_copy", in[0], out[i], rows, cols, in_cols, col0, &vec4_));
      col0 += cols;
    }
  }

 private:
  int axis_;
  std::vector<int> sizes_;
  const char* name_;
  bool vec4_ = false;
};

// Where the operands are: SPLIT(axis, data), SPLIT_V(data, sizes, axis).
struct Operands {
  int data, axis, sizes = -1;
};
Operands OperandsOf(const NodeInfo& node) {
  if (node.op == tfl::kSplit) return {node.inputs[1], node.inputs[0]};
  return {node.inputs[0], node.inputs[2], node.inputs[1]};
}

// Reads the constant axis (normalized to [0, rank)) and the output sizes; "" or why not.
std::string ReadSplit(const GraphView& g, const NodeInfo& node, int* axis,
                      std::vector<int>* sizes) {
  const char* name = node.op == tfl::kSplit ? "SPLIT" : "SPLIT_V";
  const size_t want_inputs = node.op == tfl::kSplit ? 2 : 3;
  if (node.inputs.size() != want_inputs || node.outputs.empty())
    return "unexpected input/output count";
  const Operands ops = OperandsOf(node);
  std::vector<int> tensors = {ops.data};
  tensors.insert(tensors.end(), node.outputs.begin(), node.outputs.end());
  if (auto why = CheckMovedTensors(g, tensors); !why.empty()) return why;
  const Shape s = g.shape(ops.data);
  const int rank = static_cast<int>(s.size());
  if (s.empty() || rank > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  // A run-time axis or size would make the output shapes dynamic.
  std::vector<int64_t> a;
  if (auto why = g.ReadConstantInts(ops.axis, std::string(name) + " axis", &a); !why.empty())
    return why;
  if (a.size() != 1) return std::string(name) + " axis must be a single value";
  *axis = static_cast<int>(a[0] < 0 ? a[0] + rank : a[0]);
  if (*axis < 0 || *axis >= rank) return "axis " + std::to_string(a[0]) + " is out of range";
  const int n = static_cast<int>(node.outputs.size());
  // TfLiteSplitParams and TfLiteSplitVParams are { int num_splits; }: TFLite's kernels refuse a
  // node whose output count differs from it.
  if (!node.builtin_data) return std::string("missing ") + name + " params";
  int num_splits = 0;
  std::memcpy(&num_splits, node.builtin_data, sizeof num_splits);
  if (num_splits != n)
    return std::string(name) + " num_splits is " + std::to_string(num_splits) + ", the node has " +
           std::to_string(n) + " outputs";
  sizes->clear();
  if (node.op == tfl::kSplit) {
    if (s[*axis] % n)
      return "axis extent " + std::to_string(s[*axis]) + " is not divisible by " +
             std::to_string(n) + " outputs";
    sizes->assign(n, s[*axis] / n);
    return "";
  }
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(ops.sizes, "SPLIT_V size_splits", &v); !why.empty()) return why;
  if (static_cast<int>(v.size()) != n) return "SPLIT_V size_splits length != output count";
  // One size may be -1: whatever the others leave.
  int unknown = -1, known = 0;
  for (int i = 0; i < n; ++i) {
    if (v[i] == -1 && unknown < 0) {
      unknown = i;
    } else if (v[i] < 0) {
      return "SPLIT_V size_splits has a negative size";
    } else {
      known += static_cast<int>(v[i]);
    }
    sizes->push_back(static_cast<int>(v[i]));
  }
  if (unknown >= 0) {
    if (known > s[*axis]) return "SPLIT_V size_splits exceed the axis extent";
    (*sizes)[unknown] = s[*axis] - known;
  } else if (known != s[*axis]) {
    return "SPLIT_V size_splits add up to " + std::to_string(known) + ", not the axis extent " +
           std::to_string(s[*axis]);
  }
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  std::vector<int> sizes;
  return ReadSplit(g, node, &axis, &sizes);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  int axis = 0;
  std::vector<int> sizes;
  if (auto why = ReadSplit(g, node, &axis, &sizes); !why.empty()) throw Error(why);
  return std::make_unique<SplitOp>(node, OperandsOf(node).data, axis, std::move(sizes),
                                   node.op == tfl::kSplit ? "SPLIT" : "SPLIT_V");
}

// Data movement over all outputs (output 0 alone would undercount it by the split count).
double Work(const GraphView& g, const NodeInfo& n) {
  double all = 0;
  for (int t : n.outputs)
    if (g.valid_tensor(t)) all += static_cast<double>(NumElements(g.shape(t)));
  return all;
}

// One copy per output that holds elements (Prepare).
LaunchCount Launches(const GraphView& g, const NodeInfo& n, const DeviceInfo&) {
  int copies = 0;
  for (int t : n.outputs) copies += g.valid_tensor(t) && NumElements(g.shape(t)) > 0;
  return {copies};
}

}  // namespace

extern const OpHandler kSplitHandler = {tfl::kSplit, "SPLIT", Check, Create,  nullptr,
                                        Work,        false,   false, Launches};
extern const OpHandler kSplitVHandler = {tfl::kSplitV, "SPLIT_V", Check, Create,  nullptr,
                                         Work,         false,     false, Launches};

}  // namespace clgpu
