// Concatenation folds: a float CONCATENATION whose inputs are each the output of a CONV_2D (or
// what its folded clamp or epilogue writes instead) that only the concatenation reads, or a
// flat copy (RESHAPE) of one. Each convolution writes its rows straight into the concatenation's
// tensor, at that tensor's row pitch and its own offset (AttachOutputSlice, kernels/gemm_tiles.cl's
// OUT_SLICE), so the concatenation and the flat copies launch nothing and the inputs are never
// written: an Inception block's branches, a Fire module's two expands, a detector's heads. Along
// the last axis (channels; a flat copy must keep the rows), or along any axis whose dims before
// it are 1 (each input one block of the output). All inputs or none: one left over would keep the
// copy's launch. Where the convolutions run one of the GEMMs (FoldTarget::TakesOutputSlice), a
// depthwise folded in or not; after the folds that change what a convolution writes.
#include "fusion/concat.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

#include "ops/conv2d_selector.h"
#include "ops/op_handler.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct ConcatFusion {
  size_t concat = 0;
  int axis = 0;  // as the node gives it (negative: from the end)
};

bool FlatCopy(const NodeInfo& n) {
  const OpHandler* h = FindOpHandler(n.op);
  return h && h->flat_copy && !n.inputs.empty() && n.outputs.size() == 1;
}

}  // namespace

std::optional<int> ConcatAxis(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kConcatenation || !n.builtin_data || n.inputs.size() < 2 ||
      n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) ||
      g.value_type(n.outputs[0]) != ValueType::kFloat)
    return std::nullopt;
  tfl::ConcatenationParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  if (p.activation != tfl::kActNone) return std::nullopt;
  return p.axis;
}

namespace {

// Where each input's values go in their concatenation along `axis`, as rows of `rows[k]` values
// (what its convolution writes; a flat copy may regroup them): the output's pitch between rows
// and each input's offset. False where the concatenation is not rows of that kind, or its
// indices pass an int.
bool Slices(const std::vector<Shape>& in, const std::vector<int>& rows, const Shape& out, int axis,
            std::vector<std::pair<int, int>>* ldc_offset) {
  const int r = static_cast<int>(out.size());
  if (r == 0) return false;
  const int a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r || NumElements(out) > std::numeric_limits<int>::max()) return false;
  int64_t outer = 1;
  for (int d = 0; d < a; ++d) outer *= out[d];
  const bool last = a == r - 1;
  if (!last && outer != 1) return false;
  int64_t offset = 0;
  ldc_offset->clear();
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape& s = in[k];
    if (s.size() != out.size() || rows.at(k) <= 0 || (last && rows[k] != s.back())) return false;
    int64_t inner = 1;  // this input's elements per step of the outer dims
    for (int d = a; d < r; ++d) inner *= s[d];
    if (inner % rows[k]) return false;
    // Along the last axis its rows land `offset` channels in; else it is one block there.
    ldc_offset->emplace_back(last ? out.back() : rows[k], static_cast<int>(offset));
    offset += inner;
  }
  return offset == (last ? out.back() : NumElements(out));
}

}  // namespace

std::map<int, size_t> SliceWriters(const FoldGraph& fg, const Folds* folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  std::map<int, size_t> writer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (n.op != tfl::kConv2d || n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) ||
        g.value_type(n.outputs[0]) != ValueType::kFloat || folds->folded.count(i))
      continue;
    // A folded depthwise runs the implicit GEMM, one with its expand too the block kernel; else
    // what the default would run it with (the plan asks the op itself).
    const auto dw = folds->depthwise_of.find(i);
    const std::optional<ConvGeometry> cg = GraphConvGeometry(g, n);
    if (dw != folds->depthwise_of.end() ? folds->expand_of.count(dw->second) > 0
                                        : !cg || cg->groups != 1)
      continue;
    const ConvAlgorithm a = dw != folds->depthwise_of.end() ? ConvAlgorithm::kImplicitGemm
                                                            : SelectConvAlgorithm(*cg, fg.dev, "");
    if (GemmWritesSlices(a, fg.dev, *cg))
      writer[WrittenAs(folds->written_instead, n.outputs[0])] = i;
  }
  return writer;
}

bool WritesIntoConcat(FoldPlan& plan, size_t p, int t) {
  const Attachments& a = plan.attachments(p);
  const FoldTarget* target = plan.op(p).fold_target();
  const std::vector<Shape> in = plan.InputShapes(p);
  return !plan.absorbed(p) && a.outputs.size() == 1 && a.outputs[0] == t && !a.out_view.on &&
         !a.pool.on && !a.out_slice.on && target && plan.RunsWhole(p, in) &&
         target->TakesOutputSlice(plan.Ctx(p), in);
}

namespace {

std::vector<ConcatFusion> FindConcatFusions(const FoldGraph& fg, Folds* folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  const std::map<int, size_t> writer = SliceWriters(fg, folds);
  std::map<int, size_t> flat;  // a flat copy's output -> the copy
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    for (int t : n.inputs) ++reads[t];
    if (FlatCopy(n) && !folds->folded.count(i)) flat[n.outputs[0]] = i;
  }
  std::vector<ConcatFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::optional<int> axis = ConcatAxis(g, nodes[i]);
    if (!axis || folds->folded.count(i)) continue;
    bool all = true;
    std::vector<Shape> shapes;
    std::vector<int> rows;
    std::vector<size_t> copies;
    for (int t : nodes[i].inputs) {
      // Through a flat copy (Slices checks what it does to the rows).
      int u = t;
      if (const auto f = flat.find(t); f != flat.end() && !writer.count(t)) {
        u = nodes[f->second].inputs[0];
        all = all && reads[t] == 1 && !fg.outputs.count(t) && f->second < i && g.valid_tensor(u);
        copies.push_back(f->second);
      }
      const auto w = writer.find(u);
      all = all && w != writer.end() && w->second < i && reads[u] == 1 && !fg.outputs.count(u) &&
            !g.shape(u).empty();
      if (!all) break;
      shapes.push_back(g.shape(t));
      rows.push_back(g.shape(u).back());
    }
    std::vector<std::pair<int, int>> slices;
    if (all && Slices(shapes, rows, g.shape(nodes[i].outputs[0]), *axis, &slices)) {
      out.push_back(ConcatFusion{i, *axis});
      for (size_t f : copies) folds->folded.insert(f);
    }
  }
  return out;
}

class ConcatPass : public FusionPass {
 public:
  const char* name() const override { return "concat"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindConcatFusions(g, folds);
    for (const ConcatFusion& f : found_) folds->folded.insert(f.concat);
  }
  // Each concatenation whose producers all take their slices in this plan (whole buffers, one
  // storage type, only the concatenation reading them) folds; else it copies as before.
  void Apply(FoldPlan& plan) override {
    for (const ConcatFusion& f : found_) {
      if (plan.absorbed(f.concat)) continue;
      const Attachments& c = plan.attachments(f.concat);
      if (c.outputs.size() != 1) continue;
      const int z = c.outputs[0];
      std::vector<size_t> producers, copies;  // copies: a flat copy between, or SIZE_MAX
      std::vector<int> written, rows;         // what each producer writes now, its last dim
      std::vector<Shape> shapes;
      bool all = plan.Fits(z) && !plan.split(z);
      for (int t : c.inputs) {
        int readers = 0;
        int p = all ? plan.Producer(t, &readers) : -1;
        all = p >= 0 && size_t(p) < f.concat && readers == 1 && plan.internal(t) && !plan.split(t);
        if (!all) break;
        int u = t;
        size_t copy = SIZE_MAX;
        if (plan.op(size_t(p)).IsFlatCopy() && !plan.attachments(size_t(p)).inputs.empty()) {
          copy = size_t(p);
          u = plan.attachments(copy).inputs[0];
          p = plan.Producer(u, &readers);
          all = p >= 0 && readers == 1 && plan.internal(u) && !plan.split(u);
          if (!all) break;
        }
        all = !plan.shape(u).empty() && WritesIntoConcat(plan, size_t(p), u);
        if (!all) break;
        producers.push_back(size_t(p)), copies.push_back(copy), written.push_back(u);
        shapes.push_back(plan.shape(t)), rows.push_back(plan.shape(u).back());
      }
      std::vector<size_t> ops = producers;
      for (size_t copy : copies)
        if (copy != SIZE_MAX) ops.push_back(copy);
      std::vector<std::pair<int, int>> slices;
      if (!all || !plan.SamePrecision(f.concat, ops) ||
          !Slices(shapes, rows, plan.shape(z), f.axis, &slices))
        continue;
      for (size_t k = 0; k < producers.size(); ++k) {
        AttachOutputSlice(plan.attachments(producers[k]), z, slices[k].first, slices[k].second);
        plan.Elide(written[k]);
        if (copies[k] != SIZE_MAX) plan.Absorb(copies[k], producers[k]), plan.Elide(c.inputs[k]);
      }
      plan.Absorb(f.concat, producers.back());
    }
  }

 private:
  std::vector<ConcatFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeConcatPass() { return std::make_unique<ConcatPass>(); }

}  // namespace clgpu
