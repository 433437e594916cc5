// Depthwise folds: a DEPTHWISE_CONV_2D (depth multiplier 1; int8: channels in fours) whose output
// only a later 1x1 CONV_2D of stride 1 reads, not a partition output, runs inside that
// convolution's GEMM, which computes the depthwise's output where its tiles load A
// (AttachDepthwise; int8 or float): one launch for the pair, the tensor between never written,
// where the taps that GEMM computes again for each tile of outputs cost less than the launch
// (DepthwiseFoldPays).
// After the residuals and epilogues (the pointwise op's ADD and table are folded by then); a
// float depthwise keeps its folded clamp and epilogue (applied to A), other folds of its own
// keep it apart, and neither op may run in chunks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "common/env.h"
#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm_int8.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Whether folding the depthwise `dw` into the GEMM of its `oc`-output pointwise costs the device
// less than the depthwise's own launch. The GEMM computes the depthwise's taps where each group
// loads its A, once for each tile of outputs, so a layer of many pixels, channels and tiles
// computes them many times over: on the H200, Keras Xception's 728-channel layers (12 tiles)
// ran in 3.86 ms folded against 1.77 ms apart, and MobileNetV1's in 0.50 against 0.31, where the
// keyword spotters' layers gained from the fold (bench/results/ab-options-nodw-NVIDIA_H200.md).
// A tap computed again costs about 80 flops of the nominal rate, fitted on those models; an int8
// one 60 (its four requantizations): held-out int8 DS-CNNs broke even at 4.9M taps again (276
// channels on 245 pixels) and lost 6 us a block at 7.6M (172 on 980; 1.45x the model's time
// folded), where 30 had folded both (bench/results/ab-options-ds28-NVIDIA_H200.md). The launch
// saved is the device profile's cost of a small kernel (6 us where it has none).
// $CLGPU_TRIAL_DW_FOLD_ALWAYS folds every pair (research: the A/B).
bool DepthwiseFoldPays(const DeviceInfo& dev, const ConvGeometry& dw, int oc, bool int8) {
  if (GetEnv("CLGPU_TRIAL_DW_FOLD_ALWAYS")) return true;
  const long m = long(dw.n) * dw.oh * dw.ow;
  const int tile_n =
      int8 ? Int8DepthwiseGemmTileN(dev, int(m), oc, dw.c) : DepthwiseGemmTiles(dev, dw, oc).tile_n;
  const double again = std::ceil(double(oc) / std::max(tile_n, 1)) - 1;
  const double taps = double(m) * dw.c * dw.kh * dw.kw * again;
  const double taps_per_s = NominalGflops(dev) * 1e9 / (int8 ? 60 : 80);
  const double small_us = dev.profile.launch_us[kSmallLaunch];
  return taps <= taps_per_s * (small_us > 0 ? small_us : 6) * 1e-6;
}

std::vector<size_t> FindDepthwiseFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       const std::set<int>& outputs,
                                       const std::map<int, int>& written_instead,
                                       const DeviceInfo& dev) {
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
    const std::optional<ConvGeometry> dg = GraphConvGeometry(g, dw);
    if (!dg || !DepthwiseFoldPays(dev, *dg, f[0], IsQuantized(g.value_type(t)))) continue;
    out.push_back(i);
  }
  return out;
}

class DepthwisePass : public FusionPass {
 public:
  const char* name() const override { return "depthwise"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    for (size_t d : FindDepthwiseFolds(g.g, g.nodes, g.outputs, folds->written_instead, g.dev)) {
      if (folds->folded.count(d)) continue;  // a depthwise-separable chain's (ds_chain.cc)
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
      if (!target || !source || !target->TakesDepthwise(pctx, in)) continue;
      const bool int8 = source->GetInt8Depthwise(dctx, plan.shape(x), &int8_form);
      if (!(int8 || source->GetFloatDepthwise(dctx, plan.shape(x), &float_form)) ||
          !plan.RunsWhole(i, in) ||
          !DepthwiseFoldPays(dctx.env.device(), int8 ? int8_form.g : float_form.g,
                             plan.shape(pw.outputs()[0]).back(), int8))
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
