// REVERSE_V2 along one constant axis: BirdNET's mel spectrogram flips its bins (highest first)
// before the network; left on the CPU it split the front end from the network.
#include <algorithm>

#include "common/error.h"
#include "ops/op.h"
#include "ops/op_helpers.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 8;

class ReverseOp : public Op {
 public:
  ReverseOp(const NodeInfo& node, std::vector<int> axes)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), axes_(std::move(axes)) {}
  const char* type_name() const override { return "REVERSE_V2"; }
  std::string algorithm() const override { return "gather_axes"; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const Shape s = in_shapes[0].empty() ? Shape{1} : in_shapes[0];
    const int rank = static_cast<int>(s.size());
    std::vector<int> meta(s.begin(), s.end());
    meta.resize(2 * rank, 0);
    for (int a : axes_) meta[rank + (a < 0 ? a + rank : a)] = 1;
    meta_ = UploadInts(ctx, meta);
    const int total = static_cast<int>(NumElements(s));
    Launch l;
    l.name = "reverse_axes";
    l.kernel = CreateKernel(*ctx.GetProgram("reverse"), l.name);
    SetArgs(l.kernel, in[0], out[0], total, rank, meta_.get());
    l.global[0] = RoundUp(std::max(total, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  std::vector<int> axes_;
  Buffer meta_;
};

std::string ReadAxes(const GraphView& g, const NodeInfo& node, std::vector<int>* axes) {
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(node.inputs[1], "axis", &v); !why.empty()) return why;
  const int rank = static_cast<int>(g.shape(node.inputs[0]).size());
  for (int64_t a : v) {
    if (a < -rank || a >= rank) return "axis " + std::to_string(a) + " out of range";
    axes->push_back(static_cast<int>(a));
  }
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (!g.valid_tensor(x) || !g.valid_tensor(y)) return "invalid tensor index";
  const ValueType t = g.value_type(x);
  if (IsQuantized(t)) {
    if (g.value_type(y) != t || g.quant(x).scale != g.quant(y).scale ||
        g.quant(x).zero_point != g.quant(y).zero_point)
      return "output quantized differently from the input";
  } else if (auto why = CheckFloatTensors(g, {x, y}); !why.empty()) {
    return why;
  }
  if (g.IsConstant(x)) return "a constant input (the constant fold's case)";
  if (g.shape(x).size() > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  if (g.shape(x) != g.shape(y)) return "output shape differs from the input's";
  std::vector<int> axes;
  if (auto why = ReadAxes(g, node, &axes); !why.empty()) return why;
  // Several axes: tflite_runtime 2.14 reverses the first alone, ai_edge_litert 2.3 all of them
  // (contiguous ones only): no one answer to match.
  if (axes.size() != 1) return "REVERSE_V2 over " + std::to_string(axes.size()) + " axes";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  std::vector<int> axes;
  if (auto why = ReadAxes(g, node, &axes); !why.empty()) throw Error(why);
  return std::make_unique<ReverseOp>(node, std::move(axes));
}

}  // namespace

extern const OpHandler kReverseV2Handler = {tfl::kReverseV2, "REVERSE_V2", Check, Create};

}  // namespace clgpu
