// PRELU folds: a float PRELU whose slope is a constant per channel (MediaPipe's and PyTorch's
// nn.PReLU(C) blocks; one slope for all is the epilogue fold's), or the same spelled as
// element-wise ops whose slopes are one of their constants (litert-torch's, fusion/prelu_form.h),
// reading the output of a CONV_2D (any algorithm: each stores through them), directly or through a
// residual ADD folded into it, of a DEPTHWISE_CONV_2D no GEMM took (MobileFaceNet's depthwise,
// BN, PReLU), of a FULLY_CONNECTED, of an ADD of two operands of its size, or of a DEQUANTIZE of
// an activation (the slope of the last axis' index, whatever the rank): the op
// applies the slopes where it stores, after its activation and the ADD (AttachSlopes,
// kernels/common.cl's, binary.cl's and quantize.cl's CHANNEL_SLOPES), so the PRELU launches
// nothing and the value before it is never written. After the residual
// pass (a PRELU after an ADD follows the ADD's arithmetic) and the depthwise pass (a 1x1
// convolution that computes a depthwise as its A runs the implicit GEMM, whatever its own shape
// would run; a depthwise that took slopes is no GEMM's A); before the expand pass (an expand that
// took slopes is no longer a plain 1x1 GEMM and stays apart).
#include <algorithm>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "fusion/prelu_form.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct PreluFusion {
  std::vector<size_t> absorbed;  // the PRELU, or its form's nodes (fusion/prelu_form.h)
  int input = -1, slopes = -1, output = -1;
  std::vector<int> elided;  // the input, and the form's values between
  int input_reads = 1;      // the absorbed nodes' reads of the input
};

// The slopes of a float PRELU of a value of rank 2 or more whose last axis is its channels (NHWC,
// a dense layer's [M, N], a sequence's [1, T, C]): a constant with one element per channel,
// shaped as ones then the channels ([C], [1, 1, C], ...). -1 if it is not such a node.
int ChannelSlopes(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kPrelu || n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  const int x = n.inputs[0], a = n.inputs[1], y = n.outputs[0];
  for (int t : {x, a, y})
    if (!g.valid_tensor(t) || g.type(t) != kTfLiteFloat32) return -1;
  const Shape s = g.shape(x), v = g.shape(a);
  if (s.size() < 2 || g.shape(y) != s || !PerChannelShape(v, s.back()) || !g.IsConstant(a))
    return -1;
  return a;
}

std::vector<PreluFusion> FindPreluFusions(const FoldGraph& fg, const Folds& folds) {
  const GraphView& g = fg.g;
  const std::vector<NodeInfo>& nodes = fg.nodes;
  TensorUses uses(nodes);
  const std::map<int, size_t>& producer = uses.producer;
  std::map<int, std::vector<size_t>>& readers = uses.readers;
  // Whether the kernel writing t takes slopes: a convolution's (its own node, or the one a
  // residual ADD writing t folded into, either operand), a float depthwise's or
  // FULLY_CONNECTED's, or an ADD's of operands of its size; the pass's Apply decides with the
  // plan's ops.
  auto slope_writer = [&](int t, size_t before) {
    const auto p = producer.find(t);
    if (p == producer.end() || p->second >= before) return false;
    const NodeInfo& n = nodes[p->second];
    if (n.op == tfl::kAdd && folds.folded.count(p->second)) {
      for (int operand : n.inputs) {
        const auto c = producer.find(operand);
        if (c != producer.end() && nodes[c->second].op == tfl::kConv2d) return true;
      }
      return false;
    }
    if (folds.folded.count(p->second)) return false;
    if (n.op == tfl::kDequantize)
      return g.type(t) == kTfLiteFloat32;  // an int8 model's float island
    if (n.op == tfl::kAdd && n.inputs.size() == 2)
      return g.valid_tensor(n.inputs[0]) && g.valid_tensor(n.inputs[1]) &&
             g.shape(n.inputs[0]) == g.shape(t) && g.shape(n.inputs[1]) == g.shape(t);
    // Every convolution algorithm, the depthwise and the dense GEMMs store through them.
    return (n.op == tfl::kConv2d || n.op == tfl::kDepthwiseConv2d ||
            n.op == tfl::kFullyConnected) &&
           g.type(t) == kTfLiteFloat32;
  };
  std::vector<PreluFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (folds.folded.count(i)) continue;  // a single slope: the epilogue pass took it
    const int a = ChannelSlopes(g, nodes[i]);
    if (a < 0) continue;
    const int x = nodes[i].inputs[0];
    if (readers[x].size() != 1 || fg.outputs.count(x) || !slope_writer(x, i)) continue;
    out.push_back(PreluFusion{{i}, x, a, nodes[i].outputs[0], {x}, 1});
  }
  // The same with a slope per channel spelled as element-wise ops after the writer.
  for (size_t p = 0; p < nodes.size(); ++p) {
    const std::optional<PreluForm> f = FindPreluForm(g, nodes, p, readers, fg.outputs);
    if (!f || f->slopes_tensor < 0 || !slope_writer(nodes[p].outputs[0], f->nodes.front()) ||
        std::any_of(f->nodes.begin(), f->nodes.end(),
                    [&](size_t k) { return folds.folded.count(k); }))
      continue;
    const int x = f->intermediates.front();
    int reads = 0;
    for (size_t k : f->nodes)
      reads += int(std::count(nodes[k].inputs.begin(), nodes[k].inputs.end(), x));
    out.push_back(PreluFusion{f->nodes, x, f->slopes_tensor, f->output, f->intermediates, reads});
  }
  return out;
}

class PreluPass : public FusionPass {
 public:
  const char* name() const override { return "prelu"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindPreluFusions(g, *folds);
    for (const PreluFusion& f : found_) {
      folds->folded.insert(f.absorbed.begin(), f.absorbed.end());
      folds->written_instead[f.input] = f.output;
    }
  }
  // The op writing the PRELU's input now (a convolution, one that took the ADD, or the ADD)
  // takes the slopes whole, in its precision, where its kernels apply them (TakesSlopes).
  void Apply(FoldPlan& plan) override {
    for (const PreluFusion& f : found_) {
      if (std::any_of(f.absorbed.begin(), f.absorbed.end(),
                      [&](size_t k) { return plan.absorbed(k); }))
        continue;
      int readers = 0;
      const int p = plan.Producer(f.input, &readers);
      if (p < 0 || readers != f.input_reads || !plan.internal(f.input) || plan.split(f.slopes))
        continue;
      const size_t pi = size_t(p);
      Op& conv = plan.op(pi);
      const FoldTarget* target = conv.fold_target();
      const std::vector<Shape> in = plan.InputShapes(pi);
      const Shape& s = plan.shape(f.input);
      if (!target || conv.outputs().size() != 1 || conv.outputs()[0] != f.input ||
          conv.has_output_view() || s.size() < 2 || plan.shape(f.output) != s ||
          NumElements(plan.shape(f.slopes)) != s.back() || !plan.SamePrecision(pi, f.absorbed) ||
          !plan.RunsWhole(pi, in) || !target->TakesSlopes(plan.Ctx(pi), in) ||
          !AttachSlopes(plan.attachments(pi), f.output, f.slopes))
        continue;
      for (size_t k : f.absorbed) plan.Absorb(k, pi);
      for (int t : f.elided) plan.Elide(t);
    }
  }

 private:
  std::vector<PreluFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakePreluPass() { return std::make_unique<PreluPass>(); }

}  // namespace clgpu
