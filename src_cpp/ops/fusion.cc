#include "ops/fusion.h"

#include <cstring>
#include <map>

#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {

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
    const NodeInfo& c = nodes[p->second];
    if (c.op != tfl::kConv2d || !c.builtin_data || c.outputs.size() != 1) return -1;
    tfl::ConvParams params;
    std::memcpy(&params, c.builtin_data, sizeof params);
    if (params.activation != tfl::kActNone) return -1;
    if (reads[t] != 1 || outputs.count(t)) return -1;
    return static_cast<long>(p->second);
  };
  std::vector<ResidualFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (n.op != tfl::kAdd || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const int a = n.inputs[0], b = n.inputs[1];
    if (a == b || !g.valid_tensor(a) || !g.valid_tensor(b) || !g.valid_tensor(n.outputs[0]))
      continue;
    if (g.type(a) != kTfLiteFloat32 || g.type(b) != kTfLiteFloat32) continue;
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

std::vector<ClampFusion> FindClampFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                          const std::set<int>& outputs) {
  // The clamp activations as bounds: the fused-activation codes of the same clamps.
  auto bounds = [](int32_t op, float* lo, float* hi) {
    switch (op) {
      case tfl::kRelu:
        return ActivationRange(tfl::kActRelu, lo, hi);
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

}  // namespace clgpu
