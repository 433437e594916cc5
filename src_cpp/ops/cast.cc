// CAST of run-time int32 values to float (an attention mask given as token flags, turned into
// the additive mask in float): each integer converted to the nearest float, as the CPU kernel's
// static_cast does, then stored in the partition's float storage. A CAST of complex64 values to
// float (an STFT's bins, as tf.cast converts them) keeps the real parts, as TFLite's does
// (ops/spectral.h). Casts of constants and of shapes are folded instead
// (delegate/constant_folding.h, ops/shape_folding.h).
#include <algorithm>

#include "ops/op.h"
#include "ops/op_helpers.h"
#include "ops/spectral.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class ConvertOp : public Op {
 public:
  ConvertOp(const NodeInfo& node, const char* type, const char* algorithm, const char* program,
            const char* kernel, int op)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        type_(type),
        algorithm_(algorithm),
        program_(program),
        kernel_(kernel),
        op_(op) {}

  const char* type_name() const override { return type_; }
  std::string algorithm() const override { return algorithm_; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return double(NumElements(in[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const int n = static_cast<int>(NumElements(in_shapes[0]));
    Launch l;
    l.name = kernel_;
    l.kernel = CreateKernel(*ctx.GetProgram(program_), l.name);
    SetArgs(l.kernel, in[0], out[0], n);
    if (op_ >= 0) SetArgsFrom(l.kernel, 3, op_);
    l.global[0] = RoundUp(std::max(n, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  const char *type_, *algorithm_, *program_, *kernel_;
  int op_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (!g.valid_tensor(x) || !g.valid_tensor(y)) return "invalid tensor index";
  if (g.type(x) == kTfLiteComplex64) return CheckComplexPart(g, node);
  if (g.type(x) != kTfLiteInt32)
    return "input type " + std::to_string(g.type(x)) +
           " (only a CAST of int32 or complex64 is claimed)";
  if (g.IsConstant(x)) return "a constant input (the constant fold's case)";
  if (!g.tensor(x).dims) return "tensor " + g.name(x) + " has no shape";
  if (auto why = CheckFloatTensors(g, {y}); !why.empty()) return why;
  if (g.shape(x) != g.shape(y)) return "output shape differs from the input's";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (g.type(node.inputs[0]) == kTfLiteComplex64) return CreateComplexPart(node, "CAST", kPartReal);
  return MakeConvertOp(node, "CAST", "int32_to_float", "convert", "cast_int32");
}

}  // namespace

std::unique_ptr<Op> MakeConvertOp(const NodeInfo& node, const char* type, const char* algorithm,
                                  const char* program, const char* kernel, int op) {
  return std::make_unique<ConvertOp>(node, type, algorithm, program, kernel, op);
}

extern const OpHandler kCastHandler = {tfl::kCast, "CAST", Check, Create};

}  // namespace clgpu
