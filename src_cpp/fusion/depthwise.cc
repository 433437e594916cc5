// Depthwise folds: a DEPTHWISE_CONV_2D (depth multiplier 1; int8: channels in fours) whose output
// only a later 1x1 CONV_2D of stride 1 reads, not a partition output, runs inside that
// convolution's GEMM, which computes the depthwise's output where its tiles load A
// (AttachDepthwise; int8 or float): one launch for the pair, the tensor between never written.
// After the residuals and epilogues (the pointwise op's ADD and table are folded by then); a
// float depthwise keeps its folded clamp and epilogue (applied to A), other folds of its own
// keep it apart, and neither op may run in chunks.
#include <cstring>
#include <map>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm_int8.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

std::vector<size_t> FindDepthwiseFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       const std::set<int>& outputs,
                                       const std::map<int, int>& written_instead) {
  std::map<int, size_t> reader;
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) ++reads[t], reader[t] = i;
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& dw = nodes[i];
    if (dw.op != tfl::kDepthwiseConv2d || dw.inputs.size() < 2 || dw.outputs.size() != 1 ||
        !dw.builtin_data)
      continue;
    // A float depthwise whose own clamp or epilogue (a HARD_SWISH, as MobileNetV3's) was
    // folded: the GEMM reads what those write, applying them where it computes A.
    const int t = WrittenAs(written_instead, dw.outputs[0]);
    if (t != dw.outputs[0] && IsQuantized(g.value_type(dw.outputs[0]))) continue;
    if (reads[t] != 1 || outputs.count(t) || reader[t] <= i) continue;
    const NodeInfo& pw = nodes[reader[t]];
    if (pw.op != tfl::kConv2d || pw.inputs.size() < 2 || pw.inputs[0] != t || !pw.builtin_data)
      continue;
    tfl::ConvParams p;
    std::memcpy(&p, pw.builtin_data, sizeof p);
    const Shape x = g.shape(dw.inputs[0]), f = g.shape(pw.inputs[1]), df = g.shape(dw.inputs[1]);
    if (x.size() != 4 || f.size() != 4 || df.size() != 4 || f[1] != 1 || f[2] != 1 ||
        p.stride_height != 1 || p.stride_width != 1 || df[3] != x[3] || f[3] != x[3])
      continue;
    if (IsQuantized(g.value_type(t)) && x[3] % 4 != 0) continue;
    out.push_back(i);
  }
  return out;
}

class DepthwisePass : public FusionPass {
 public:
  const char* name() const override { return "depthwise"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    for (size_t d : FindDepthwiseFolds(g.g, g.nodes, g.outputs, folds->written_instead)) {
      folds->folded.insert(d);
      const int t = WrittenAs(folds->written_instead, g.nodes[d].outputs[0]);
      for (size_t j = d + 1; j < g.nodes.size(); ++j)
        if (!g.nodes[j].inputs.empty() && g.nodes[j].inputs[0] == t) folds->depthwise_of[j] = d;
    }
  }
  void Apply(FoldPlan& plan) override {
    for (size_t i = 0; i < plan.size(); ++i) {
      Op& pw = plan.op(i);
      if (plan.absorbed(i) || pw.inputs().empty() || pw.folded_depthwise()) continue;
      const int t = pw.inputs()[0];
      if (!plan.internal(t)) continue;
      // Its producer, and no reader besides pw's input 0.
      int readers = 0;
      const int producer = plan.Producer(t, &readers);
      if (producer < 0 || readers != 1 || plan.op(size_t(producer)).outputs().size() != 1) continue;
      Op& dw = plan.op(size_t(producer));
      const int x = dw.inputs().empty() ? -1 : dw.inputs()[0];
      if (x < 0 || dw.inputs().size() != 1 || !plan.Fits(x) || !plan.Fits(t) ||
          !plan.Fits(pw.outputs()[0]) || !plan.SamePrecision(i, {size_t(producer)}))
        continue;
      const std::vector<Shape> in = plan.InputShapes(i);
      OpContext pctx = plan.Ctx(i), dctx = plan.Ctx(size_t(producer));
      Int8DepthwiseA int8_form;
      FloatDepthwiseA float_form;
      const FoldTarget* target = pw.fold_target();
      FoldSource* source = dw.fold_source();
      if (!target || !source || !target->TakesDepthwise(pctx, in) ||
          !(source->GetInt8Depthwise(dctx, plan.shape(x), &int8_form) ||
            source->GetFloatDepthwise(dctx, plan.shape(x), &float_form)) ||
          !plan.RunsWhole(i, in))
        continue;
      AttachDepthwise(plan.attachments(i), &dw, x, plan.shape(t));
      plan.Absorb(size_t(producer), i);
      plan.Elide(t);
    }
  }
};

}  // namespace

std::unique_ptr<FusionPass> MakeDepthwisePass() { return std::make_unique<DepthwisePass>(); }

}  // namespace clgpu
