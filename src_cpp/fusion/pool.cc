// Pool folds: an int8 MAX_POOL_2D of a 2x2 window and stride 2, without an activation, whose input
// only it reads: the output of an int8 CONV_2D (or what the conv's folded clamp or epilogue
// writes instead), not a partition output. The convolution's implicit GEMM computes the four
// pixels of each window in one group and writes their largest byte (AttachPool,
// kernels/gemm_int8.cl's POOL2), so the pool launches nothing and the conv's own output is never
// written: a small CNN's conv and pool layers (image and audio classifiers) in one launch each.
// Valid where the pool's output is the conv's halved, rounded down (VALID, or SAME of even
// sizes). Last of the passes: a convolution that took a residual, a depthwise or an expand stays
// apart.
#include <cstring>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm_int8.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct PoolFusion {
  size_t conv = 0, pool = 0;
};

// A MAX_POOL_2D of int8 values over 2x2 windows of stride 2, no activation.
bool MaxPool2x2(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kMaxPool2d || !n.builtin_data || n.inputs.size() != 1 || n.outputs.size() != 1 ||
      !g.valid_tensor(n.inputs[0]) || !g.valid_tensor(n.outputs[0]) ||
      g.value_type(n.inputs[0]) != ValueType::kInt8 ||
      g.value_type(n.outputs[0]) != ValueType::kInt8)
    return false;
  tfl::PoolParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return p.filter_height == 2 && p.filter_width == 2 && p.stride_height == 2 &&
         p.stride_width == 2 && p.activation == tfl::kActNone;
}

std::vector<PoolFusion> FindPoolFusions(const FoldGraph& fg, const Folds& folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  std::vector<PoolFusion> out;
  if (!Int8GemmTakesPool(fg.dev)) return out;
  std::map<int, size_t> writer;  // what an int8 conv's kernel writes, with its folds so far
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    for (int t : n.inputs) ++reads[t];
    if (n.op == tfl::kConv2d && n.outputs.size() == 1 && g.valid_tensor(n.outputs[0]) &&
        g.value_type(n.outputs[0]) == ValueType::kInt8 && !folds.folded.count(i) &&
        !folds.depthwise_of.count(i))
      writer[WrittenAs(folds.written_instead, n.outputs[0])] = i;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (folds.folded.count(i) || !MaxPool2x2(g, nodes[i])) continue;
    const int x = nodes[i].inputs[0];
    const auto w = writer.find(x);
    if (w == writer.end() || w->second >= i || reads[x] != 1 || fg.outputs.count(x)) continue;
    const std::optional<ConvGeometry> cg = GraphConvGeometry(g, nodes[w->second]);
    if (!cg || cg->groups != 1) continue;
    out.push_back(PoolFusion{w->second, i});
  }
  return out;
}

class PoolPass : public FusionPass {
 public:
  const char* name() const override { return "pool"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindPoolFusions(g, *folds);
    for (const PoolFusion& f : found_) folds->folded.insert(f.pool);
  }
  // Each pool folds into its conv for this plan's shapes (the pool's output the conv's halved,
  // both whole buffers), or both stay as they are.
  void Apply(FoldPlan& plan) override {
    for (const PoolFusion& f : found_) {
      if (plan.absorbed(f.conv) || plan.absorbed(f.pool)) continue;
      Op& conv = plan.op(f.conv);
      const Attachments& a = plan.attachments(f.conv);
      if (a.outputs.size() != 1 || plan.attachments(f.pool).inputs.empty() ||
          plan.attachments(f.pool).inputs[0] != a.outputs[0])
        continue;
      const int y = a.outputs[0], z = plan.attachments(f.pool).outputs.at(0);
      const Shape& s = plan.shape(y);
      const FoldTarget* target = conv.fold_target();
      const std::vector<Shape> in = plan.InputShapes(f.conv);
      if (s.size() != 4 || plan.shape(z) != Shape{s[0], s[1] / 2, s[2] / 2, s[3]} || s[1] < 2 ||
          s[2] < 2 || !plan.internal(y) || plan.split(y) || plan.split(z) || !target ||
          !plan.SamePrecision(f.conv, {f.pool}) || !plan.RunsWhole(f.conv, in) ||
          !target->TakesPool(plan.StorageCtx(f.conv), in))
        continue;
      AttachPool(plan.attachments(f.conv), z);
      plan.SetOutShapes(f.conv, {plan.shape(z)});
      plan.Absorb(f.pool, f.conv);
      plan.Elide(y);
    }
  }

 private:
  std::vector<PoolFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakePoolPass() { return std::make_unique<PoolPass>(); }

}  // namespace clgpu
