// Chains of concatenations extended in place (DenseNet's dense blocks): a float concatenation
// along the last axis whose input 0 is the previous one's output and whose other inputs are
// convolutions' that only it reads (fusion/concat.cc's writers). The chain's concatenations all
// live in the last one's tensor, each the first columns of its rows (FoldPlan::Alias): the
// convolutions write their columns there (AttachOutputSlice), the links launch nothing, and the
// chain's first concatenation copies its inputs into the first columns at the wider pitch. What
// reads a link's output reads it at that pitch (FoldTarget::TakesInputPitch: the GEMMs' A
// loads), so each layer's channels are written once instead of copied into every later tensor.
// A link whose output another op reads otherwise ends the chain there. After concat (whose
// folds it leaves alone) and the folds that change what a convolution reads (affine) or writes.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "fusion/concat.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A chain of concatenations extended in place: concats[0] runs, at the last one's pitch; the
// others (links) launch nothing.
struct ConcatChain {
  std::vector<size_t> concats;
};

std::vector<ConcatChain> FindConcatChains(const FoldGraph& fg, Folds* folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  const std::map<int, size_t> writer = SliceWriters(fg, folds);
  const TensorUses uses(nodes);
  auto last_axis = [&](size_t i) {
    const std::optional<int> a = ConcatAxis(g, nodes[i]);
    if (!a || folds->folded.count(i)) return false;
    const int r = static_cast<int>(g.shape(nodes[i].outputs[0]).size());
    return r > 0 && (*a == -1 || *a == r - 1);
  };
  // Whether every reader of t but `next` could read it at a pitch: a convolution's input 0, or
  // a MUL / ADD an earlier pass folded (fusion/affine.cc's per-channel nodes, read through by
  // the convolution after them). The plan asks the ops themselves.
  auto pitched_readers = [&](int t, size_t next) {
    const auto r = uses.readers.find(t);
    if (r == uses.readers.end() || fg.outputs.count(t)) return false;
    for (size_t j : r->second) {
      if (j == next) continue;
      const NodeInfo& n = nodes[j];
      if (folds->folded.count(j) ? n.op != tfl::kMul && n.op != tfl::kAdd
                                 : !ConvReadingInput(g, n, t))
        return false;
    }
    return true;
  };
  // Concat i as a link: the concat it extends, or nothing.
  auto extends = [&](size_t i) -> std::optional<size_t> {
    if (!last_axis(i)) return std::nullopt;
    const NodeInfo& n = nodes[i];
    const int x = n.inputs[0];
    const auto p = uses.producer.find(x);
    if (p == uses.producer.end() || p->second >= i || !last_axis(p->second) ||
        std::count(n.inputs.begin(), n.inputs.end(), x) != 1 || !pitched_readers(x, i))
      return std::nullopt;
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      const auto w = writer.find(n.inputs[k]);
      const auto r = uses.readers.find(n.inputs[k]);
      if (w == writer.end() || w->second >= i || r == uses.readers.end() || r->second.size() != 1 ||
          fg.outputs.count(n.inputs[k]))
        return std::nullopt;
    }
    return p->second;
  };
  std::map<size_t, size_t> next;  // a concat -> the link extending it
  std::set<size_t> links;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (const std::optional<size_t> p = extends(i)) next[*p] = i, links.insert(i);
  std::vector<ConcatChain> out;
  for (const auto& [head, link] : next) {
    if (links.count(head)) continue;
    ConcatChain c{{head}};
    for (auto n = next.find(head); n != next.end(); n = next.find(n->second)) {
      c.concats.push_back(n->second);
      folds->folded.insert(n->second);
    }
    out.push_back(std::move(c));
  }
  return out;
}

class ConcatChainPass : public FusionPass {
 public:
  const char* name() const override { return "concat_chain"; }
  void Find(const FoldGraph& g, Folds* folds) override { chains_ = FindConcatChains(g, folds); }
  void Apply(FoldPlan& plan) override {
    for (const ConcatChain& c : chains_) ApplyChain(plan, c);
  }

 private:
  // A link's fit: `prev` (the chain so far ends there) whose output `cur` extends, the ops
  // writing cur's other inputs, and those reading prev's output but cur (at the pitch, then).
  struct Link {
    std::vector<size_t> producers, readers;
  };
  static std::optional<Link> LinkFits(FoldPlan& plan, size_t prev, size_t cur, bool head) {
    if (plan.absorbed(prev) || plan.absorbed(cur)) return std::nullopt;
    const Attachments &p = plan.attachments(prev), &c = plan.attachments(cur);
    if (p.outputs.size() != 1 || c.outputs.size() != 1 || c.inputs.size() < 2 ||
        c.inputs[0] != p.outputs[0] || p.out_slice.on)
      return std::nullopt;
    const int x = p.outputs[0], z = c.outputs[0];
    if (!plan.internal(x) || plan.split(x) || !plan.Fits(z) || plan.split(z) ||
        plan.shape(x).empty() || plan.shape(z).size() != plan.shape(x).size())
      return std::nullopt;
    if (head && (!plan.RunsWhole(prev, plan.InputShapes(prev)) || p.inputs.empty()))
      return std::nullopt;
    Link link;
    std::vector<size_t> ops = {prev};
    for (size_t k = 1; k < c.inputs.size(); ++k) {
      int readers = 0;
      const int t = c.inputs[k];
      const int w = plan.Producer(t, &readers);
      if (w < 0 || size_t(w) >= cur || readers != 1 || !plan.internal(t) || plan.split(t) ||
          plan.shape(t).empty() || !WritesIntoConcat(plan, size_t(w), t))
        return std::nullopt;
      link.producers.push_back(size_t(w));
    }
    for (size_t j = 0; j < plan.size(); ++j) {
      if (j == cur || plan.absorbed(j)) continue;
      const std::vector<int>& in = plan.attachments(j).inputs;
      const long uses = std::count(in.begin(), in.end(), x);
      if (!uses) continue;
      const FoldTarget* target = plan.op(j).fold_target();
      const std::vector<Shape> shapes = plan.InputShapes(j);
      if (j < prev || uses != 1 || in[0] != x || !target ||
          !target->TakesInputPitch(plan.Ctx(j), shapes) || !plan.RunsWhole(j, shapes))
        return std::nullopt;
      link.readers.push_back(j);
    }
    ops.insert(ops.end(), link.producers.begin(), link.producers.end());
    ops.insert(ops.end(), link.readers.begin(), link.readers.end());
    if (!plan.SamePrecision(cur, ops)) return std::nullopt;
    return link;
  }

  // The longest runs of the chain whose links fit, each folded into its last tensor.
  static void ApplyChain(FoldPlan& plan, const ConcatChain& chain) {
    std::vector<size_t> run = {chain.concats[0]};
    std::vector<Link> links;
    for (size_t k = 1; k <= chain.concats.size(); ++k) {
      std::optional<Link> l;
      if (k < chain.concats.size())
        l = LinkFits(plan, run.back(), chain.concats[k], run.size() == 1);
      if (l) {
        run.push_back(chain.concats[k]), links.push_back(std::move(*l));
        continue;
      }
      if (!links.empty()) FoldRun(plan, run, links);
      if (k < chain.concats.size()) run = {chain.concats[k]}, links.clear();
    }
  }

  static void FoldRun(FoldPlan& plan, const std::vector<size_t>& run,
                      const std::vector<Link>& links) {
    const int z = plan.attachments(run.back()).outputs[0];
    const int pitch = plan.shape(z).back();
    std::vector<int> kept;  // each concatenation's output but the last: z's first columns
    for (size_t k = 0; k + 1 < run.size(); ++k) kept.push_back(plan.attachments(run[k]).outputs[0]);
    AttachOutputSlice(plan.attachments(run[0]), kept[0], pitch, 0);
    for (size_t k = 1; k < run.size(); ++k) {
      const Link& l = links[k - 1];
      const std::vector<int> in = plan.attachments(run[k]).inputs;
      int offset = plan.shape(kept[k - 1]).back();
      for (size_t j = 1; j < in.size(); ++j) {
        AttachOutputSlice(plan.attachments(l.producers[j - 1]), z, pitch, offset);
        offset += plan.shape(in[j]).back();
        plan.Elide(in[j]);
      }
      for (size_t r : l.readers) AttachInputPitch(plan.attachments(r), pitch);
      plan.Absorb(run[k], l.producers.back());
    }
    for (int t : kept) plan.Alias(t, z);
  }

  std::vector<ConcatChain> chains_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeConcatChainPass() { return std::make_unique<ConcatChainPass>(); }

}  // namespace clgpu
