// Squeeze tails: an int8 squeeze (a MEAN or whole-image AVERAGE_POOL_2D whose dense ops, and
// SOFTMAX, fusion/squeeze.cc folded in) whose input only it reads: the output of an int8 CONV_2D
// (or what the conv's folded clamp or epilogue writes instead), one image, not a partition
// output. The convolution's GEMM adds each tile's column sums as it stores them and its last tile
// runs the squeeze (AttachSqueezeTail, kernels/gemm_int8.cl's TAIL_SQUEEZE): a classifier's last
// convolution and its head in one launch, and the convolution's output never written. After the
// squeeze pass (the head must be one kernel already) and the expand and pool passes (a
// convolution that runs the block kernel of a folded expand, or took a pool, stays apart).
#include <map>

#include "fusion/pass.h"
#include "ops/gemm_int8.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct TailFusion {
  size_t conv = 0, mean = 0;
};

std::vector<TailFusion> FindTailFusions(const FoldGraph& fg, const Folds& folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  std::vector<TailFusion> out;
  if (!Int8GemmTakesSqueezeTail(fg.dev)) return out;
  std::map<int, size_t> writer;  // what an int8 conv's kernel writes, with its folds so far
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    for (int t : n.inputs) ++reads[t];
    if (n.op != tfl::kConv2d || n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) ||
        g.value_type(n.outputs[0]) != ValueType::kInt8 || folds.folded.count(i))
      continue;
    // A folded depthwise with a folded expand runs the block kernel: no tail there.
    const auto dw = folds.depthwise_of.find(i);
    if (dw != folds.depthwise_of.end() && folds.expand_of.count(dw->second)) continue;
    writer[WrittenAs(folds.written_instead, n.outputs[0])] = i;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    // The squeeze pass marks the MEAN of each squeeze it folds as one kernel.
    if (folds.folded.count(i) || !folds.one_kernel.count(i) || nodes[i].inputs.empty() ||
        (nodes[i].op != tfl::kMean && nodes[i].op != tfl::kAveragePool2d))
      continue;
    const int x = nodes[i].inputs[0];
    const auto w = writer.find(x);
    if (w == writer.end() || w->second >= i || reads[x] != 1 || fg.outputs.count(x)) continue;
    const Shape s = g.shape(x);
    if (s.size() != 4 || s[0] != 1) continue;
    out.push_back(TailFusion{w->second, i});
  }
  return out;
}

class SqueezeTailPass : public FusionPass {
 public:
  const char* name() const override { return "squeeze_tail"; }
  // The cost model keeps counting the head as a kernel of its own: folded, it saves the host a
  // launch, but the device then runs the head after the GEMM's tiles in one group, and on the
  // H200 the invoke came out 0.98-1.00x of the two launches (the wait after the last command
  // grew by what the enqueue lost: bench/results/ab-options-squeeze-tail-NVIDIA_H200.md).
  void Find(const FoldGraph& g, Folds* folds) override { found_ = FindTailFusions(g, *folds); }
  // Each squeeze folds into its conv for this plan's shapes (its dense ops folded in this plan
  // too, both whole buffers), or both stay as they are.
  void Apply(FoldPlan& plan) override {
    for (const TailFusion& f : found_) {
      if (plan.absorbed(f.conv) || plan.absorbed(f.mean)) continue;
      Op& conv = plan.op(f.conv);
      Op& mean = plan.op(f.mean);
      const Attachments& a = plan.attachments(f.conv);
      const Attachments& m = plan.attachments(f.mean);
      if (a.outputs.size() != 1 || m.inputs.size() != 1 || m.inputs[0] != a.outputs[0] ||
          m.outputs.size() != 1 || mean.squeeze_dense().empty())
        continue;
      const int y = a.outputs[0], z = m.outputs[0];
      const FoldTarget* target = conv.fold_target();
      const std::vector<Shape> in = plan.InputShapes(f.conv);
      Int8MeanStage stage;
      if (!plan.internal(y) || plan.split(y) || plan.split(z) || !target || !mean.fold_source() ||
          !mean.fold_source()->GetInt8MeanStage(plan.shape(y), &stage) ||
          !plan.SamePrecision(f.conv, {f.mean}) || !plan.RunsWhole(f.conv, in) ||
          !target->TakesSqueezeTail(plan.StorageCtx(f.conv), in))
        continue;
      AttachSqueezeTail(plan.attachments(f.conv), &mean, plan.shape(y), z);
      plan.SetOutShapes(f.conv, {plan.shape(z)});
      plan.Absorb(f.mean, f.conv);
      plan.Elide(y);
    }
  }

 private:
  std::vector<TailFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeSqueezeTailPass() { return std::make_unique<SqueezeTailPass>(); }

}  // namespace clgpu
