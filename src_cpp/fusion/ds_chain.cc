// Depthwise-separable chains: two or more blocks in a row, each a float DEPTHWISE_CONV_2D (depth
// multiplier 1, stride 1, the map's size kept) read only by a 1x1 CONV_2D of stride 1, the 1x1's
// output read only by the next block's depthwise, run by the last block's 1x1 in one launch: of
// one work-group per image, or of groups across the GPU meeting at a barrier after each block
// (ops/ds_chain.h, whichever is faster). A block joins where its time in the chain is under the
// launch it saves (DsBlockPays): small maps of tens of channels, the keyword spotters whose
// blocks each took a launch of 10-17 us on the H200 for a few microseconds of arithmetic.
// Before the depthwise fold, which takes the blocks left; after the clamps (a clamp activation
// folded into either op is the only fold a block may carry: an epilogue, a residual, a PAD or
// any other keeps it out).
#include "ops/ds_chain.h"

#include <cstring>
#include <deque>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A 1x1 CONV_2D of stride 1 reading t as its input 0.
bool IsPointwise(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kConv2d || n.inputs.size() < 2 || n.outputs.size() != 1 || !n.builtin_data)
    return false;
  tfl::ConvParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  const Shape f = g.shape(n.inputs[1]);
  return f.size() == 4 && f[1] == 1 && f[2] == 1 && p.stride_height == 1 && p.stride_width == 1;
}

// Whether the chain still fits its kernel with this block before the others (added if so).
bool ChainFits(const DeviceInfo& dev, const ConvGeometry& dw, int oc,
               std::vector<DsBlockShape>* shapes) {
  std::vector<DsBlockShape> more = *shapes;
  more.insert(more.begin(), DsBlockShape{dw, oc});
  if (!ChooseDsChain(dev, more)) return false;
  *shapes = std::move(more);
  return true;
}

class DsChainPass : public FusionPass {
 public:
  const char* name() const override { return "ds_chain"; }

  void Find(const FoldGraph& fg, Folds* folds) override {
    const GraphView& g = fg.g;
    const std::vector<NodeInfo>& nodes = fg.nodes;
    const TensorUses uses(nodes);
    auto reads = [&](int t) {
      const auto r = uses.readers.find(t);
      return r == uses.readers.end() ? size_t(0) : r->second.size();
    };
    auto clamped = [&](size_t i) { return ClampedOutput(nodes, uses, *folds, i); };
    // The node that writes tensor t once the clamps are folded (a clamp node's producer).
    const std::map<int, size_t> writer = ClampedWriters(nodes, uses, *folds);
    // The block whose 1x1 is node j: its depthwise, or nullopt.
    auto block = [&](size_t j) -> std::optional<size_t> {
      const NodeInfo& pw = nodes[j];
      if (folds->folded.count(j) || !IsPointwise(g, pw) || IsQuantized(g.value_type(pw.inputs[0])))
        return std::nullopt;
      auto p = writer.find(pw.inputs[0]);
      if (p == writer.end()) return std::nullopt;
      const size_t d = p->second;
      const NodeInfo& dw = nodes[d];
      if (dw.op != tfl::kDepthwiseConv2d || dw.outputs.size() != 1 || folds->folded.count(d) ||
          folds->pads.count(d) || clamped(d) != pw.inputs[0] || reads(pw.inputs[0]) != 1 ||
          fg.outputs.count(pw.inputs[0]) ||
          std::count(pw.inputs.begin(), pw.inputs.end(), pw.inputs[0]) != 1)
        return std::nullopt;
      const std::optional<ConvGeometry> dg = GraphConvGeometry(g, dw);
      const std::optional<ConvGeometry> pg = GraphConvGeometry(g, pw);
      if (!dg || !pg || !DsBlockPays(fg.dev, *dg, pg->oc)) return std::nullopt;
      return d;
    };
    std::set<size_t> taken;
    for (size_t j = nodes.size(); j-- > 0;) {
      if (taken.count(j)) continue;
      std::deque<std::pair<size_t, size_t>> chain;  // (depthwise, 1x1)
      std::vector<DsBlockShape> shapes;
      double us = 0;
      for (size_t cur = j;;) {
        const std::optional<size_t> d = block(cur);
        if (!d || taken.count(cur) || taken.count(*d)) break;
        const DsBlockShape shape{*GraphConvGeometry(g, nodes[*d]),
                                 GraphConvGeometry(g, nodes[cur])->oc};
        shapes.insert(shapes.begin(), shape);
        // The blocks after it no longer fit with it.
        const std::optional<DsChainChoice> choice = ChooseDsChain(fg.dev, shapes);
        if (!choice) break;
        chain.emplace_front(*d, cur);
        us = choice->us;
        // The block before: a 1x1 whose clamped output only this depthwise reads.
        const int x = nodes[*d].inputs[0];
        auto p = writer.find(x);
        if (p == writer.end() || reads(x) != 1 || fg.outputs.count(x)) break;
        cur = p->second;
      }
      if (chain.size() < 2) continue;
      for (const auto& [d, pw] : chain) {
        taken.insert(d), taken.insert(pw);
        folds->folded.insert(d);
        if (pw != j) folds->folded.insert(pw);
      }
      folds->chain_us[j] = us;
    }
  }

  void Apply(FoldPlan& plan) override {
    for (size_t i = plan.size(); i-- > 0;) {
      if (plan.absorbed(i)) continue;
      std::deque<Attachments::DsChain::Block> blocks;
      std::vector<DsBlockShape> shapes;
      std::vector<size_t> ops;  // absorbed into i
      std::vector<int> elided;
      int input = -1;
      for (size_t cur = i;;) {
        Op& pw = plan.op(cur);
        if (plan.absorbed(cur) || pw.inputs().empty() || !pw.fold_source() ||
            !pw.ds_chain().empty() || pw.folded_depthwise())
          break;
        const int t = pw.inputs()[0];
        int readers = 0;
        const int d = plan.Producer(t, &readers);
        if (d < 0 || readers != 1 || !plan.internal(t) || !plan.Fits(t)) break;
        Op& dw = plan.op(size_t(d));
        if (dw.inputs().size() != 1 || dw.outputs().size() != 1 || !dw.fold_source() ||
            dw.folded_pad())
          break;
        const int x = dw.inputs()[0];
        const Shape xs = plan.shape(x);
        OpContext pctx = plan.Ctx(cur), dctx = plan.Ctx(size_t(d));
        FloatDepthwiseA form;
        FloatDense dense;
        if (!dw.fold_source()->GetFloatDepthwise(dctx, xs, &form) || !form.epilogue.empty() ||
            !pw.fold_source()->GetFloatPointwise(pctx, xs, &dense) ||
            !DsBlockPays(pctx.env.device(), form.g, dense.n) ||
            !ChainFits(pctx.env.device(), form.g, dense.n, &shapes) ||
            !plan.SamePrecision(i, {cur, size_t(d)}) || !plan.RunsWhole(cur, {plan.shape(t)}) ||
            !plan.RunsWhole(size_t(d), {xs}) || !plan.Fits(x))
          break;
        blocks.push_front({&dw, cur == i ? nullptr : &pw, xs});
        ops.push_back(size_t(d));
        elided.push_back(t);
        if (cur != i) ops.push_back(cur), elided.push_back(pw.outputs()[0]);
        input = x;
        // The block before: a 1x1 writing x for this depthwise alone.
        int xreaders = 0;
        const int p = plan.Producer(x, &xreaders);
        if (p < 0 || xreaders != 1 || !plan.internal(x)) break;
        cur = size_t(p);
      }
      if (blocks.size() < 2) continue;
      AttachDsChain(plan.attachments(i), {blocks.begin(), blocks.end()}, input);
      for (size_t o : ops) plan.Absorb(o, i);
      for (int t : elided) plan.Elide(t);
    }
  }
};

}  // namespace

std::unique_ptr<FusionPass> MakeDsChainPass() { return std::make_unique<DsChainPass>(); }

}  // namespace clgpu
