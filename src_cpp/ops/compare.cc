// Comparisons (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL) of float operands
// into bools, the logical ops on bools (LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT), and SELECT /
// SELECT_V2 of float values by a bool condition, with NumPy-style broadcasting up to 6 dims
// (kernels/compare.cl). Converted models guard and mask with them: Spotify's basic-pitch
// normalises its spectrogram as "max == 0 ? x : x / max", BirdNET's metadata model clamps its
// inputs with GREATER / LESS and SELECT_V2. Left on the CPU, each split the model's partition
// in two, with a download and an upload between the halves.
#include <algorithm>

#include "common/error.h"
#include "ops/broadcast.h"
#include "ops/op.h"
#include "ops/op_helpers.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

enum class Family { kCompare, kLogical, kSelect };

// TFLite builtin codes, and the op numbers and kernels of kernels/compare.cl.
struct Kind {
  int32_t code;
  const char* name;
  Family family;
  int op;  // the kernel's op number (compare, logical); unused for select
};
constexpr Kind kKinds[] = {
    {tfl::kEqual, "EQUAL", Family::kCompare, 0},
    {tfl::kNotEqual, "NOT_EQUAL", Family::kCompare, 1},
    {tfl::kLess, "LESS", Family::kCompare, 2},
    {tfl::kLessEqual, "LESS_EQUAL", Family::kCompare, 3},
    {tfl::kGreater, "GREATER", Family::kCompare, 4},
    {tfl::kGreaterEqual, "GREATER_EQUAL", Family::kCompare, 5},
    {tfl::kLogicalAnd, "LOGICAL_AND", Family::kLogical, 0},
    {tfl::kLogicalOr, "LOGICAL_OR", Family::kLogical, 1},
    {tfl::kLogicalNot, "LOGICAL_NOT", Family::kLogical, 2},
    {tfl::kSelect, "SELECT", Family::kSelect, 0},
    {tfl::kSelectV2, "SELECT_V2", Family::kSelect, 0},
};

const Kind& KindOf(int32_t code) {
  for (const Kind& k : kKinds)
    if (k.code == code) return k;
  throw Error("not a comparison or select op: " + std::to_string(code));
}

class CompareOp : public Op {
 public:
  CompareOp(const NodeInfo& node, const Kind& kind)
      : Op(node, node.inputs, {node.outputs[0]}), kind_(kind) {}
  const char* type_name() const override { return kind_.name; }
  std::string algorithm() const override { return "broadcast"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {BroadcastShapes(kind_.name, in)};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape o = out_shapes[0].empty() ? Shape{1} : out_shapes[0];
    const int rank = static_cast<int>(o.size());
    // meta: the output's dims, then each operand's strides at the output's rank (0 where it
    // broadcasts), two operands' worth even for LOGICAL_NOT.
    std::vector<int> meta(o.begin(), o.end());
    for (size_t k = 0; k < std::max<size_t>(in_shapes.size(), 2); ++k) {
      const std::vector<int> st = BroadcastStrides(in_shapes[std::min(k, in_shapes.size() - 1)], o);
      meta.insert(meta.end(), st.begin(), st.end());
    }
    meta_ = UploadInts(ctx, meta);
    const int total = static_cast<int>(NumElements(o));
    Launch l;
    auto prog = ctx.GetProgram("compare");
    if (kind_.family == Family::kSelect) {
      l.name = "select_values";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[0], in[1], in[2], out[0], total, rank, meta_.get());
    } else {
      l.name = kind_.family == Family::kCompare ? "compare" : "logical";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[0], in.size() > 1 ? in[1] : in[0], out[0], total, rank, meta_.get(),
              kind_.op);
    }
    l.global[0] = RoundUp(std::max(total, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  const Kind& kind_;
  Buffer meta_;
};

// Tensor t is a bool with a shape.
std::string CheckBool(const GraphView& g, int t) {
  if (!g.valid_tensor(t)) return "tensor index " + std::to_string(t) + " is invalid";
  if (g.value_type(t) != ValueType::kBool) return "tensor " + g.name(t) + " is not bool";
  if (!g.tensor(t).dims) return "tensor " + g.name(t) + " has no shape";
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  const Kind& kind = KindOf(node.op);
  const size_t want = kind.family == Family::kSelect ? 3 : kind.code == tfl::kLogicalNot ? 1 : 2;
  if (node.inputs.size() != want || node.outputs.size() != 1)
    return "unexpected input/output count";
  const int y = node.outputs[0];
  std::string why;
  switch (kind.family) {
    case Family::kCompare:
      why = CheckFloatTensors(g, node.inputs);
      if (why.empty()) why = CheckBool(g, y);
      break;
    case Family::kLogical:
      for (int t : node.inputs)
        if (why.empty()) why = CheckBool(g, t);
      if (why.empty()) why = CheckBool(g, y);
      break;
    case Family::kSelect:
      why = CheckBool(g, node.inputs[0]);
      if (why.empty()) why = CheckFloatTensors(g, {node.inputs[1], node.inputs[2], y});
      break;
  }
  if (!why.empty()) return why;
  std::vector<Shape> in;
  for (int t : node.inputs) {
    in.push_back(g.shape(t));
    if (in.back().size() > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  }
  // SELECT (v1) broadcasts only a condition of one element a batch row; that form stays.
  if (kind.code == tfl::kSelect && (in[0] != in[1] || in[1] != in[2]))
    return "SELECT operands of different shapes";
  try {
    if (BroadcastShapes(kind.name, in) != g.shape(y)) return "output shape is not the operands'";
  } catch (const Error& e) {
    return What(e);
  }
  return "";
}

std::unique_ptr<Op> Create(const GraphView&, const NodeInfo& node) {
  return std::make_unique<CompareOp>(node, KindOf(node.op));
}

}  // namespace

extern const OpHandler kEqualHandler = {tfl::kEqual, "EQUAL", Check, Create};
extern const OpHandler kNotEqualHandler = {tfl::kNotEqual, "NOT_EQUAL", Check, Create};
extern const OpHandler kLessHandler = {tfl::kLess, "LESS", Check, Create};
extern const OpHandler kLessEqualHandler = {tfl::kLessEqual, "LESS_EQUAL", Check, Create};
extern const OpHandler kGreaterHandler = {tfl::kGreater, "GREATER", Check, Create};
extern const OpHandler kGreaterEqualHandler = {tfl::kGreaterEqual, "GREATER_EQUAL", Check, Create};
extern const OpHandler kLogicalAndHandler = {tfl::kLogicalAnd, "LOGICAL_AND", Check, Create};
extern const OpHandler kLogicalOrHandler = {tfl::kLogicalOr, "LOGICAL_OR", Check, Create};
extern const OpHandler kLogicalNotHandler = {tfl::kLogicalNot, "LOGICAL_NOT", Check, Create};
extern const OpHandler kSelectHandler = {tfl::kSelect, "SELECT", Check, Create};
extern const OpHandler kSelectV2Handler = {tfl::kSelectV2, "SELECT_V2", Check, Create};

}  // namespace clgpu
