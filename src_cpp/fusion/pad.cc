// PAD folds: a PAD or PADV2 of zeros (int8: of the zero point) on H and W only, whose output
// only a CONV_2D or DEPTHWISE_CONV_2D reads as its input, not a partition output: the
// convolution reads the PAD's input and counts the PAD's rows and columns as its own padding
// (AttachPad, ConvGeometry::Compute), which every algorithm reads as zeros (int8: as the input
// zero point, adding nothing). Converters write such PADs before strided convolutions (Keras'
// ZeroPadding2D, PyTorch's asymmetric padding). First of the passes: a depthwise that took a PAD
// still folds into its pointwise convolution (depthwise.cc).
#include "ops/pad.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct PadFusion {
  size_t pad = 0, conv = 0;  // positions in the node list
  InputPad amounts;
};

// The H and W paddings of a PAD / PADV2 (as the op reads it, ops/pad.h) over a 4-D NHWC input
// with rows and columns, whose padded values are what a convolution's padding reads: zeros, or
// an int8 tensor's zero point; false for any other.
bool ZeroPadding(const GraphView& g, const NodeInfo& n, InputPad* p) {
  if (n.op != tfl::kPad && n.op != tfl::kPadV2) return false;
  PadSpec spec;
  if (!ReadPadSpec(g, n, &spec).empty() || spec.mode != kPadConstant || spec.before.size() != 4)
    return false;
  const int x = n.inputs[0], y = n.outputs[0];
  const Shape in = g.shape(x);
  const ValueType t = g.value_type(y);
  const bool zeros = t == ValueType::kInt8    ? spec.value == float(g.quant(y).zero_point[0])
                     : t == ValueType::kFloat ? spec.value == 0.0f && !std::signbit(spec.value)
                                              : false;
  if (!zeros || in[1] <= 0 || in[2] <= 0 || spec.before[0] || spec.after[0] || spec.before[3] ||
      spec.after[3])  // batch and channels untouched
    return false;
  *p = InputPad{spec.before[1], spec.after[1], spec.before[2], spec.after[2]};
  return true;
}

std::vector<PadFusion> FindPadFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                      const std::set<int>& outputs) {
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  std::vector<PadFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    PadFusion f;
    if (!ZeroPadding(g, nodes[i], &f.amounts)) continue;
    const int y = nodes[i].outputs[0];
    const std::vector<size_t>& r = readers[y];
    if (outputs.count(y) || r.size() != 1 || r[0] <= i) continue;
    const NodeInfo& conv = nodes[r[0]];
    if ((conv.op != tfl::kConv2d && conv.op != tfl::kDepthwiseConv2d) || conv.inputs.empty() ||
        conv.inputs[0] != y || std::count(conv.inputs.begin(), conv.inputs.end(), y) != 1)
      continue;
    f.pad = i, f.conv = r[0];
    out.push_back(f);
  }
  return out;
}

class PadPass : public FusionPass {
 public:
  const char* name() const override { return "pad"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindPadFusions(g.g, g.nodes, g.outputs);
    for (const PadFusion& f : found_) {
      folds->folded.insert(f.pad);
      folds->pad_input[g.nodes[f.pad].outputs[0]] = g.nodes[f.pad].inputs[0];
      folds->pads[f.conv] = f.amounts;
    }
  }
  // The convolution must run whole (its chunks' windows know no folded PAD) and in the PAD's
  // precision; the PAD's input fits one buffer.
  void Apply(FoldPlan& plan) override {
    for (const PadFusion& f : found_) {
      Op& pad = plan.op(f.pad);
      Op& conv = plan.op(f.conv);
      if (plan.absorbed(f.pad) || plan.absorbed(f.conv) || conv.folded_pad() ||
          pad.inputs().empty() || conv.inputs().empty())
        continue;
      const int x = pad.inputs()[0], y = pad.outputs()[0];
      const Shape& xs = plan.shape(x);
      if (conv.inputs()[0] != y || !plan.internal(y) || xs.size() != 4 || xs[1] <= 0 ||
          xs[2] <= 0 || plan.split(x) || !plan.Fits(x) || !plan.SamePrecision(f.conv, {f.pad}) ||
          !plan.RunsWhole(f.conv, plan.InputShapes(f.conv)))
        continue;
      AttachPad(plan.attachments(f.conv), x, f.amounts);
      plan.Absorb(f.pad, f.conv);
      plan.Elide(y);
    }
  }

 private:
  std::vector<PadFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakePadPass() { return std::make_unique<PadPass>(); }

}  // namespace clgpu
