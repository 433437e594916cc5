// Residual folds: an ADD (same shapes, float32 or int8) one of whose operands is the output of a
// CONV_2D (without fused activation if float) that nothing else reads, the other operand ready
// before the conv runs: the conv writes act(conv(x) + bias + residual) straight to the ADD's
// output and the ADD runs no kernel (one launch fewer per block of ResNet / MobileNetV2). When
// both operands qualify, the later conv takes the earlier one's output as its residual. After
// the clamps and epilogues: an op with an epilogue takes no residual, and an ADD's epilogue
// moves with the ADD into the conv. Its Order first moves a conv whose ADD's other operand is
// computed after it (MediaPipe's blocks pad or pool their shortcut after the convolution) to
// just before the ADD, so that the operand is ready for it.
#include <algorithm>
#include <cstring>
#include <map>

#include "fusion/pass.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct ResidualFusion {
  size_t producer = 0, add = 0;  // positions in the node list
  int residual = -1;             // the ADD's other operand
};

// A conv whose output can take a residual inside its kernel: act(conv) + residual is not
// act(conv + residual) in float, so a float one has no activation; an int8 conv's integers are
// exact, its clamp applied before the ADD's arithmetic as the CPU does.
bool TakesResidual(const GraphView& g, const NodeInfo& c) {
  if (c.op != tfl::kConv2d || !c.builtin_data || c.outputs.size() != 1 ||
      !g.valid_tensor(c.outputs[0]))
    return false;
  tfl::ConvParams params;
  std::memcpy(&params, c.builtin_data, sizeof params);
  return params.activation == tfl::kActNone || g.type(c.outputs[0]) != kTfLiteFloat32;
}

std::vector<ResidualFusion> FindResidualFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs) {
  std::map<int, size_t> producer;  // tensor -> position of the node writing it
  std::map<int, int> reads;        // tensor -> inputs of nodes that name it
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) ++reads[t];
  }
  auto foldable_conv = [&](int t, size_t add) -> long {
    const auto p = producer.find(t);
    if (p == producer.end() || p->second >= add) return -1;
    if (!TakesResidual(g, nodes[p->second]) || reads[t] != 1 || outputs.count(t)) return -1;
    return static_cast<long>(p->second);
  };
  std::vector<ResidualFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (n.op != tfl::kAdd || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const int a = n.inputs[0], b = n.inputs[1];
    if (a == b || !g.valid_tensor(a) || !g.valid_tensor(b) || !g.valid_tensor(n.outputs[0]))
      continue;
    // Float, or int8 (the int8 GEMMs apply the ADD's integer arithmetic).
    const TfLiteType type = g.type(a);
    if ((type != kTfLiteFloat32 && type != kTfLiteInt8) || g.type(b) != type ||
        g.type(n.outputs[0]) != type)
      continue;
    const Shape sa = g.shape(a);
    if (sa != g.shape(b) || sa != g.shape(n.outputs[0])) continue;  // no broadcast
    ResidualFusion best;
    long best_at = -1;
    for (int k = 0; k < 2; ++k) {
      const int y = k ? b : a, r = k ? a : b;
      const long at = foldable_conv(y, i);
      if (at < 0 || at <= best_at) continue;
      // The residual must exist when the conv runs, not only when the ADD does.
      const auto rp = producer.find(r);
      if (rp != producer.end() && static_cast<long>(rp->second) >= at) continue;
      best = ResidualFusion{static_cast<size_t>(at), i, r};
      best_at = at;
    }
    if (best_at >= 0) out.push_back(best);
  }
  return out;
}

// The pass's Order: a linear conv that only an ADD reads, whose other operand is computed between
// the two, runs just before the ADD, so that the operand exists when the conv runs.
void SinkConvsToTheirAdds(const GraphView& g, std::vector<NodeInfo>* nodes,
                          const std::set<int>& outputs) {
  std::vector<NodeInfo>& ns = *nodes;
  // A conv the pass could fold an ADD into.
  auto linear_conv = [&](const NodeInfo& c) {
    return TakesResidual(g, c) && !outputs.count(c.outputs[0]);
  };
  std::set<int> moved;  // each conv moves once at most
  for (size_t i = 0; i < ns.size();) {
    const NodeInfo& c = ns[i++];
    if (!linear_conv(c) || moved.count(c.index)) continue;
    const int y = c.outputs[0];
    // Its readers after it: exactly one, an ADD of y and another value of y's shape.
    size_t add = 0;
    int readers = 0;
    for (size_t j = i; j < ns.size(); ++j)
      for (int t : ns[j].inputs)
        if (t == y) ++readers, add = j;
    if (readers != 1 || ns[add].op != tfl::kAdd || ns[add].inputs.size() != 2) continue;
    const int r = ns[add].inputs[0] == y ? ns[add].inputs[1] : ns[add].inputs[0];
    if (r == y || !g.valid_tensor(r) || g.shape(r) != g.shape(y)) continue;
    // The other operand computed between the two: the conv waits for it, just before the ADD.
    // Unless a conv the pass could fold computes it: that one takes y as its residual.
    size_t at = add;
    for (size_t j = i; j < add && at == add; ++j)
      if (std::count(ns[j].outputs.begin(), ns[j].outputs.end(), r)) at = j;
    if (at == add || linear_conv(ns[at])) continue;
    moved.insert(c.index);
    // What now sits at i - 1 was after the conv: looked at next.
    --i;
    NodeInfo conv = std::move(ns[i]);
    ns.erase(ns.begin() + long(i));
    ns.insert(ns.begin() + long(add) - 1, std::move(conv));
  }
}

class ResidualPass : public FusionPass {
 public:
  const char* name() const override { return "residual"; }
  void Order(const GraphView& g, std::vector<NodeInfo>* nodes,
             const std::set<int>& outputs) override {
    SinkConvsToTheirAdds(g, nodes, outputs);
  }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindResidualFusions(g.g, g.nodes, g.outputs);
    for (const ResidualFusion& f : found_) folds->folded.insert(f.add);
  }
  // Each eligible ADD folds into its conv for this plan's shapes, or both stay as they are: the
  // operands' shapes differ now (a resize made the ADD broadcast) or the conv cannot take it.
  void Apply(FoldPlan& plan) override {
    for (const ResidualFusion& f : found_) {
      Op& conv = plan.op(f.producer);
      Op& add = plan.op(f.add);
      const int y = conv.outputs()[0], z = add.outputs()[0];
      const Shape& s = plan.shape(y);
      const FoldTarget* target = conv.fold_target();
      FoldSource* source = add.fold_source();
      // The ADD's epilogue (a one-slope PRELU after a block's ADD, as PyTorch's nn.PReLU()
      // converts; fusion/epilogue.cc) moves with it: the convolutions' kernels apply an epilogue
      // after the residual and the activation, as ADD then epilogue did. An int8 ADD's table (a
      // PRELU after it) maps the ADD's requantized sum, which the int8 GEMM computes with the
      // residual before its table (kernels/gemm_int8.cl's GEMM_OUT). The ADD's own folded clamp
      // stays the ADD's.
      const Attachments::Epilogue& moved = plan.attachments(f.add).epilogue;
      const bool movable =
          moved.kind == 0 || (moved.kind != kSlopeEpilogue && !add.has_folded_clamp());
      ResidualAdd r;
      if (conv.has_residual() || conv.has_folded_clamp() || conv.has_epilogue() || !movable ||
          !target || !source || !plan.SamePrecision(f.producer, {f.add}) ||
          !source->IsResidualAdd(f.residual, &r) || plan.shape(f.residual) != s ||
          plan.shape(z) != s ||
          !target->CanFuseResidual(plan.StorageCtx(f.producer), plan.InputShapes(f.producer)))
        continue;
      Attachments& at = plan.attachments(f.producer);
      if (moved.kind == kTableEpilogue
              ? !AttachTable(at, conv, z, moved.table, s.empty() ? 0 : int(s.back()))
              : moved.kind != 0 &&
                    !AttachEpilogue(at, conv, z, moved.kind, moved.alpha, moved.post))
        continue;
      AttachResidual(plan.attachments(f.producer), f.residual, z, r);
      plan.SetOutShapes(f.producer, {s});
      plan.Absorb(f.add, f.producer);
      plan.Elide(y);
    }
  }

 private:
  std::vector<ResidualFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeResidualPass() { return std::make_unique<ResidualPass>(); }

}  // namespace clgpu
