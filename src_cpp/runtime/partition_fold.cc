// Folding ops into others for one plan (runtime/partition.h): residual ADDs, clamps and
// element-wise epilogues into their producer, TRANSPOSE / RESHAPE chains into a matmul as views,
// the dense ops after a MEAN into it (squeezes), and a depthwise convolution into the pointwise
// one after it. Each is undone at the start of the next plan.
#include <algorithm>

#include "ops/conv2d_selector.h"
#include "ops/fusion.h"
#include "ops/gemm_int8.h"
#include "ops/matmul_views.h"
#include "ops/squeeze.h"
#include "runtime/partition.h"
#include "runtime/split.h"

namespace clgpu {

// Folds each eligible ADD into its conv for the shapes of this plan (out_shapes_ are those of
// the ops unfused), or leaves both as they are: when fusion is off, the operands' shapes differ
// now (a resize made the ADD broadcast) or the conv cannot take a residual.
void Partition::FuseResiduals(const OpContext& octx) {
  const RuntimeSettings& o = host_->settings();
  // capture_tensors reads every activation back, the conv's own output included.
  if (!o.fuse_add || o.capture_tensors) return;
  for (const ResidualFusion& f : fusions_) {
    Op& conv = *ops_[f.producer];
    const Op& add = *ops_[f.add];
    const int y = conv.outputs()[0], z = add.outputs()[0];
    const Shape& s = values_.at(y).shape;
    std::vector<Shape> in;
    for (int t : conv.inputs()) in.push_back(values_.at(t).shape);
    ResidualAdd r;
    if (conv.has_folded_clamp() || conv.has_epilogue() || add.has_epilogue() ||
        !SamePrecision(f.producer, {f.add}) || !add.IsResidualAdd(f.residual, &r) ||
        values_.at(f.residual).shape != s || values_.at(z).shape != s ||
        !conv.CanFuseResidual(StorageCtx(octx, f.producer), in))
      continue;
    conv.FuseResidual(f.residual, z, r);
    out_shapes_[f.producer] = {s};
    Absorb(f.add, f.producer);
    values_.at(y).elided = true;
  }
}

// Folds each clamp activation into the op producing its input (before FuseResiduals: an ADD that
// took a clamp folds into its conv with it). Off with capture_tensors, which reads every tensor.
void Partition::FoldClamps() {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  for (const ClampFusion& f : clamps_) {
    Op& producer = *ops_[f.producer];
    const int y = producer.outputs()[0], z = ops_[f.act]->outputs()[0];
    if (absorbed_[f.producer] || values_.at(y).shape != values_.at(z).shape ||
        !SamePrecision(f.producer, {f.act}) || !producer.FoldClamp(z, f.lo, f.hi))
      continue;
    Absorb(f.act, f.producer);
    values_.at(y).elided = true;
  }
}

// Folds element-wise ops into their producer's kernels (after FoldClamps, before FuseResiduals,
// which leaves an op with an epilogue alone). Off like the other fusions.
void Partition::FoldEpilogues() {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  for (const EpilogueFusion& f : epilogues_) {
    Op& producer = *ops_[f.producer];
    if (absorbed_[f.producer]) continue;
    bool free = true;
    for (size_t a : f.absorbed) free = free && !absorbed_[a];
    const Shape& s = values_.at(producer.outputs()[0]).shape;
    const Shape& z = values_.at(f.output).shape;
    if (!free || !SamePrecision(f.producer, f.absorbed) ||
        (f.copies ? NumElements(z) != NumElements(s) : z != s) ||
        !(f.kind == kTableEpilogue ? producer.FoldTable(f.output, f.table)
                                   : producer.FoldEpilogue(f.output, f.kind, f.alpha, f.post)))
      continue;
    for (size_t a : f.absorbed) Absorb(a, f.producer);
    for (int t : f.intermediates) values_.at(t).elided = true;
  }
}

// Folds the dense ops after a MEAN over one image's H and W into it (ops/squeeze.h), last of
// the folds: the dense ops' tables are folded by then. The chain: the MEAN's output, through
// RESHAPEs (and kin), read by one dense op alone, whose output may feed one more the same way;
// no tensor of it a partition output or kept in pieces. Off like the other fusions.
void Partition::FoldSqueezes(const OpContext& octx) {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  // The one op (not folded away) reading t, or -1 when none or several do, or t leaves the
  // partition or is too large for one buffer.
  auto only_reader = [&](int t) -> int {
    const Value& v = values_.at(t);
    if (v.is_partition_output || v.kind != Kind::kInternal ||
        size_t(NumElements(v.shape)) * ElemBytes(t) > octx.max_alloc)
      return -1;
    int reader = -1;
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (absorbed_[j]) continue;
      const auto& in = ops_[j]->inputs();
      if (std::count(in.begin(), in.end(), t) == 0) continue;
      if (reader >= 0 || in.size() != 1) return -1;
      reader = static_cast<int>(j);
    }
    return reader;
  };
  // Follows t through flat copies to the op that is not one: its index, the copies and the
  // tensors passed on the way in `absorbed` and `elided`.
  auto next_op = [&](int t, std::vector<size_t>* absorbed, std::vector<int>* elided) -> int {
    for (;;) {
      const int j = only_reader(t);
      if (j < 0) return -1;
      elided->push_back(t);
      const Op& op = *ops_[j];
      if (!op.IsFlatCopy()) return j;
      if (op.outputs().size() != 1) return -1;
      absorbed->push_back(size_t(j));
      t = op.outputs()[0];
    }
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& mean = *ops_[i];
    if (absorbed_[i] || mean.inputs().size() != 1 || mean.outputs().size() != 1) continue;
    const Shape& in = values_.at(mean.inputs()[0]).shape;
    const Value& x = values_.at(mean.inputs()[0]);
    const SqueezeType type = x.split() ? SqueezeType::kNone : mean.TakesSqueeze(in);
    if (type == SqueezeType::kNone) continue;
    std::vector<size_t> absorbed;
    std::vector<int> elided;
    std::vector<Op*> dense;
    int channels = static_cast<int>(NumElements(values_.at(mean.outputs()[0]).shape));
    int t = mean.outputs()[0];
    for (int layer = 0; layer < 2; ++layer) {
      std::vector<size_t> a = absorbed;
      std::vector<int> e = elided;
      const int j = next_op(t, &a, &e);
      if (j < 0) break;
      Op& d = *ops_[j];
      OpContext dctx = OpCtx(octx, size_t(j));
      int n = 0;
      if (d.outputs().size() != 1) break;
      if (type == SqueezeType::kInt8) {
        Int8Dense form;
        if (!d.GetInt8Dense(dctx, {1, channels}, &form) || !SqueezeDenseFits(form.w->n, form.w->kp))
          break;
        n = form.w->n;
      } else {
        FloatDense form;
        if (!d.GetFloatDense(dctx, {1, channels}, &form) ||
            !SqueezeDenseFits(form.n, form.k, dctx.storage_bytes) ||
            form.n > kMaxFloatSqueezeVector || form.k > kMaxFloatSqueezeVector)
          break;
        n = form.n;
      }
      absorbed = std::move(a), elided = std::move(e);
      absorbed.push_back(size_t(j));
      dense.push_back(&d);
      channels = n;
      t = d.outputs()[0];
    }
    if (dense.empty() || !SamePrecision(i, absorbed)) continue;
    mean.FoldSqueeze(dense, t);
    out_shapes_[i] = {values_.at(t).shape};
    for (size_t a : absorbed) Absorb(a, i);
    for (int e : elided) values_.at(e).elided = true;
  }
}

// Folds each depthwise convolution into the pointwise convolution that alone reads its output
// (Op::FoldDepthwise: the GEMM computes its A from the depthwise's input; int8 or float), last
// of the folds:
// the pointwise op's residual ADD and table are folded by then, and a depthwise with folds of its
// own stays apart. The tensor between them is internal and never written; neither op may run in
// chunks. Off like the other fusions.
void Partition::FoldDepthwise(const OpContext& octx) {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  auto fits = [&](int t) {
    return size_t(NumElements(values_.at(t).shape)) * ElemBytes(t) <= octx.max_alloc;
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& pw = *ops_[i];
    if (absorbed_[i] || pw.inputs().empty() || pw.folded_depthwise()) continue;
    const int t = pw.inputs()[0];
    const Value& between = values_.at(t);
    if (between.is_partition_output || between.kind != Kind::kInternal) continue;
    // Its producer, and no reader besides pw's input 0.
    int producer = -1, readers = 0;
    for (size_t j = 0; j < ops_.size(); ++j) {
      if (absorbed_[j]) continue;
      for (int u : ops_[j]->outputs()) producer = u == t ? int(j) : producer;
      for (int u : ops_[j]->inputs()) readers += u == t;
    }
    if (producer < 0 || readers != 1 || ops_[producer]->outputs().size() != 1) continue;
    Op& dw = *ops_[producer];
    const int x = dw.inputs().empty() ? -1 : dw.inputs()[0];
    if (x < 0 || dw.inputs().size() != 1 || !fits(x) || !fits(t) || !fits(pw.outputs()[0]) ||
        !SamePrecision(i, {size_t(producer)}))
      continue;
    std::vector<Shape> in;
    for (int u : pw.inputs()) in.push_back(values_.at(u).shape);
    OpContext pctx = OpCtx(octx, i), dctx = OpCtx(octx, size_t(producer));
    Int8DepthwiseA int8_form;
    FloatDepthwiseA float_form;
    ChunkPlan chunks;
    const Shape& xs = values_.at(x).shape;
    if (!pw.TakesDepthwise(pctx, in) ||
        !(dw.GetInt8Depthwise(dctx, xs, &int8_form) ||
          dw.GetFloatDepthwise(dctx, xs, &float_form)) ||
        !PlanOpChunks(pctx, pw, in, out_shapes_[i], octx.max_alloc, &chunks).empty() ||
        !chunks.out.empty())
      continue;
    pw.FoldDepthwise(&dw, x, between.shape);
    Absorb(size_t(producer), i);
    values_.at(t).elided = true;
    FoldExpand(octx, i, float_form.filter ? float_form.g : int8_form.g, bool(float_form.filter));
  }
}

// After op i took a depthwise (of geometry dg): the 1x1 convolution writing the depthwise's input,
// which nothing else reads, folded in too where ExpandFoldPays (Op::FoldExpand; the float or the
// int8 GEMM, `float_gemm`). Its input then feeds op i; the tensor between is never written.
void Partition::FoldExpand(const OpContext& octx, size_t i, const ConvGeometry& dg,
                           bool float_gemm) {
  Op& pw = *ops_[i];
  const int x = pw.inputs()[0];
  const Value& v = values_.at(x);
  if (v.is_partition_output || v.kind != Kind::kInternal) return;
  int producer = -1, readers = 0;
  for (size_t j = 0; j < ops_.size(); ++j) {
    if (absorbed_[j]) continue;
    for (int u : ops_[j]->outputs()) producer = u == x ? int(j) : producer;
    for (int u : ops_[j]->inputs()) readers += u == x;
  }
  if (producer < 0 || readers != 1) return;
  Op& ex = *ops_[producer];
  if (ex.inputs().size() != 1 || ex.outputs().size() != 1 || ex.folded_depthwise() ||
      ex.has_residual() || ex.has_epilogue() || ex.has_output_view() ||
      !SamePrecision(i, {size_t(producer)}))
    return;
  const int e_in = ex.inputs()[0];
  const Shape es = values_.at(e_in).shape;
  if (es.size() != 4 || values_.at(e_in).split() ||
      size_t(NumElements(es)) * ElemBytes(e_in) > octx.max_alloc ||
      !ExpandFoldPays(octx.env.device(), dg, es[3], values_.at(pw.outputs()[0]).shape.back()))
    return;
  OpContext ectx = OpCtx(octx, size_t(producer));
  if (float_gemm) {
    FloatDense e;
    if (!ex.GetFloatDense(ectx, {1, 1, 1, es[3]}, &e) || !e.epilogue.empty() || e.n != dg.c ||
        e.k != es[3])
      return;
  } else {
    Int8Dense e;
    if (es[3] % 4 || !ex.GetInt8Dense(ectx, {1, 1, 1, es[3]}, &e) || !e.stage.table.empty() ||
        e.w->n != dg.c || e.w->k != es[3] || e.w->kp != es[3])
      return;
  }
  pw.FoldExpand(&ex, e_in, v.shape);
  Absorb(size_t(producer), i);
  values_.at(x).elided = true;
}

// Folds TRANSPOSE / RESHAPE chains (and a scale) into the matmul they feed or follow, as strided
// views (ops/matmul_views.h), where this plan's shapes make them views and the tensor read or
// written fits one buffer (pieces are planned after). Off like the other fusions.
void Partition::FoldViews(const OpContext& octx) {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  auto shape_of = [&](int t) { return values_.at(t).shape; };
  for (const ViewFusion& f : views_) {
    Op& op = *ops_[f.op];
    bool free = op.TakesViews() && !absorbed_[f.op];
    for (size_t a : f.absorbed) free = free && !absorbed_[a];
    free = free && SamePrecision(f.op, f.absorbed);
    // The op then reads and writes whole tensors, each within one buffer: no chunks.
    auto fits = [&](int t) {
      const Value& v = values_.at(t);
      return !v.split() &&
             NumElements(v.shape) * std::max(octx.storage_bytes, ElemBytes(t)) <= octx.max_alloc;
    };
    free = free && fits(f.tensor);
    for (int t : op.inputs()) free = free && fits(t);
    for (int t : op.outputs()) free = free && fits(t);
    if (!free) continue;
    StridedView view;
    float scale = 1.0f;
    if (!ChainView(f, shape_of, &view, &scale)) continue;
    if (f.operand >= 0) {
      op.FoldInputView(static_cast<size_t>(f.operand), f.tensor, std::move(view));
    } else {
      if (op.has_output_view() || op.has_epilogue() || op.has_folded_clamp() || op.has_residual())
        continue;
      op.FoldOutputView(f.tensor, std::move(view), scale);
    }
    for (size_t a : f.absorbed) Absorb(a, f.op);
    for (int t : f.intermediates) values_.at(t).elided = true;
  }
}

}  // namespace clgpu
