// View folds: TRANSPOSE / RESHAPE chains (and a scale) between a matmul's operand and the tensor
// it comes from, or between its output and the tensor it ends in, read or written in place
// through strides (ops/matmul_views.h: the chains found there), where this plan's shapes make
// them views and the tensors fit one buffer each (pieces are planned after). Only ops whose
// FoldTarget::TakesViews() is true take them.
#include <algorithm>

#include "fusion/pass.h"
#include "ops/matmul_views.h"

namespace clgpu {
namespace {

class ViewsPass : public FusionPass {
 public:
  const char* name() const override { return "views"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindViewFusions(g.g, g.nodes, g.outputs);
    for (const ViewFusion& f : found_) folds->folded.insert(f.absorbed.begin(), f.absorbed.end());
  }
  void Apply(FoldPlan& plan) override {
    auto shape_of = [&](int t) { return plan.shape(t); };
    for (const ViewFusion& f : found_) {
      Op& op = plan.op(f.op);
      const FoldTarget* target = op.fold_target();
      bool free = target && target->TakesViews() && !plan.absorbed(f.op);
      for (size_t a : f.absorbed) free = free && !plan.absorbed(a);
      free = free && plan.SamePrecision(f.op, f.absorbed);
      // The op then reads and writes whole tensors, each within one buffer: no chunks.
      auto fits = [&](int t) {
        return !plan.split(t) &&
               size_t(NumElements(plan.shape(t))) * std::max(plan.storage_bytes(), plan.bytes(t)) <=
                   plan.max_alloc();
      };
      free = free && fits(f.tensor);
      for (int t : op.inputs()) free = free && fits(t);
      for (int t : op.outputs()) free = free && fits(t);
      if (!free) continue;
      StridedView view;
      float scale = 1.0f;
      if (!ChainView(f, shape_of, &view, &scale)) continue;
      if (f.operand >= 0) {
        AttachInputView(plan.attachments(f.op), static_cast<size_t>(f.operand), f.tensor,
                        std::move(view));
      } else {
        if (op.has_output_view() || op.has_epilogue() || op.has_folded_clamp() || op.has_residual())
          continue;
        AttachOutputView(plan.attachments(f.op), f.tensor, std::move(view), scale);
      }
      for (size_t a : f.absorbed) plan.Absorb(a, f.op);
      for (int t : f.intermediates) plan.Elide(t);
    }
  }

 private:
  std::vector<ViewFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeViewsPass() { return std::make_unique<ViewsPass>(); }

}  // namespace clgpu
