// Element-wise unary ops: the RELU family, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH, ELU, GELU
// and EXP, LOG, SQRT, RSQRT, SQUARE, ABS, NEG. One kernel (kernels/unary.cl) for all of them.
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/op.h"

namespace clgpu {
namespace {

// TFLite builtin codes, and the op numbers kernels/unary.cl switches on.
struct UnaryKind {
  int32_t code;
  const char* name;
  int op;
};
constexpr UnaryKind kKinds[] = {
    {19, "RELU", 0},       {21, "RELU6", 1},       {20, "RELU_N1_TO_1", 2}, {152, "RELU_0_TO_1", 3},
    {98, "LEAKY_RELU", 4}, {117, "HARD_SWISH", 5}, {14, "LOGISTIC", 6},     {28, "TANH", 7},
    {111, "ELU", 8},       {150, "GELU", 9},       {47, "EXP", 11},         {73, "LOG", 12},
    {75, "SQRT", 13},      {76, "RSQRT", 14},      {92, "SQUARE", 15},      {101, "ABS", 16},
    {59, "NEG", 17},
};
constexpr int kGeluTanh = 10;  // GELU with approximate=true
constexpr int32_t kLeakyRelu = 98, kGelu = 150;

const UnaryKind& KindOf(int32_t code) {
  for (const UnaryKind& k : kKinds)
    if (k.code == code) return k;
  throw Error("not a unary op: " + std::to_string(code));
}

// TfLiteLeakyReluParams and TfLiteGeluParams.
struct LeakyReluParams {
  float alpha;
};
struct GeluParams {
  bool approximate;
};

class UnaryOp : public Op {
 public:
  UnaryOp(const NodeInfo& node, const UnaryKind& kind, int op, float alpha)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), kind_(kind), op_(op), alpha_(alpha) {}
  // A chunk: the same op over a box.
  explicit UnaryOp(const UnaryOp& whole)
      : Op(whole.node_index()), kind_(whole.kind_), op_(whole.op_), alpha_(whole.alpha_) {}
  const char* type_name() const override { return kind_.name; }
  std::string algorithm() const override { return "elementwise"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }

  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    spec->views = {in[0], in[0]};
    for (size_t a = 0; a < in[0].size(); ++a) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>&, const Box& out) const override {
    return {out};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<UnaryOp>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>&, const std::vector<Shape>& out_shapes,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const int n = static_cast<int>(NumElements(out_shapes[0]));
    Launch l;
    l.name = "unary";
    l.kernel = CreateKernel(*ctx.GetProgram("unary"), l.name);
    SetArgs(l.kernel, in[0], out[0], n, op_, alpha_);
    l.global[0] = (n + 3) / 4;
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  const UnaryKind& kind_;
  int op_;
  float alpha_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  if ((node.op == kLeakyRelu || node.op == kGelu) && !node.builtin_data)
    return std::string("missing ") + KindOf(node.op).name + " params";
  // Quantized tensors: a table of the input's integers (lut_int8.cc).
  if (g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0])))
    return CheckLutInt8(g, node);
  if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  if (g.shape(node.inputs[0]) != g.shape(node.outputs[0]))
    return "output shape differs from the input's";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  const UnaryKind& kind = KindOf(node.op);
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateLutInt8(g, node, kind.name);
  int op = kind.op;
  float alpha = 0;
  if (node.op == kLeakyRelu) {
    LeakyReluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    alpha = p.alpha;
  } else if (node.op == kGelu) {
    GeluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    if (p.approximate) op = kGeluTanh;
  }
  return std::make_unique<UnaryOp>(node, kind, op, alpha);
}

std::string Describe(const NodeInfo& node) {
  if (node.op == kLeakyRelu) {
    LeakyReluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    return "alpha=" + std::to_string(p.alpha);
  }
  if (node.op == kGelu) {
    GeluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    return "approximate=" + std::to_string(int(p.approximate));
  }
  return "";
}

}  // namespace

extern const OpHandler kReluHandler = {19, "RELU", Check, Create, Describe};
extern const OpHandler kRelu6Handler = {21, "RELU6", Check, Create, Describe};
extern const OpHandler kReluN1To1Handler = {20, "RELU_N1_TO_1", Check, Create, Describe};
extern const OpHandler kRelu0To1Handler = {152, "RELU_0_TO_1", Check, Create, Describe};
extern const OpHandler kLeakyReluHandler = {98, "LEAKY_RELU", Check, Create, Describe};
extern const OpHandler kHardSwishHandler = {117, "HARD_SWISH", Check, Create, Describe};
extern const OpHandler kLogisticHandler = {14, "LOGISTIC", Check, Create, Describe};
extern const OpHandler kTanhHandler = {28, "TANH", Check, Create, Describe};
extern const OpHandler kEluHandler = {111, "ELU", Check, Create, Describe};
extern const OpHandler kGeluHandler = {150, "GELU", Check, Create, Describe};
extern const OpHandler kExpHandler = {47, "EXP", Check, Create, Describe};
extern const OpHandler kLogHandler = {73, "LOG", Check, Create, Describe};
extern const OpHandler kSqrtHandler = {75, "SQRT", Check, Create, Describe};
extern const OpHandler kRsqrtHandler = {76, "RSQRT", Check, Create, Describe};
extern const OpHandler kSquareHandler = {92, "SQUARE", Check, Create, Describe};
extern const OpHandler kAbsHandler = {101, "ABS", Check, Create, Describe};
extern const OpHandler kNegHandler = {59, "NEG", Check, Create, Describe};

}  // namespace clgpu
