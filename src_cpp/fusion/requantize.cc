// Requantize folds: a QUANTIZE of what a DEQUANTIZE writes, directly or after the float ops the
// clamp, epilogue and prelu passes folded into it, to the DEQUANTIZE's own type (an int8 model's
// float island: litert-torch's PT2E leaves its PRELUs so), or of what a float element-wise op of
// two operands of its size writes (such an island's residual ADD). That op's kernel stores its
// values quantized as the QUANTIZE does (AttachQuantize, kernels/quantize.cl's and binary.cl's
// QUANT_STORE), so the QUANTIZE launches nothing and the float values are never written. After
// the prelu pass; reads nothing later passes write.
#include <map>
#include <set>

#include "fusion/pass.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A DEQUANTIZE of an activation.
bool IsDequantize(const GraphView& g, const NodeInfo& n) {
  return n.op == tfl::kDequantize && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         g.valid_tensor(n.inputs[0]);
}

// A float ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM or SQUARED_DIFFERENCE whose operands have its
// output's shape: ops/binary.cc runs it in binary_same, which stores quantized.
bool IsSameSizeBinary(const GraphView& g, const NodeInfo& n) {
  static const std::set<int32_t> kOps = {tfl::kAdd,
                                         tfl::kSub,
                                         tfl::kMul,
                                         tfl::kDiv,
                                         tfl::kMaximum,
                                         tfl::kMinimum,
                                         tfl::kSquaredDifference};
  if (!kOps.count(n.op) || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  for (int t : {n.inputs[0], n.inputs[1], n.outputs[0]})
    if (!g.valid_tensor(t) || g.type(t) != kTfLiteFloat32) return false;
  const Shape s = g.shape(n.outputs[0]);
  return g.shape(n.inputs[0]) == s && g.shape(n.inputs[1]) == s;
}

struct RequantizeFusion {
  size_t writer = 0, quantize = 0;  // a DEQUANTIZE or an element-wise op, and the QUANTIZE
  int input = -1, output = -1;      // the float value the QUANTIZE reads, and what it writes
  QuantParams q;
  bool uint8 = false;
  bool binary = false;  // the writer is an element-wise op of two operands
};

std::vector<RequantizeFusion> FindRequantizeFusions(const FoldGraph& fg, const Folds& folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  std::map<int, int> reads;
  for (const NodeInfo& n : nodes)
    for (int t : n.inputs) ++reads[t];
  // What each DEQUANTIZE or float element-wise op writes once its folds apply -> it.
  std::map<int, size_t> writer;
  for (size_t i = 0; i < nodes.size(); ++i)
    if ((IsDequantize(g, nodes[i]) || IsSameSizeBinary(g, nodes[i])) && !folds.folded.count(i))
      writer[WrittenAs(folds.written_instead, nodes[i].outputs[0])] = i;
  std::vector<RequantizeFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (n.op != tfl::kQuantize || n.inputs.size() != 1 || n.outputs.size() != 1 ||
        folds.folded.count(i))
      continue;
    const int x = n.inputs[0], y = n.outputs[0];
    const auto w = writer.find(x);
    if (w == writer.end() || w->second >= i || reads[x] != 1 || fg.outputs.count(x) ||
        !g.valid_tensor(x) || !g.valid_tensor(y) || g.type(x) != kTfLiteFloat32)
      continue;
    // A DEQUANTIZE's kernel reads and stores one quantized type (kernels/quantize.cl's QT).
    const NodeInfo& wn = nodes[w->second];
    const ValueType to = g.value_type(y);
    const QuantParams q = g.quant(y);
    if ((wn.op == tfl::kDequantize && g.value_type(wn.inputs[0]) != to) || !IsQuantized(to) ||
        q.scale.size() != 1 || q.zero_point.size() != 1)
      continue;
    out.push_back(RequantizeFusion{w->second, i, x, y, q, to == ValueType::kUInt8,
                                   wn.op != tfl::kDequantize});
  }
  return out;
}

class RequantizePass : public FusionPass {
 public:
  const char* name() const override { return "requantize"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindRequantizeFusions(g, *folds);
    for (const RequantizeFusion& f : found_) {
      folds->folded.insert(f.quantize);
      folds->written_instead[f.input] = f.output;
    }
  }
  void Apply(FoldPlan& plan) override {
    for (const RequantizeFusion& f : found_) {
      if (plan.absorbed(f.quantize) || plan.absorbed(f.writer)) continue;
      int readers = 0;
      const int p = plan.Producer(f.input, &readers);
      const std::vector<Shape> in = plan.InputShapes(f.writer);
      // An element-wise op stores quantized in binary_same: operands of its output's size.
      const int64_t n = NumElements(plan.shape(f.input));
      if (p != int(f.writer) || readers != 1 || !plan.internal(f.input) || plan.split(f.input) ||
          plan.split(f.output) || !plan.RunsWhole(f.writer, in) ||
          (f.binary && (in.size() < 2 || NumElements(in[0]) != n || NumElements(in[1]) != n)) ||
          !AttachQuantize(plan.attachments(f.writer), plan.op(f.writer), f.output, f.q, f.uint8))
        continue;
      plan.Absorb(f.quantize, f.writer);
      plan.Elide(f.input);
    }
  }

 private:
  std::vector<RequantizeFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeRequantizePass() { return std::make_unique<RequantizePass>(); }

}  // namespace clgpu
