// Gate folds: a float MUL of one image's activations x [1, H, W, C] by a vector of their
// channels that the partition computes (a squeeze-and-excitation gate: MobileNetV3's,
// EfficientNet's, RegNetY's), with no activation, whose output only 1x1 CONV_2Ds read, each once
// as its input, each run by the plain GEMM (not its small-M kernel): the convolution reads x and
// scales the filter's tile by the gate where it loads it (AttachGate, kernels/gemm_tiles.cl's
// K_SCALE), the same products, so the MUL launches nothing and its output is never written. A
// constant vector is the affine fold's; a convolution that the implicit GEMM runs (maps of 28x28
// and more on a GPU) keeps its MUL. After the squeeze pass (the gate is the squeeze's output);
// before the depthwise pass (a convolution with a gate takes no depthwise) and the prelu pass
// (the gated GEMM applies slopes too, appended after the gate as the last input). The int8 form
// (an int8 MUL of any activation, 1x1 int8 CONV_2Ds that the int8 GEMM runs) computes each gated
// byte as the MUL's kernel does where the GEMM loads its A (kernels/gemm_int8_gate.cl): the
// products are not linear in the gate there, so the filter cannot carry it.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "fusion/pass.h"
#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/int8_ops.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct GateFusion {
  size_t mul = 0;
  int x = -1, gate = -1, y = -1;
  std::vector<size_t> convs;  // the readers of y
  std::vector<int> quant;     // the int8 form's arithmetic (Attachments::Gate); empty: float
};

// A MUL of a 4-D value of one image and a non-constant vector of its channels (ones before
// them), float with no activation or int8 (its arithmetic in *quant): the value and the vector,
// else false.
bool GateMul(const GraphView& g, const NodeInfo& n, int* x, int* gate, std::vector<int>* quant) {
  if (n.op != tfl::kMul || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.builtin_data)
    return false;
  int act = 0;
  std::memcpy(&act, n.builtin_data, sizeof act);
  const bool int8 = g.valid_tensor(n.outputs[0]) && g.value_type(n.outputs[0]) == ValueType::kInt8;
  if (act != tfl::kActNone && !int8) return false;
  for (int t : {n.inputs[0], n.inputs[1], n.outputs[0]})
    if (!g.valid_tensor(t) ||
        (int8 ? g.value_type(t) != ValueType::kInt8 : g.type(t) != kTfLiteFloat32))
      return false;
  for (int i = 0; i < 2; ++i) {
    const Shape s = g.shape(n.inputs[i]), v = g.shape(n.inputs[1 - i]);
    if (s.size() != 4 || s[0] != 1 || s != g.shape(n.outputs[0]) || v.empty() || v.back() != s[3] ||
        NumElements(v) != s[3] || g.IsConstant(n.inputs[1 - i]) || g.IsConstant(n.inputs[i]))
      continue;
    *x = n.inputs[i], *gate = n.inputs[1 - i];
    std::string why;
    if (int8) *quant = Int8GateParams(g, n, *x, &why);
    return why.empty();
  }
  return false;
}

// A 1x1 CONV_2D reading y once, as its input, that the plain GEMM runs here with its tiled
// kernels (the cost model's view; the op's TakesGate decides per plan); int8: the int8 GEMM's
// 1x1 layers (stride 1, no padding).
bool GemmReader(const GraphView& g, const NodeInfo& n, int y, const DeviceInfo& dev, bool int8) {
  const std::optional<ConvGeometry> cg = ConvReadingInput(g, n, y);
  if (cg && int8) return g.value_type(n.outputs[0]) == ValueType::kInt8 && cg->Pointwise();
  return cg && SelectConvAlgorithm(*cg, dev, "") == ConvAlgorithm::kGemm1x1 &&
         Gemm1x1Tiled(dev, *cg);
}

std::vector<GateFusion> FindGateFusions(const FoldGraph& fg) {
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < fg.nodes.size(); ++i)
    for (int t : fg.nodes[i].inputs) readers[t].push_back(i);
  std::vector<GateFusion> out;
  for (size_t i = 0; i < fg.nodes.size(); ++i) {
    GateFusion f;
    if (!GateMul(fg.g, fg.nodes[i], &f.x, &f.gate, &f.quant)) continue;
    f.mul = i, f.y = fg.nodes[i].outputs[0];
    f.convs = readers[f.y];
    bool convs = !f.convs.empty() && !fg.outputs.count(f.y);
    for (size_t c : f.convs)
      convs = convs && c > i && GemmReader(fg.g, fg.nodes[c], f.y, fg.dev, !f.quant.empty());
    if (convs) out.push_back(std::move(f));
  }
  return out;
}

class GatePass : public FusionPass {
 public:
  const char* name() const override { return "gate"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    found_ = FindGateFusions(g);
    // The convolutions keep their launches: the plain GEMM runs them either way.
    for (const GateFusion& f : found_) folds->folded.insert(f.mul);
  }
  // Every reader takes the gate whole, in its precision; x and the gate are whole values.
  void Apply(FoldPlan& plan) override {
    for (const GateFusion& f : found_) {
      bool ok = !plan.absorbed(f.mul) && plan.internal(f.y) && !plan.split(f.x) &&
                !plan.split(f.gate) && plan.shape(f.x).size() == 4 &&
                NumElements(plan.shape(f.gate)) == plan.shape(f.x)[3];
      for (size_t c : f.convs) {
        const FoldTarget* target = plan.op(c).fold_target();
        const std::vector<Shape> in = plan.InputShapes(c);
        ok = ok && !plan.absorbed(c) && target && target->TakesGate(plan.Ctx(c), in) &&
             plan.SamePrecision(c, {f.mul}) && plan.RunsWhole(c, in);
      }
      if (!ok) continue;
      for (size_t c : f.convs) AttachGate(plan.attachments(c), f.x, f.gate, f.quant);
      plan.Absorb(f.mul, f.convs[0]);
      plan.Elide(f.y);
    }
  }

 private:
  std::vector<GateFusion> found_;
};

}  // namespace

std::unique_ptr<FusionPass> MakeGatePass() { return std::make_unique<GatePass>(); }

}  // namespace clgpu
