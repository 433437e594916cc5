// Affine folds: a float MUL by a constant per-channel vector or scalar (an input's rescale), an
// ADD of one, or a MUL and then an ADD (batch normalization before a convolution, as DenseNet and
// ResNet v2 write it), each with its fused clamp, whose output only CONV_2Ds that run the
// implicit GEMM or the plain GEMM's tiled kernels read as their input: each convolution reads
// the MUL's input and applies the nodes where it loads an element (AttachAffine,
// kernels/gemm_affine.cl's A_AFFINE), so the nodes launch nothing and their output is never
// written. Padded taps stay zero, as the convolution pads the nodes' output. A convolution that
// another algorithm runs faster (Winograd, the small-M kernel of a few pixels) keeps the nodes
// apart (its algorithm is not traded for the launch). First of the passes: a convolution that
// took the nodes takes no PAD, depthwise or residual after them.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "ops/conv2d_selector.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// One per-channel node: its other operand's tensor and its clamp.
struct Step {
  size_t node = 0;
  int x = -1, param = -1;
  float lo = 0, hi = 0;
};

struct AffineFusion {
  bool mul = false, add = false;
  Step scale, shift;          // as `mul` and `add` say
  int source = -1;            // the first node's input
  std::vector<size_t> convs;  // the readers of the last node's output
  std::vector<int> elided;    // the nodes' outputs
  // The nodes present, in graph order.
  std::vector<const Step*> Steps() const {
    std::vector<const Step*> s;
    if (mul) s.push_back(&scale);
    if (add) s.push_back(&shift);
    return s;
  }
};

// A float MUL or ADD of a 4-D NHWC value and a vector of its channels or a scalar (either
// operand), with a fused clamp: the step, else false.
bool PerChannel(const GraphView& g, const NodeInfo& n, Step* s) {
  if ((n.op != tfl::kMul && n.op != tfl::kAdd) || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      !n.builtin_data)
    return false;
  for (int t : {n.inputs[0], n.inputs[1], n.outputs[0]})
    if (!g.valid_tensor(t) || g.value_type(t) != ValueType::kFloat) return false;
  int act = 0;
  std::memcpy(&act, n.builtin_data, sizeof act);
  if (!ActivationRange(act, &s->lo, &s->hi)) return false;
  for (int i = 0; i < 2; ++i) {
    const Shape x = g.shape(n.inputs[i]), v = g.shape(n.inputs[1 - i]);
    if (x.size() != 4 || x != g.shape(n.outputs[0])) continue;
    // A constant of ones before the channels, or a scalar. (A vector the partition computes, an
    // SE block's gate, is the gate fold's: fusion/gate.cc.)
    const int64_t k = NumElements(v);
    const bool channels = !v.empty() && v.back() == x[3] && k == x[3];
    if (!(channels || (k == 1 && v.size() <= 4)) || !g.IsConstant(n.inputs[1 - i])) continue;
    s->x = n.inputs[i], s->param = n.inputs[1 - i];
    return true;
  }
  return false;
}

// A float CONV_2D that reads y as its input alone and runs one of the GEMMs here whose loads the
// nodes join: the implicit GEMM, or the plain one's tiled kernels (a 1x1 layer of a small map on
// a GPU; not the small-M kernel of a few pixels).
bool GemmReader(const GraphView& g, const NodeInfo& n, int y, const DeviceInfo& dev) {
  const std::optional<ConvGeometry> cg = ConvReadingInput(g, n, y);
  if (!cg || cg->groups != 1) return false;
  const ConvAlgorithm a = SelectConvAlgorithm(*cg, dev, "");
  return a == ConvAlgorithm::kImplicitGemm ||
         (a == ConvAlgorithm::kGemm1x1 && Gemm1x1Tiled(dev, *cg));
}

std::vector<AffineFusion> FindAffineFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                            const std::set<int>& outputs, const DeviceInfo& dev) {
  std::map<int, std::vector<size_t>> readers;
  std::map<int, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].inputs) readers[t].push_back(i);
    for (int t : nodes[i].outputs) producer[t] = i;
  }
  std::vector<AffineFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Step last;
    if (!PerChannel(g, nodes[i], &last)) continue;
    // Its output: read by convolutions alone, each once and as the input.
    const int y = nodes[i].outputs[0];
    const std::vector<size_t>& r = readers[y];
    bool convs = !r.empty() && !outputs.count(y);
    for (size_t c : r) convs = convs && c > i && GemmReader(g, nodes[c], y, dev);
    if (!convs) continue;
    AffineFusion f;
    f.convs = r;
    f.elided = {y};
    last.node = i;
    if (nodes[i].op == tfl::kMul) {
      f.mul = true, f.scale = last;
    } else {
      f.add = true, f.shift = last;
      // A MUL before the ADD whose output only the ADD reads: both.
      Step first;
      auto p = producer.find(last.x);
      if (p != producer.end() && nodes[p->second].op == tfl::kMul && !outputs.count(last.x) &&
          readers[last.x].size() == 1 && PerChannel(g, nodes[p->second], &first)) {
        first.node = p->second;
        f.mul = true, f.scale = first;
        f.elided.push_back(last.x);
      }
    }
    f.source = f.mul ? f.scale.x : f.shift.x;
    out.push_back(std::move(f));
  }
  return out;
}

class AffinePass : public FusionPass {
 public:
  const char* name() const override { return "affine"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindAffineFusions(g.g, g.nodes, g.outputs, g.dev);
    // The convolutions keep their kernel count: only those the GEMMs run anyway take the nodes
    // (GemmReader), which is what the cost model counts for them.
    for (const AffineFusion& f : found_)
      for (const Step* s : f.Steps()) folds->folded.insert(s->node);
  }
  // Every reader must take the nodes whole, in their precision, and the vectors and the source
  // must be whole values of this plan (not kept in pieces).
  void Apply(FoldPlan& plan) override {
    for (const AffineFusion& f : found_) {
      std::vector<size_t> nodes;
      bool ok = plan.shape(f.source).size() == 4 && !plan.split(f.source);
      for (const Step* s : f.Steps()) {
        nodes.push_back(s->node);
        ok = ok && !plan.absorbed(s->node) && !plan.split(s->param) &&
             (NumElements(plan.shape(s->param)) == plan.shape(f.source)[3] ||
              NumElements(plan.shape(s->param)) == 1);
      }
      for (int t : f.elided) ok = ok && plan.internal(t);
      for (size_t c : f.convs) {
        const Op& conv = plan.op(c);
        const FoldTarget* target = conv.fold_target();
        const std::vector<Shape> in = plan.InputShapes(c);
        ok = ok && !plan.absorbed(c) && target && target->TakesAffine(plan.Ctx(c), in) &&
             plan.SamePrecision(c, nodes) && plan.RunsWhole(c, in);
      }
      if (!ok) continue;
      float lo1, hi1, lo2, hi2;
      Unbounded(&lo1, &hi1);
      Unbounded(&lo2, &hi2);
      if (f.mul) lo1 = f.scale.lo, hi1 = f.scale.hi;
      if (f.add) lo2 = f.shift.lo, hi2 = f.shift.hi;
      for (size_t c : f.convs)
        AttachAffine(plan.attachments(c), f.source, f.mul ? f.scale.param : -1,
                     f.add ? f.shift.param : -1, lo1, hi1, lo2, hi2);
      for (size_t n : nodes) plan.Absorb(n, f.convs[0]);
      for (int t : f.elided) plan.Elide(t);
    }
  }

 private:
  std::vector<AffineFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeAffinePass() { return std::make_unique<AffinePass>(); }

}  // namespace clgpu
