// Dense chains: two or more float FULLY_CONNECTED layers of one row in a row (a batch-1 dense
// stack, an MLP head), each layer's output (after its clamp) read by the next alone, run by the
// last layer in one launch of groups across the GPU that meet at a barrier after each layer
// (ops/dense_chain.h). Apart, each layer is a launch of the small-M GEMM whose host enqueue
// outlasts its few microseconds of weight reads; a layer joins where its time in the chain is
// under that launch (DenseLayerPays). Last in the table: a layer carrying anything but its
// clamp (a residual, PRELU slopes, an epilogue, a concatenation's slice) stays out, and nothing
// folds into the chain after it.
#include "ops/dense_chain.h"

#include <cstring>
#include <deque>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A float FULLY_CONNECTED of constant weights reading one row: its shape, or nullopt.
std::optional<DenseLayerShape> GraphDenseLayer(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kFullyConnected || n.inputs.size() < 2 || n.outputs.size() != 1 ||
      !g.valid_tensor(n.inputs[0]) || !g.valid_tensor(n.inputs[1]) ||
      IsQuantized(g.value_type(n.inputs[0])) || !g.IsConstant(n.inputs[1]))
    return std::nullopt;
  const Shape w = g.shape(n.inputs[1]);
  if (w.size() != 2 || w[0] <= 0 || w[1] <= 0 || NumElements(g.shape(n.inputs[0])) != w[1])
    return std::nullopt;
  return DenseLayerShape{int(w[0]), int(w[1])};
}

// The op's layer as the kernel takes it (input 0 of shape `in`), or false. Its shape and the
// rule first: GetFloatDense uploads the weights, which a layer the chain never takes (every
// FULLY_CONNECTED where the device has no figures, one run in pieces) must not do here.
bool PlanLayer(FoldPlan& plan, size_t i, const Shape& in, FloatDense* d) {
  Op& op = plan.op(i);
  if (std::strcmp(op.type_name(), "FULLY_CONNECTED") != 0 || op.inputs().size() != 1 ||
      op.outputs().size() != 1 || op.output_slice() || !op.fold_source())
    return false;
  const DenseLayerShape s{int(NumElements(plan.shape(op.outputs()[0]))), int(NumElements(in))};
  OpContext ctx = plan.Ctx(i);
  return DenseLayerPays(ctx.env.device(), s) && plan.RunsWhole(i, {in}) &&
         op.fold_source()->GetFloatDense(ctx, in, d) && d->epilogue.empty() && d->n == s.n &&
         d->k == s.k;
}

class DenseChainPass : public FusionPass {
 public:
  const char* name() const override { return "dense_chain"; }

  void Find(const FoldGraph& fg, Folds* folds) override {
    const GraphView& g = fg.g;
    const std::vector<NodeInfo>& nodes = fg.nodes;
    TensorUses uses(nodes);
    std::map<int, std::vector<size_t>>& readers = uses.readers;
    // Node i as a layer: a dense layer that runs its own kernel, its output (clamped) read by
    // no node folded into it (a PRELU's slopes).
    auto layer = [&](size_t i) -> std::optional<DenseLayerShape> {
      if (folds->folded.count(i) || folds->one_kernel.count(i)) return std::nullopt;
      const std::optional<DenseLayerShape> s = GraphDenseLayer(g, nodes[i]);
      const int t = s ? ClampedOutput(nodes, uses, *folds, i) : -1;
      if (t < 0 || !DenseLayerPays(fg.dev, *s)) return std::nullopt;
      for (size_t r : readers[t])
        if (folds->folded.count(r)) return std::nullopt;
      return s;
    };
    const std::map<int, size_t> writer = ClampedWriters(nodes, uses, *folds);
    std::set<size_t> taken;
    for (size_t j = nodes.size(); j-- > 0;) {
      const std::optional<DenseLayerShape> last = taken.count(j) ? std::nullopt : layer(j);
      if (!last) continue;
      std::vector<DenseLayerShape> shapes = {*last};
      std::vector<size_t> before;
      double us = 0;
      for (size_t cur = j;;) {
        const int x = nodes[cur].inputs[0];
        auto p = writer.find(x);
        if (p == writer.end() || readers[x].size() != 1 || fg.outputs.count(x) ||
            taken.count(p->second))
          break;
        const std::optional<DenseLayerShape> s = layer(p->second);
        if (!s) break;
        shapes.insert(shapes.begin(), *s);
        const std::optional<double> chain = DenseChainUs(fg.dev, shapes);
        if (!chain) break;
        before.push_back(p->second);
        us = *chain;
        cur = p->second;
      }
      if (before.empty()) continue;
      taken.insert(j);
      for (size_t b : before) taken.insert(b), folds->folded.insert(b);
      folds->chain_us[j] = us;
    }
  }

  void Apply(FoldPlan& plan) override {
    for (size_t i = plan.size(); i-- > 0;) {
      if (plan.absorbed(i) || plan.op(i).inputs().empty()) continue;
      const Shape own = plan.shape(plan.op(i).inputs()[0]);
      FloatDense d;
      if (!PlanLayer(plan, i, own, &d)) continue;
      const DeviceInfo& dev = plan.Ctx(i).env.device();
      std::vector<DenseLayerShape> shapes = {{d.n, d.k}};
      std::deque<Attachments::DenseChain::Layer> layers;
      std::vector<size_t> ops;  // absorbed into i
      std::vector<int> elided;
      int input = plan.op(i).inputs()[0];
      for (size_t cur = i;;) {
        const int t = plan.op(cur).inputs()[0];
        int readers = 0;
        const int p = plan.Producer(t, &readers);
        if (p < 0 || readers != 1 || !plan.internal(t) || plan.absorbed(size_t(p))) break;
        Op& prev = plan.op(size_t(p));
        if (prev.inputs().empty()) break;
        const Shape xs = plan.shape(prev.inputs()[0]);
        FloatDense pd;
        if (!PlanLayer(plan, size_t(p), xs, &pd) || !plan.SamePrecision(i, {size_t(p)}) ||
            !plan.Fits(prev.inputs()[0]))
          break;
        shapes.insert(shapes.begin(), {pd.n, pd.k});
        if (!PlanDenseChain(dev, shapes)) break;
        layers.push_front({&prev, xs});
        ops.push_back(size_t(p));
        elided.push_back(t);
        input = prev.inputs()[0];
        cur = size_t(p);
      }
      if (layers.empty()) continue;
      AttachDenseChain(plan.attachments(i), {layers.begin(), layers.end()}, own, input);
      for (size_t o : ops) plan.Absorb(o, i);
      for (int t : elided) plan.Elide(t);
    }
  }
};

}  // namespace

std::unique_ptr<FusionPass> MakeDenseChainPass() { return std::make_unique<DenseChainPass>(); }

}  // namespace clgpu
