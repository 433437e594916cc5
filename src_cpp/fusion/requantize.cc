// Requantize folds: a QUANTIZE of what a DEQUANTIZE writes, directly or after the float ops the
// clamp, epilogue and prelu passes folded into it, to the DEQUANTIZE's own type (an int8 model's
// float island: litert-torch's PT2E leaves its PRELUs so). The DEQUANTIZE's kernel stores its
// values quantized as the QUANTIZE does (AttachQuantize, kernels/quantize.cl's QUANT_STORE), so
// the QUANTIZE launches nothing and the float values are never written. After the prelu pass;
// reads nothing later passes write.
#include <map>

#include "fusion/pass.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct RequantizeFusion {
  size_t dequantize = 0, quantize = 0;
  int input = -1, output = -1;  // the float value the QUANTIZE reads, and what it writes
  QuantParams q;
  bool uint8 = false;
};

std::vector<RequantizeFusion> FindRequantizeFusions(const FoldGraph& fg, const Folds& folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  std::map<int, int> reads;
  for (const NodeInfo& n : nodes)
    for (int t : n.inputs) ++reads[t];
  std::map<int, size_t> writer;  // what each DEQUANTIZE writes once its folds apply -> it
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == tfl::kDequantize && nodes[i].inputs.size() == 1 &&
        nodes[i].outputs.size() == 1 && g.valid_tensor(nodes[i].inputs[0]) &&
        !folds.folded.count(i))
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
    const ValueType from = g.value_type(nodes[w->second].inputs[0]), to = g.value_type(y);
    const QuantParams q = g.quant(y);
    if (from != to || !IsQuantized(to) || q.scale.size() != 1 || q.zero_point.size() != 1) continue;
    out.push_back(RequantizeFusion{w->second, i, x, y, q, to == ValueType::kUInt8});
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
      if (plan.absorbed(f.quantize) || plan.absorbed(f.dequantize)) continue;
      int readers = 0;
      const int p = plan.Producer(f.input, &readers);
      if (p != int(f.dequantize) || readers != 1 || !plan.internal(f.input) ||
          plan.split(f.input) || plan.split(f.output) ||
          !plan.RunsWhole(f.dequantize, plan.InputShapes(f.dequantize)) ||
          !AttachQuantize(plan.attachments(f.dequantize), plan.op(f.dequantize), f.output, f.q,
                          f.uint8))
        continue;
      plan.Absorb(f.quantize, f.dequantize);
      plan.Elide(f.input);
    }
  }

 private:
  std::vector<RequantizeFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeRequantizePass() { return std::make_unique<RequantizePass>(); }

}  // namespace clgpu
