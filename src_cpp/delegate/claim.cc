#include "delegate/claim.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/env.h"
#include "graph/dequantize.h"
#include "ops/op_handler.h"
#include "tflite/builtin.h"

namespace clgpu {

std::vector<const NodeInfo*> FoldConstantDequantizes(GraphView& graph,
                                                     const std::vector<NodeInfo>& nodes) {
  std::vector<const NodeInfo*> folded;
  for (const NodeInfo& n : nodes) {
    if (n.op != tfl::kDequantize || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const int src = n.inputs[0], out = n.outputs[0];
    if (!graph.valid_tensor(src) || !graph.valid_tensor(out)) continue;
    // The output must be the source's elements in the source's shape: a folded weight is read
    // as the output's declared shape from the source's data, where TFLite's DEQUANTIZE gives
    // its output the source's shape (a filter of another shape fails the conv's Prepare there).
    const int64_t count = NumElements(graph.shape(src));
    if (graph.type(out) != kTfLiteFloat32 || !graph.IsConstant(src) ||
        graph.shape(src) != graph.shape(out))
      continue;
    // An int8 / uint8 weight (a dynamic-range model's DEQUANTIZE form): its scales, per tensor
    // or per channel, and zero points apply as TFLite's DEQUANTIZE applies them.
    const bool quantized =
        IsQuantized(ValueTypeOf(graph.type(src))) && !graph.IsComputedConstant(src) &&
        CheckDequantizable(graph.tensor(src), graph.shape(src), graph.name(src)).empty();
    if (quantized || (graph.type(src) == kTfLiteFloat16 &&
                      (graph.IsComputedConstant(src) ||
                       graph.tensor(src).bytes >= static_cast<size_t>(count) * 2))) {
      graph.AddFoldedDequantize(out, src);
      folded.push_back(&n);
    }
  }
  return folded;
}

void KeepInt32ValuesForTheirReaders(const GraphView& graph, const std::vector<NodeInfo>& nodes,
                                    std::vector<NodeDecision>* decisions) {
  std::map<int, NodeDecision*> decision;
  for (NodeDecision& d : *decisions) decision[d.node] = &d;
  std::map<int, const NodeInfo*> producer;
  for (const NodeInfo& n : nodes)
    for (int t : n.outputs) producer[t] = &n;
  auto claimed = [&](const NodeInfo* n) { return n && decision.at(n->index)->claimed; };
  auto copies = [](int32_t op) {
    const OpHandler* h = FindOpHandler(op);
    return h && h->flat_copy;
  };
  for (const NodeInfo& r : nodes) {
    if (!decision.at(r.index)->claimed || copies(r.op) || tfl::ConvertsInt32Values(r.op)) continue;
    for (int t : r.inputs) {
      if (t < 0 || !graph.valid_tensor(t) || graph.value_type(t) != ValueType::kInt32 ||
          graph.IsConstant(t) || graph.FoldedIntsOf(t))
        continue;
      // Through the device's flat copies back to where the integers are made.
      const NodeInfo* p = producer.count(t) ? producer[t] : nullptr;
      while (claimed(p) && copies(p->op) && !p->inputs.empty())
        p = producer.count(p->inputs[0]) ? producer[p->inputs[0]] : nullptr;
      if (!claimed(p)) continue;  // TFLite's memory: a partition input
      NodeDecision* d = decision.at(p->index);
      d->claimed = false;
      d->reason = "its int32 output is read by node " + std::to_string(r.index) + " (" +
                  decision.at(r.index)->op_name +
                  "), which takes run-time int32 positions only from the CPU";
      d->note.clear();
    }
  }
}

void LeaveEdgeConversionsToCpu(const GraphView& graph, const std::vector<NodeInfo>& nodes,
                               const DeviceCosts& costs, const CpuCosts& cpu,
                               std::vector<NodeDecision>* decisions) {
  // $CLGPU_EDGE_CPU: which edges' conversions may stay on the CPU, 1 the inputs', 2 the
  // outputs', 3 both (default), 0 none (research: bench/ab_options.py env.*, read per prepare).
  const std::vector<double> env =
      EnvNumbers("CLGPU_EDGE_CPU", 1, "0, 1, 2 or 3",
                 [](const std::vector<double>& v) { return WholeAtLeast(v, 0) && v[0] <= 3; });
  const int sides = env.empty() ? 3 : int(env[0]);
  std::set<int> made, read;
  std::map<int, const NodeInfo*> node;
  for (const NodeInfo& n : nodes) {
    node[n.index] = &n;
    made.insert(n.outputs.begin(), n.outputs.end());
    read.insert(n.inputs.begin(), n.inputs.end());
  }
  for (NodeDecision& d : *decisions) {
    auto it = node.find(d.node);
    if (!d.claimed || it == node.end()) continue;
    const NodeInfo& n = *it->second;
    const OpHandler* h = FindOpHandler(n.op);
    if (!h || !h->converts_type || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const int x = n.inputs[0], y = n.outputs[0];
    const bool from_input = graph.valid_tensor(x) && !graph.IsConstant(x) && !made.count(x);
    if (!from_input && read.count(y)) continue;
    if (!(sides & (from_input ? 1 : 2))) continue;
    std::string why = EdgeConversionCost(graph, n, costs, cpu);
    if (why.empty()) continue;
    d.claimed = false;
    d.reason = std::move(why);
    d.note.clear();
  }
}

namespace {

class Claims {
 public:
  Claims(const std::vector<NodeInfo>& nodes, const std::vector<const NodeInfo*>& dequantizes,
         std::vector<NodeDecision>* decisions)
      : nodes_(nodes) {
    for (NodeDecision& d : *decisions) decision_[d.node] = &d;
    for (const NodeInfo& n : nodes) info_[n.index] = &n;
    std::map<int, int> dq_of_output;
    for (const NodeInfo* dq : dequantizes) {
      dq_of_output[dq->outputs[0]] = dq->index;
      consumers_[dq->index];
    }
    for (const NodeInfo& n : nodes)
      for (int t : n.inputs)
        if (auto it = dq_of_output.find(t); it != dq_of_output.end())
          consumers_[it->second].push_back(n.index);
    for (const auto& [t, dq] : dq_of_output) dq_output_[t] = dq;
  }

  bool claimed(int node) const { return decision_.at(node)->claimed; }
  bool is_dequantize(int node) const { return consumers_.count(node) != 0; }

  void Unclaim(int node, const std::string& why) {
    NodeDecision* d = decision_.at(node);
    d->claimed = false;
    d->reason = why;
    d->note.clear();
  }

  // A folded DEQUANTIZE or shape computation goes with its consumers: claimed while all of them
  // are. Last node first: a chain of folded nodes (SHAPE -> STRIDED_SLICE -> PACK) follows its end.
  void FollowConsumers() {
    for (auto it = consumers_.rbegin(); it != consumers_.rend(); ++it) {
      const auto& [dq, users] = *it;
      NodeDecision* d = decision_.at(dq);
      d->claimed = !users.empty() &&
                   std::all_of(users.begin(), users.end(), [&](int n) { return claimed(n); });
      d->reason = d->claimed      ? ""
                  : users.empty() ? "its output is read by no op"
                                  : "its output is also read by an op that stays on the CPU";
    }
  }

  // Unclaims the DEQUANTIZEs whose output leaves their partition (TFLite groups a node with
  // no run-time inputs into the first partition, not its consumers'); true if any did.
  bool DropCrossingDequantizes(const std::vector<PartitionPreview>& parts) {
    bool any = false;
    for (const PartitionPreview& p : parts)
      for (int t : p.outputs)
        if (auto it = dq_output_.find(t); it != dq_output_.end() && claimed(it->second)) {
          Unclaim(it->second,
                  "its consumers run in another partition, which reads the value as a constant");
          any = true;
        }
    return any;
  }

  std::vector<int> ClaimedInOrder() const {
    std::vector<int> out;
    for (const NodeInfo& n : nodes_)
      if (claimed(n.index)) out.push_back(n.index);
    return out;
  }

  // The partition's ops (its folded DEQUANTIZEs run no kernel and cost the CPU nothing
  // per invoke, so the cost model and the partition ranking leave them out).
  std::vector<NodeInfo> Ops(const PartitionPreview& p) const {
    std::vector<NodeInfo> ops;
    for (int n : p.nodes)
      if (!is_dequantize(n)) ops.push_back(*info_.at(n));
    return ops;
  }

  void UnclaimOps(const PartitionPreview& p, const std::string& why) {
    for (int n : p.nodes)
      if (!is_dequantize(n)) Unclaim(n, why);
  }

 private:
  const std::vector<NodeInfo>& nodes_;
  std::map<int, NodeDecision*> decision_;
  std::map<int, const NodeInfo*> info_;
  std::map<int, std::vector<int>> consumers_;  // folded DEQUANTIZE -> the nodes reading it
  std::map<int, int> dq_output_;               // its output tensor -> the DEQUANTIZE
};

}  // namespace

void PlanClaims(const std::vector<NodeInfo>& nodes, const std::vector<const NodeInfo*>& dequantizes,
                const PreviewFn& preview, const KeepFn& keep, int max_partitions, ClaimPlan* plan) {
  Claims claims(nodes, dequantizes, &plan->decisions);
  auto partitions = [&] {
    const std::vector<int> claimed = claims.ClaimedInOrder();
    return claimed.empty() ? std::vector<PartitionPreview>{} : preview(claimed);
  };
  // Each round only unclaims, so it ends.
  for (;;) {
    claims.FollowConsumers();
    plan->partitions = partitions();
    while (claims.DropCrossingDequantizes(plan->partitions)) plan->partitions = partitions();

    bool dropped = false;
    if (keep) {
      for (const PartitionPreview& p : plan->partitions) {
        const std::string why = keep(p, claims.Ops(p));
        if (why.empty()) continue;
        claims.UnclaimOps(p, why);
        dropped = true;
      }
    }
    if (!dropped && max_partitions > 0 &&
        plan->partitions.size() > static_cast<size_t>(max_partitions)) {
      // Keep the partitions of the most ops: fewer boundaries, most work per transfer.
      std::vector<PartitionPreview> parts = plan->partitions;
      std::stable_sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) {
        return claims.Ops(a).size() > claims.Ops(b).size();
      });
      for (size_t i = max_partitions; i < parts.size(); ++i)
        claims.UnclaimOps(parts[i], "partition dropped by max_delegated_partitions=" +
                                        std::to_string(max_partitions));
      dropped = true;
    }
    if (!dropped) break;
  }
  plan->nodes = claims.ClaimedInOrder();
}

}  // namespace clgpu
