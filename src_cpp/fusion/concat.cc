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
//
// Chains (DenseNet's dense blocks): a concatenation along the last axis whose input 0 is the
// previous one's output, its other inputs convolutions' as above. The chain's concatenations all
// live in the last one's tensor, each the first columns of its rows (FoldPlan::Alias): the
// convolutions write their columns there, the links launch nothing, and the chain's first
// concatenation copies its inputs into the first columns at the wider pitch. What reads a link's
// output reads it at that pitch (FoldTarget::TakesInputPitch: the GEMMs' A loads), so each is
// written once instead of copied into every later one. A link whose output another op reads
// otherwise ends the chain there.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "fusion/pass.h"
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

// The node's axis when it is a float CONCATENATION without an activation; else nothing.
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

// What each float convolution's kernel writes, with its folds so far -> the convolution, where
// it can write into a concatenation's tensor.
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

// A chain of concatenations extended in place: concats[0] runs, at the last one's pitch; the
// others (links) launch nothing.
struct ConcatChain {
  std::vector<size_t> concats;
};

std::vector<ConcatChain> FindConcatChains(const FoldGraph& fg, Folds* folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  const std::map<int, size_t> writer = SliceWriters(fg, folds);
  const TensorUses uses(nodes);
  auto last_axis = [&](size_t i) {
    const std::optional<int> a = ConcatAxis(g, nodes[i]);
    if (!a || folds->folded.count(i)) return false;
    const int r = static_cast<int>(g.shape(nodes[i].outputs[0]).size());
    return r > 0 && (*a == -1 || *a == r - 1);
  };
  // Whether every reader of t but `next` could read it at a pitch: a convolution's input 0, or
  // a MUL / ADD an earlier pass folded (fusion/affine.cc's per-channel nodes, read through by
  // the convolution after them). The plan asks the ops themselves.
  auto pitched_readers = [&](int t, size_t next) {
    const auto r = uses.readers.find(t);
    if (r == uses.readers.end() || fg.outputs.count(t)) return false;
    for (size_t j : r->second) {
      if (j == next) continue;
      const NodeInfo& n = nodes[j];
      if (folds->folded.count(j) ? n.op != tfl::kMul && n.op != tfl::kAdd
                                 : !ConvReadingInput(g, n, t))
        return false;
    }
    return true;
  };
  // Concat i as a link: the concat it extends, or nothing.
  auto extends = [&](size_t i) -> std::optional<size_t> {
    if (!last_axis(i)) return std::nullopt;
    const NodeInfo& n = nodes[i];
    const int x = n.inputs[0];
    const auto p = uses.producer.find(x);
    if (p == uses.producer.end() || p->second >= i || !last_axis(p->second) ||
        std::count(n.inputs.begin(), n.inputs.end(), x) != 1 || !pitched_readers(x, i))
      return std::nullopt;
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      const auto w = writer.find(n.inputs[k]);
      const auto r = uses.readers.find(n.inputs[k]);
      if (w == writer.end() || w->second >= i || r == uses.readers.end() || r->second.size() != 1 ||
          fg.outputs.count(n.inputs[k]))
        return std::nullopt;
    }
    return p->second;
  };
  std::map<size_t, size_t> next;  // a concat -> the link extending it
  std::set<size_t> links;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (const std::optional<size_t> p = extends(i)) next[*p] = i, links.insert(i);
  std::vector<ConcatChain> out;
  for (const auto& [head, link] : next) {
    if (links.count(head)) continue;
    ConcatChain c{{head}};
    for (auto n = next.find(head); n != next.end(); n = next.find(n->second)) {
      c.concats.push_back(n->second);
      folds->folded.insert(n->second);
    }
    out.push_back(std::move(c));
  }
  return out;
}

class ConcatPass : public FusionPass {
 public:
  const char* name() const override { return "concat"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindConcatFusions(g, folds);
    for (const ConcatFusion& f : found_) folds->folded.insert(f.concat);
    chains_ = FindConcatChains(g, folds);
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
        all = !plan.shape(u).empty() && Writes(plan, size_t(p), u);
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
    for (const ConcatChain& c : chains_) ApplyChain(plan, c);
  }

 private:
  // Whether op p writes t as it is, whole, and can write it into a concatenation instead.
  static bool Writes(FoldPlan& plan, size_t p, int t) {
    const Attachments& a = plan.attachments(p);
    const FoldTarget* target = plan.op(p).fold_target();
    const std::vector<Shape> in = plan.InputShapes(p);
    return !plan.absorbed(p) && a.outputs.size() == 1 && a.outputs[0] == t && !a.out_view.on &&
           !a.pool.on && !a.out_slice.on && target && plan.RunsWhole(p, in) &&
           target->TakesOutputSlice(plan.Ctx(p), in);
  }

  // A link's fit: `prev` (the chain so far ends there) whose output `cur` extends, the ops
  // writing cur's other inputs, and those reading prev's output but cur (at the pitch, then).
  struct Link {
    std::vector<size_t> producers, readers;
  };
  static std::optional<Link> LinkFits(FoldPlan& plan, size_t prev, size_t cur, bool head) {
    if (plan.absorbed(prev) || plan.absorbed(cur)) return std::nullopt;
    const Attachments &p = plan.attachments(prev), &c = plan.attachments(cur);
    if (p.outputs.size() != 1 || c.outputs.size() != 1 || c.inputs.size() < 2 ||
        c.inputs[0] != p.outputs[0] || p.out_slice.on)
      return std::nullopt;
    const int x = p.outputs[0], z = c.outputs[0];
    if (!plan.internal(x) || plan.split(x) || !plan.Fits(z) || plan.split(z) ||
        plan.shape(x).empty() || plan.shape(z).size() != plan.shape(x).size())
      return std::nullopt;
    if (head && (!plan.RunsWhole(prev, plan.InputShapes(prev)) || p.inputs.empty()))
      return std::nullopt;
    Link link;
    std::vector<size_t> ops = {prev};
    for (size_t k = 1; k < c.inputs.size(); ++k) {
      int readers = 0;
      const int t = c.inputs[k];
      const int w = plan.Producer(t, &readers);
      if (w < 0 || size_t(w) >= cur || readers != 1 || !plan.internal(t) || plan.split(t) ||
          plan.shape(t).empty() || !Writes(plan, size_t(w), t))
        return std::nullopt;
      link.producers.push_back(size_t(w));
    }
    for (size_t j = 0; j < plan.size(); ++j) {
      if (j == cur || plan.absorbed(j)) continue;
      const std::vector<int>& in = plan.attachments(j).inputs;
      const long uses = std::count(in.begin(), in.end(), x);
      if (!uses) continue;
      const FoldTarget* target = plan.op(j).fold_target();
      const std::vector<Shape> shapes = plan.InputShapes(j);
      if (j < prev || uses != 1 || in[0] != x || !target ||
          !target->TakesInputPitch(plan.Ctx(j), shapes) || !plan.RunsWhole(j, shapes))
        return std::nullopt;
      link.readers.push_back(j);
    }
    ops.insert(ops.end(), link.producers.begin(), link.producers.end());
    ops.insert(ops.end(), link.readers.begin(), link.readers.end());
    if (!plan.SamePrecision(cur, ops)) return std::nullopt;
    return link;
  }

  // The longest runs of the chain whose links fit, each folded into its last tensor.
  static void ApplyChain(FoldPlan& plan, const ConcatChain& chain) {
    std::vector<size_t> run = {chain.concats[0]};
    std::vector<Link> links;
    for (size_t k = 1; k <= chain.concats.size(); ++k) {
      std::optional<Link> l;
      if (k < chain.concats.size())
        l = LinkFits(plan, run.back(), chain.concats[k], run.size() == 1);
      if (l) {
        run.push_back(chain.concats[k]), links.push_back(std::move(*l));
        continue;
      }
      if (!links.empty()) FoldRun(plan, run, links);
      if (k < chain.concats.size()) run = {chain.concats[k]}, links.clear();
    }
  }

  static void FoldRun(FoldPlan& plan, const std::vector<size_t>& run,
                      const std::vector<Link>& links) {
    const int z = plan.attachments(run.back()).outputs[0];
    const int pitch = plan.shape(z).back();
    std::vector<int> kept;  // each concatenation's output but the last: z's first columns
    for (size_t k = 0; k + 1 < run.size(); ++k) kept.push_back(plan.attachments(run[k]).outputs[0]);
    AttachOutputSlice(plan.attachments(run[0]), kept[0], pitch, 0);
    for (size_t k = 1; k < run.size(); ++k) {
      const Link& l = links[k - 1];
      const std::vector<int> in = plan.attachments(run[k]).inputs;
      int offset = plan.shape(kept[k - 1]).back();
      for (size_t j = 1; j < in.size(); ++j) {
        AttachOutputSlice(plan.attachments(l.producers[j - 1]), z, pitch, offset);
        offset += plan.shape(in[j]).back();
        plan.Elide(in[j]);
      }
      for (size_t r : l.readers) AttachInputPitch(plan.attachments(r), pitch);
      plan.Absorb(run[k], l.producers.back());
    }
    for (int t : kept) plan.Alias(t, z);
  }

  std::vector<ConcatFusion> found_;
  std::vector<ConcatChain> chains_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeConcatPass() { return std::make_unique<ConcatPass>(); }

}  // namespace clgpu
