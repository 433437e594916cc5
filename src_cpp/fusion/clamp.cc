// Clamp folds: a clamp activation (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1) whose input only it
// reads, written by an earlier node of the partition whose handler clamps in its kernels
// (OpHandler::clamp_epilogue), and not a partition output: the producer applies the clamp too and
// writes the activation's output (AttachClamp), one launch fewer. First of the passes: an ADD
// that took a clamp folds into its conv with it (residual.cc).
#include <limits>
#include <map>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/op_handler.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct ClampFusion {
  size_t producer = 0, act = 0;  // positions in the node list
  float lo = 0, hi = 0;          // the activation's bounds
};

std::vector<ClampFusion> FindClampFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                          const std::set<int>& outputs) {
  // The clamp activations as bounds: the fused-activation codes of the same clamps.
  auto bounds = [](int32_t op, float* lo, float* hi) {
    switch (op) {
      case tfl::kRelu:  // max(x, 0): +Inf stays, unlike a fused RELU's FLT_MAX bound
        return (*lo = 0.f, *hi = std::numeric_limits<float>::infinity(), true);
      case tfl::kRelu6:
        return ActivationRange(tfl::kActRelu6, lo, hi);
      case tfl::kReluN1To1:
        return ActivationRange(tfl::kActReluN1To1, lo, hi);
      case tfl::kRelu0To1:
        return (*lo = 0.f, *hi = 1.f, true);
      default:
        return false;
    }
  };
  std::map<int, size_t> producer;
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) ++reads[t];
  }
  std::vector<ClampFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    ClampFusion f;
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || !bounds(n.op, &f.lo, &f.hi)) continue;
    const int t = n.inputs[0];
    const auto p = producer.find(t);
    if (p == producer.end() || p->second >= i || reads[t] != 1 || outputs.count(t)) continue;
    const NodeInfo& prod = nodes[p->second];
    const OpHandler* h = FindOpHandler(prod.op);
    if (!h || !h->clamp_epilogue || prod.outputs.size() != 1) continue;
    if (!g.valid_tensor(n.outputs[0]) || g.shape(n.outputs[0]) != g.shape(t)) continue;
    f.producer = p->second;
    f.act = i;
    out.push_back(f);
  }
  return out;
}

class ClampPass : public FusionPass {
 public:
  const char* name() const override { return "clamp"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindClampFusions(g.g, g.nodes, g.outputs);
    for (const ClampFusion& f : found_) {
      folds->folded.insert(f.act);
      folds->written_instead[g.nodes[f.producer].outputs[0]] = g.nodes[f.act].outputs[0];
    }
  }
  void Apply(FoldPlan& plan) override {
    for (const ClampFusion& f : found_) {
      Op& producer = plan.op(f.producer);
      const int y = producer.outputs()[0], z = plan.op(f.act).outputs()[0];
      if (plan.absorbed(f.producer) || plan.shape(y) != plan.shape(z) ||
          !plan.SamePrecision(f.producer, {f.act}) ||
          !AttachClamp(plan.attachments(f.producer), producer, z, f.lo, f.hi))
        continue;
      plan.Absorb(f.act, f.producer);
      plan.Elide(y);
    }
  }

 private:
  std::vector<ClampFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeClampPass() { return std::make_unique<ClampPass>(); }

}  // namespace clgpu
