// Element-wise unary ops: the RELU family, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH, ELU, GELU
// and EXP, LOG, SQRT, RSQRT, SQUARE, ABS, NEG, SIN, COS. One kernel (kernels/unary.cl) for all of
// them.
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// TFLite builtin codes, and the op numbers kernels/unary.cl switches on.
struct UnaryKind {
  int32_t code;
  const char* name;
  int op;
};
constexpr UnaryKind kKinds[] = {
    {tfl::kRelu, "RELU", 0},
    {tfl::kRelu6, "RELU6", 1},
    {tfl::kReluN1To1, "RELU_N1_TO_1", 2},
    {tfl::kRelu0To1, "RELU_0_TO_1", 3},
    {tfl::kLeakyRelu, "LEAKY_RELU", 4},
    {tfl::kHardSwish, "HARD_SWISH", 5},
    {tfl::kLogistic, "LOGISTIC", 6},
    {tfl::kTanh, "TANH", 7},
    {tfl::kElu, "ELU", 8},
    {tfl::kGelu, "GELU", 9},
    {tfl::kExp, "EXP", 11},
    {tfl::kLog, "LOG", 12},
    {tfl::kSqrt, "SQRT", 13},
    {tfl::kRsqrt, "RSQRT", 14},
    {tfl::kSquare, "SQUARE", 15},
    {tfl::kAbs, "ABS", 16},
    {tfl::kNeg, "NEG", 17},
    {tfl::kSin, "SIN", 18},
    {tfl::kCos, "COS", 19},
};
constexpr int kGeluTanh = 10;  // GELU with approximate=true

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

class UnaryOp : public Op, public Chunker {
 public:
  UnaryOp(const NodeInfo& node, const UnaryKind& kind, int op, float alpha)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), kind_(kind), op_(op), alpha_(alpha) {}
  // A chunk: the same op over a box.
  explicit UnaryOp(const UnaryOp& whole)
      : Op(whole.node_index()), kind_(whole.kind_), op_(whole.op_), alpha_(whole.alpha_) {}
  const char* type_name() const override { return kind_.name; }
  std::string algorithm() const override { return "elementwise"; }
  const Chunker* chunker() const override { return this; }

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
  if ((node.op == tfl::kLeakyRelu || node.op == tfl::kGelu) && !node.builtin_data)
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
  if (node.op == tfl::kLeakyRelu) {
    LeakyReluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    alpha = p.alpha;
  } else if (node.op == tfl::kGelu) {
    GeluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    if (p.approximate) op = kGeluTanh;
  }
  return std::make_unique<UnaryOp>(node, kind, op, alpha);
}

std::string Describe(const NodeInfo& node) {
  if (node.op == tfl::kLeakyRelu) {
    LeakyReluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    return "alpha=" + std::to_string(p.alpha);
  }
  if (node.op == tfl::kGelu) {
    GeluParams p;
    std::memcpy(&p, node.builtin_data, sizeof p);
    return "approximate=" + std::to_string(int(p.approximate));
  }
  return "";
}

}  // namespace

// XNNPACK takes no int8 RELU or HARD_SWISH standing alone: TFLite's own kernel runs them, on
// one thread whatever the interpreter's, 30-300x slower per element than its LOGISTIC, which it
// does take (bench/results/cpu-int8-ops-h200-host-*.md: keras_mobilenet_v3_large_int8 ran
// 5-9x slower on the CPU than its float form). The cost model's CPU side counts them so.
constexpr double kCpuInt8ReluNs = 16.0, kCpuInt8HardSwishNs = 6.0;
extern const OpHandler kReluHandler = {tfl::kRelu, "RELU", Check,   Create, Describe,      nullptr,
                                       false,      false,  nullptr, false,  kCpuInt8ReluNs};
extern const OpHandler kRelu6Handler = {tfl::kRelu6, "RELU6", Check, Create, Describe};
extern const OpHandler kReluN1To1Handler = {tfl::kReluN1To1, "RELU_N1_TO_1", Check, Create,
                                            Describe};
extern const OpHandler kRelu0To1Handler = {tfl::kRelu0To1, "RELU_0_TO_1", Check, Create, Describe};
extern const OpHandler kLeakyReluHandler = {tfl::kLeakyRelu, "LEAKY_RELU", Check, Create, Describe};
extern const OpHandler kHardSwishHandler = {
    tfl::kHardSwish, "HARD_SWISH", Check,   Create, Describe,           nullptr,
    false,           false,        nullptr, false,  kCpuInt8HardSwishNs};
extern const OpHandler kLogisticHandler = {tfl::kLogistic, "LOGISTIC", Check, Create, Describe};
extern const OpHandler kTanhHandler = {tfl::kTanh, "TANH", Check, Create, Describe};
extern const OpHandler kEluHandler = {tfl::kElu, "ELU", Check, Create, Describe};
extern const OpHandler kGeluHandler = {tfl::kGelu, "GELU", Check, Create, Describe};
extern const OpHandler kExpHandler = {tfl::kExp, "EXP", Check, Create, Describe};
extern const OpHandler kLogHandler = {tfl::kLog, "LOG", Check, Create, Describe};
extern const OpHandler kSqrtHandler = {tfl::kSqrt, "SQRT", Check, Create, Describe};
extern const OpHandler kRsqrtHandler = {tfl::kRsqrt, "RSQRT", Check, Create, Describe};
extern const OpHandler kSquareHandler = {tfl::kSquare, "SQUARE", Check, Create, Describe};
extern const OpHandler kAbsHandler = {tfl::kAbs, "ABS", Check, Create, Describe};
extern const OpHandler kNegHandler = {tfl::kNeg, "NEG", Check, Create, Describe};
// Float only, as TFLite's kernels (an int8 SIN has no table: lut_int8.cc declines it).
extern const OpHandler kSinHandler = {tfl::kSin, "SIN", Check, Create, Describe};
extern const OpHandler kCosHandler = {tfl::kCos, "COS", Check, Create, Describe};

}  // namespace clgpu
