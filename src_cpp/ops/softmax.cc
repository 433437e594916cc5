// SOFTMAX (with beta) and LOG_SOFTMAX over the last axis (kernels/softmax.cl): short rows take
// one work-item each, long rows one work-group each with reductions in local memory.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxGroup = 256;  // SM_LOCAL in kernels/softmax.cl
constexpr int kShortRow = 64;   // rows up to this long take one work-item each

// TfLiteSoftmaxParams.
struct SoftmaxParams {
  float beta;
};

class SoftmaxOp : public Op, public FoldSource, public RowChunker<SoftmaxOp> {
 public:
  SoftmaxOp(const NodeInfo& node, bool log_out, float beta)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), log_(log_out), beta_(beta) {}
  // A chunk: the same op over whole rows.
  explicit SoftmaxOp(const SoftmaxOp& whole)
      : Op(whole.node_index()), log_(whole.log_), beta_(whole.beta_) {}
  const char* type_name() const override { return log_ ? "LOG_SOFTMAX" : "SOFTMAX"; }
  std::string algorithm() const override { return algorithm_; }
  const Chunker* chunker() const override { return this; }
  FoldSource* fold_source() override { return this; }
  bool GetSqueezeSoftmax(OpContext&, int n, bool int8, SqueezeSoftmax* softmax) override {
    if (log_ || int8 || n <= 0 || n > kMaxSqueezeSoftmax) return false;
    softmax->beta = beta_;
    return true;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].empty()) throw Error(std::string(type_name()) + " of a scalar");
    return {in[0]};
  }
  // max, subtract, exp, sum, scale per element.
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return 5.0 * static_cast<double>(NumElements(out[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    launches_.clear();
    const Shape& s = in_shapes[0];
    const int d = s.back();
    const int rows = d == 0 ? 0 : static_cast<int>(NumElements(s) / d);
    if (rows == 0) return;  // nothing to compute
    auto prog = ctx.GetProgram("softmax");
    Launch l;
    if (d <= kShortRow) {
      l.name = "softmax_rows";
      l.kernel = CreateKernel(*prog, l.name);
      l.global[0] = static_cast<size_t>(rows);
      algorithm_ = "row_per_item";
    } else {
      l.name = "softmax_group";
      l.kernel = CreateKernel(*prog, l.name);
      const size_t group = RowGroup(ctx, l.kernel, kMaxGroup, d);
      l.local[0] = group;
      l.global[0] = static_cast<size_t>(rows) * group;
      algorithm_ = "row_per_group";
    }
    SetArgs(l.kernel, in[0], out[0], rows, d, beta_, log_ ? 1 : 0);
    launches_.push_back(std::move(l));
  }

 private:
  bool log_;
  float beta_;
  std::string algorithm_ = "row_per_item";
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.op == tfl::kSoftmax && !node.builtin_data) return "missing SOFTMAX params";
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const bool quantized =
      g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0]));
  if (quantized && node.op != tfl::kSoftmax) return "int8 LOG_SOFTMAX is not supported";
  if (auto why = quantized ? CheckSoftmaxInt8(g, node)
                           : CheckFloatTensors(g, {node.inputs[0], node.outputs[0]});
      !why.empty())
    return why;
  const Shape s = g.shape(node.inputs[0]);
  if (s.empty()) return "input is a scalar (no last axis)";
  if (g.shape(node.outputs[0]) != s) return "output shape differs from the input's";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (node.op == tfl::kLogSoftmax) return std::make_unique<SoftmaxOp>(node, true, 1.0f);
  SoftmaxParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateSoftmaxInt8(g, node, p.beta);
  return std::make_unique<SoftmaxOp>(node, false, p.beta);
}

std::string Describe(const NodeInfo& node) {
  if (node.op == tfl::kLogSoftmax) return "";
  SoftmaxParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return "beta=" + std::to_string(p.beta);
}

// max, exp, sum and the scale per element.
double Work(const GraphView& g, const NodeInfo& n) {
  if (n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return 0;
  return 5.0 * static_cast<double>(NumElements(g.shape(n.outputs[0])));
}

}  // namespace

// XNNPACK takes no int8 SOFTMAX: TFLite's own kernel runs it on one thread at 3.5-4.5 ns per
// element on two H200 hosts, the interpreter's threads 1 or 16
// (bench/results/cpu-int8-builtin-*.md): near the lower end.
constexpr double kCpuInt8SoftmaxNs = 3.7;
extern const OpHandler kSoftmaxHandler = [] {
  OpHandler h{tfl::kSoftmax, "SOFTMAX", Check, Create, Describe, Work};
  h.cpu_int8_ns_per_element = kCpuInt8SoftmaxNs;
  return h;
}();
extern const OpHandler kLogSoftmaxHandler = {tfl::kLogSoftmax, "LOG_SOFTMAX", Check,
                                             Create,           Describe,      Work};

}  // namespace clgpu
