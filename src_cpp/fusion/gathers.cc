// Gather chains: data-movement ops in a row (TRANSPOSE, PAD / PADV2 / MIRROR_PAD, STRIDED_SLICE,
// SLICE, DEPTH_TO_SPACE, SPACE_TO_DEPTH, and the RESHAPE / EXPAND_DIMS / SQUEEZE between them)
// run as one gather: the last one walks every stage back to the first one's input
// (Op::IndexStageOf, kernels/gather_chain.cl), and the others run no kernel. Converters from
// NCHW frameworks write such rows around their layers (a TRANSPOSE, a PAD, a TRANSPOSE back). An op
// whose every reader is such a row runs inside each of them, its few index operations done again
// rather than a launch and a round trip through memory. A row that comes back to where it
// started (a TRANSPOSE to NCHW, RESHAPEs, a TRANSPOSE back) runs nothing: its readers read its
// source. Last of the passes: it takes only ops that no other pass folded.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "fusion/pass.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

bool Flat(int32_t op) {
  return op == tfl::kReshape || op == tfl::kExpandDims || op == tfl::kSqueeze;
}
bool Moves(int32_t op) {
  return Flat(op) || op == tfl::kTranspose || op == tfl::kPad || op == tfl::kPadV2 ||
         op == tfl::kMirrorPad || op == tfl::kStridedSlice || op == tfl::kSlice ||
         op == tfl::kDepthToSpace || op == tfl::kSpaceToDepth;
}

struct Chain {
  size_t end = 0;
  std::vector<size_t> before;  // the ops folded into `end`, nearest first
  // The row maps every element to itself at these shapes of its tensors (the graph's).
  bool identity = false;
  std::vector<std::pair<int, Shape>> shapes;
};

// Whether a row of TRANSPOSEs and flat copies sends every element back to where it started. The
// source's axes of extent above 1 are followed through each op as atoms: a TRANSPOSE moves the
// current axes (each a run of atoms), a flat copy regroups the run of all atoms into its output's
// axes (a boundary inside an atom: not followed, no bypass), and the row is the identity when the
// atoms end in their first order. Records the tensors' shapes it holds for.
bool GraphIdentity(const GraphView& g, const std::vector<NodeInfo>& nodes, Chain* c) {
  const int src = nodes[c->before.back()].inputs[0], y = nodes[c->end].outputs[0];
  if (g.shape(src) != g.shape(y)) return false;
  std::vector<size_t> order(c->before.rbegin(), c->before.rend());  // source first
  order.push_back(c->end);
  std::vector<int> size;               // per atom
  std::vector<std::vector<int>> axes;  // per axis of the current tensor: its atoms (none: 1)
  for (int d : g.shape(src)) {
    axes.emplace_back();
    if (d != 1) axes.back().push_back(static_cast<int>(size.size())), size.push_back(d);
  }
  c->shapes = {{src, g.shape(src)}};
  for (size_t i : order) {
    const NodeInfo& n = nodes[i];
    const Shape in = g.shape(n.inputs[0]), out = g.shape(n.outputs[0]);
    c->shapes.emplace_back(n.outputs[0], out);
    if (NumElements(out) <= 0 || in.size() != axes.size()) return false;
    std::vector<std::vector<int>> next;
    if (Flat(n.op)) {
      std::vector<int> run;
      for (const auto& a : axes) run.insert(run.end(), a.begin(), a.end());
      size_t k = 0;
      for (int d : out) {
        next.emplace_back();
        for (int64_t p = 1; p < d; ++k) {
          if (k >= run.size()) return false;
          next.back().push_back(run[k]);
          p *= size[size_t(run[k])];
          if (p > d) return false;
        }
      }
      if (k != run.size()) return false;
    } else {
      if (n.op != tfl::kTranspose || n.inputs.size() != 2 || !g.IsConstant(n.inputs[1]))
        return false;
      const std::vector<int64_t> perm = g.ConstantInts(n.inputs[1]);
      if (perm.size() != in.size() || out.size() != in.size()) return false;
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(in.size())) return false;
        next.push_back(axes[size_t(p)]);
      }
    }
    axes = std::move(next);
  }
  int expect = 0;
  for (const auto& a : axes)
    for (int atom : a)
      if (atom != expect++) return false;
  return true;
}

// Chains ending in an op that is not flat and that nothing further folds, each with the ops
// before it whose every reader is a chain's op reading it as its data input.
std::vector<Chain> FindChains(const GraphView& g, const std::vector<NodeInfo>& nodes,
                              const std::set<int>& outputs, const std::set<size_t>& folded) {
  std::map<int, std::vector<size_t>> readers;
  std::map<int, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].inputs) readers[t].push_back(i);
    for (int t : nodes[i].outputs) producer[t] = i;
  }
  auto movable = [&](size_t i) {
    const NodeInfo& n = nodes[i];
    if (!Moves(n.op) || folded.count(i) || n.inputs.empty() || n.outputs.size() != 1) return false;
    const ValueType t = g.value_type(n.inputs[0]);
    return (t == ValueType::kFloat || IsQuantized(t)) && g.value_type(n.outputs[0]) == t;
  };
  // Whether op i runs inside its readers: decided from the last op back, readers first.
  std::vector<bool> inside(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    const int y = nodes[i].outputs.empty() ? -1 : nodes[i].outputs[0];
    if (!movable(i) || outputs.count(y) || readers[y].empty()) continue;
    bool all = true;
    for (size_t r : readers[y]) {
      const NodeInfo& n = nodes[r];
      all = all && r > i && movable(r) && n.inputs[0] == y &&
            std::count(n.inputs.begin(), n.inputs.end(), y) == 1 &&
            g.value_type(n.inputs[0]) == g.value_type(nodes[i].inputs[0]) &&
            (!Flat(n.op) || inside[r]);
    }
    inside[i] = all;
  }
  std::vector<Chain> chains;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!movable(i) || Flat(nodes[i].op) || inside[i]) continue;
    Chain c{i, {}};
    for (auto p = producer.find(nodes[i].inputs[0]); p != producer.end() && inside[p->second];
         p = producer.find(nodes[p->second].inputs[0]))
      c.before.push_back(p->second);
    // Flat copies alone cost no launch to begin with (and a TRANSPOSE keeps its tiled kernel).
    const bool moves =
        std::any_of(c.before.begin(), c.before.end(), [&](size_t b) { return !Flat(nodes[b].op); });
    // A constant source would not be on the device: the partition uploads what ops read first.
    if (!moves || g.IsConstant(nodes[c.before.back()].inputs[0])) continue;
    c.identity = !outputs.count(nodes[i].outputs[0]) && GraphIdentity(g, nodes, &c);
    chains.push_back(std::move(c));
  }
  return chains;
}

class GathersPass : public FusionPass {
 public:
  const char* name() const override { return "gathers"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindChains(g.g, g.nodes, g.outputs, folds->folded);
    for (const Chain& c : found_) {
      folds->folded.insert(c.before.begin(), c.before.end());
      if (c.identity) folds->folded.insert(c.end);
    }
  }
  // A chain folds where its end and every op before it can say their stages for this plan's
  // shapes, all in one precision, with each tensor whole in one buffer. An op shared by several
  // chains folds only if all of them do; a chain stops at the first op before it that does not.
  void Apply(FoldPlan& plan) override {
    std::vector<bool> ok(found_.size(), false);
    std::map<size_t, bool> shared_ok;  // an op before some chain -> whether all of those fold
    for (size_t k = 0; k < found_.size(); ++k) {
      ok[k] = Fits(plan, found_[k]);
      for (size_t b : found_[k].before) {
        auto [it, fresh] = shared_ok.emplace(b, ok[k]);
        if (!fresh) it->second = it->second && ok[k];
      }
    }
    for (size_t k = 0; k < found_.size(); ++k) {
      if (!ok[k]) continue;
      const Chain& c = found_[k];
      std::vector<IndexStage> stages(1);
      Op& end = plan.op(c.end);
      end.IndexStageOf(plan.shape(end.inputs()[0]), plan.shape(end.outputs()[0]), &stages[0]);
      int input = end.inputs()[0];
      size_t taken = 0;
      for (size_t b : c.before) {
        if (!shared_ok[b]) break;
        Op& op = plan.op(b);
        stages.emplace_back();
        op.IndexStageOf(plan.shape(op.inputs()[0]), plan.shape(op.outputs()[0]), &stages.back());
        plan.Absorb(b, c.end);
        plan.Elide(op.outputs()[0]);
        input = op.inputs()[0];
        ++taken;
      }
      if (taken == 0) continue;
      if (!(c.identity && taken == c.before.size() && Bypass(plan, c, input)))
        AttachChain(plan.attachments(c.end), input, std::move(stages));
    }
  }

 private:
  static bool Fits(FoldPlan& plan, const Chain& c) {
    Op& end = plan.op(c.end);
    IndexStage s;
    if (plan.absorbed(c.end) || end.chained() || end.inputs().size() != 1 ||
        end.outputs().size() != 1 || !plan.SamePrecision(c.end, c.before) ||
        !plan.RunsWhole(c.end, plan.InputShapes(c.end)))
      return false;
    auto whole = [&](int t) { return !plan.split(t) && plan.Fits(t); };
    for (size_t i : c.before) {
      const Op& op = plan.op(i);
      if (plan.absorbed(i) || op.inputs().empty() || op.outputs().size() != 1 ||
          !whole(op.inputs()[0]) || !plan.internal(op.outputs()[0]))
        return false;
    }
    std::vector<size_t> all{c.end};
    all.insert(all.end(), c.before.begin(), c.before.end());
    for (size_t i : all) {
      Op& op = plan.op(i);
      if (!whole(op.outputs()[0]) ||
          !op.IndexStageOf(plan.shape(op.inputs()[0]), plan.shape(op.outputs()[0]), &s))
        return false;
    }
    return true;
  }

  // A row that maps every element to itself, its source `x` stored as its output: the readers
  // of the output read x instead, and the row's last op runs no kernel either.
  static bool Bypass(FoldPlan& plan, const Chain& c, int x) {
    const size_t end = c.end;
    const int y = plan.op(end).outputs()[0];
    if (!plan.internal(y) || plan.bytes(x) != plan.bytes(y)) return false;
    for (const auto& [t, shape] : c.shapes)
      if (plan.shape(t) != shape) return false;  // resized since: the gather runs
    int reader = -1;
    for (size_t j = 0; j < plan.size(); ++j)
      if (j != end && !plan.absorbed(j))
        for (int& t : plan.attachments(j).inputs)
          if (t == y) t = x, reader = reader < 0 ? int(j) : reader;
    if (reader < 0) return false;  // nothing read it: keep the kernel (never the case inside)
    plan.Absorb(end, size_t(reader));
    plan.Elide(y);
    return true;
  }

  std::vector<Chain> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeGathersPass() { return std::make_unique<GathersPass>(); }

}  // namespace clgpu
