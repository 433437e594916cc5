// Expand folds: after a depthwise fold (depthwise.cc), the 1x1 CONV_2D that keeps its map
// (stride 1, or a stride over a single row or column; float32; int8 with channels in fours) that
// alone writes the depthwise's input (an inverted-residual block's expand), not itself taking a
// depthwise, runs inside the same GEMM: each depthwise tap computes its input there
// (AttachExpand, kernels' EXPAND_A), so the whole block is one launch, where ExpandFoldPays.
// Last of the passes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm_int8.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {

// Whether computing the depthwise `dw`'s input from an expand of `ec` channels inside the kernel
// of the `oc`-output project adds less arithmetic than about one launch's worth of the device's
// time (a tenth of its nominal rate for ~6 us): layers of small models, where the launch is the
// cost, and never the large layers of an image model. A block the block kernels run (float or
// int8) computes the expand once per input pixel of each group; the GEMM's EXPAND_A (a map too
// large for the block kernels) at each tap of each output pixel, once per tile of 32 outputs.
bool ExpandFoldPays(const DeviceInfo& dev, const ConvGeometry& dw, int ec, int oc, bool int8);

namespace {

// (depthwise, expand) pairs. Through a PAD folded into the depthwise (pad.cc): the expand writes
// the PAD's input.
std::vector<std::pair<size_t, size_t>> FindExpandFolds(const GraphView& g,
                                                       const std::vector<NodeInfo>& nodes,
                                                       const std::set<int>& outputs,
                                                       const Folds& folds, const DeviceInfo& dev) {
  std::map<int, int> reads, producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].inputs) ++reads[t];
    for (int t : nodes[i].outputs) producer[t] = int(i);
  }
  // The depthwise pass's folds (a pointwise convolution -> its depthwise), turned round;
  // pointwise convolutions that take a depthwise themselves stay as they are.
  std::map<size_t, size_t> pointwise_of;
  for (const auto& [pw, dw] : folds.depthwise_of) pointwise_of[dw] = pw;
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [d, pw] : pointwise_of) {
    const NodeInfo& dw = nodes[d];
    const auto padded = folds.pad_input.find(dw.inputs[0]);
    const int x = padded == folds.pad_input.end() ? dw.inputs[0] : padded->second;
    auto p = producer.find(x);
    if (p == producer.end() || reads[x] != 1 || outputs.count(x)) continue;
    const size_t e = size_t(p->second);
    const NodeInfo& ex = nodes[e];
    if (ex.op != tfl::kConv2d || folds.depthwise_of.count(e) || ex.inputs.size() < 2 ||
        ex.outputs.size() != 1 || !ex.builtin_data)
      continue;
    tfl::ConvParams cp;
    std::memcpy(&cp, ex.builtin_data, sizeof cp);
    const Shape xin = g.shape(ex.inputs[0]), f = g.shape(ex.inputs[1]);
    // Apply's rule: the expand keeps its input's map (a stride over one row or column does).
    if (xin.size() != 4 || f.size() != 4 || f[1] != 1 || f[2] != 1 || f[3] != xin[3] ||
        (cp.stride_height != 1 && xin[1] != 1) || (cp.stride_width != 1 && xin[2] != 1))
      continue;
    if (IsQuantized(g.value_type(x)) && xin[3] % 4 != 0) continue;
    std::optional<ConvGeometry> dg = GraphConvGeometry(g, dw);
    if (const auto p = folds.pads.find(d); dg && p != folds.pads.end()) {
      dg->h -= p->second.top + p->second.bottom;  // as the depthwise sees it at run time
      dg->w -= p->second.left + p->second.right;
    }
    const std::optional<ConvGeometry> pg = GraphConvGeometry(g, nodes[pw]);
    if (dg && pg && ExpandFoldPays(dev, *dg, xin[3], pg->oc, IsQuantized(g.value_type(x))))
      out.emplace_back(d, e);
  }
  return out;
}

class ExpandPass : public FusionPass {
 public:
  const char* name() const override { return "expand"; }
  // A folded expand counts its arithmetic, int8 too: the int8 fused kernel once took about as
  // long as the two it replaced (H100, before its constants were packed), but with them packed
  // it runs as long as the GEMM with the depthwise alone (docs/partitioning.md).
  void Find(const FoldGraph& g, Folds* folds) override {
    for (const auto& [d, e] : FindExpandFolds(g.g, g.nodes, g.outputs, *folds, g.dev)) {
      folds->folded.insert(e);
      folds->expand_of[d] = e;
    }
  }
  void Apply(FoldPlan& plan) override {
    for (size_t i = 0; i < plan.size(); ++i) {
      Op& pw = plan.op(i);
      if (!plan.absorbed(i) && pw.folded_depthwise() && !pw.folded_expand()) Fold(plan, i);
    }
  }

 private:
  // Op i took a depthwise: the 1x1 convolution writing the depthwise's input x, which nothing
  // else reads, folded in too. Its input then feeds op i; x is never written.
  static void Fold(FoldPlan& plan, size_t i) {
    Op& pw = plan.op(i);
    Op& dw = *pw.folded_depthwise();
    const int x = pw.inputs()[0];
    if (!plan.internal(x)) return;
    size_t dwi = 0;
    while (dwi < plan.size() && &plan.op(dwi) != &dw) ++dwi;
    int readers = 0;
    const int producer = plan.Producer(x, &readers);
    if (dwi == plan.size() || producer < 0 || readers != 1) return;
    Op& ex = plan.op(size_t(producer));
    if (ex.inputs().size() != 1 || ex.outputs().size() != 1 || ex.folded_depthwise() ||
        !ex.ds_chain().empty() || !ex.fold_source() || ex.has_residual() || ex.has_epilogue() ||
        ex.has_output_view() || !plan.SamePrecision(i, {size_t(producer)}))
      return;
    const int e_in = ex.inputs()[0];
    const Shape es = plan.shape(e_in), xs = plan.shape(x);
    if (es.size() != 4 || plan.split(e_in) || !plan.Fits(e_in)) return;
    // The kernels compute x's pixel from e_in's same pixel: only where the expand keeps its input's
    // map (stride 1, or a stride over a single row or column). Its dense form below is one pixel's,
    // which no stride changes.
    if (xs.size() != 4 || xs[0] != es[0] || xs[1] != es[1] || xs[2] != es[2]) return;
    OpContext dctx = plan.Ctx(dwi), ectx = plan.Ctx(size_t(producer));
    Int8DepthwiseA int8_form;
    FloatDepthwiseA float_form;
    FoldSource& dw_source = *dw.fold_source();  // it folded as a depthwise
    const bool float_gemm = !dw_source.GetInt8Depthwise(dctx, plan.shape(x), &int8_form);
    if (float_gemm && !dw_source.GetFloatDepthwise(dctx, plan.shape(x), &float_form)) return;
    const ConvGeometry& dg = float_gemm ? float_form.g : int8_form.g;
    if (!ExpandFoldPays(dctx.env.device(), dg, es[3], plan.shape(pw.outputs()[0]).back(),
                        !float_gemm))
      return;
    if (float_gemm) {
      FloatDense e;
      if (!ex.fold_source()->GetFloatDense(ectx, {1, 1, 1, es[3]}, &e) || !e.epilogue.empty() ||
          e.n != dg.c || e.k != es[3])
        return;
    } else {
      Int8Dense e;
      if (es[3] % 4 || !ex.fold_source()->GetInt8Dense(ectx, {1, 1, 1, es[3]}, &e) ||
          !e.stage.table.empty() || e.w->n != dg.c || e.w->k != es[3] || e.w->kp != es[3])
        return;
    }
    AttachExpand(plan.attachments(i), &ex, e_in, plan.shape(x));
    plan.Absorb(size_t(producer), i);
    plan.Elide(x);
  }
};

}  // namespace

bool ExpandFoldPays(const DeviceInfo& dev, const ConvGeometry& dw, int ec, int oc, bool int8) {
  // The block kernels' expand is no chain per tap: keyword_spotting_alexa's 9-tap blocks of 32
  // channels, past the cap, ran in three kernels instead of one.
  double fused =
      int8 ? Int8BlockExpandProducts(dev, dw, oc, ec) : BlockExpandProducts(dev, dw, oc, ec);
  if (fused < 0) {
    if (long(dw.kh) * dw.kw * ec > ExpandChainCap(dev, int8)) return false;
    const double tiles = std::ceil(oc / 32.0);
    fused = double(dw.n) * dw.oh * dw.ow * dw.c * dw.kh * dw.kw * ec * tiles;
  }
  const double own = double(dw.n) * dw.h * dw.w * dw.c * ec;
  return 2 * (fused - own) <= 0.1 * NominalGflops(dev) * 1e9 * 6e-6;
}

std::unique_ptr<FusionPass> MakeExpandPass() { return std::make_unique<ExpandPass>(); }

}  // namespace clgpu
