// QUANTIZE (float32 -> int8 / uint8, and requantization between quantized types) and DEQUANTIZE
// (int8 / uint8 -> float32): the boundaries of an int8 model with float I/O, so the whole model
// is one partition. Bit for bit with each runtime's CPU kernels, whose arithmetic was measured:
// tflite_runtime 2.14 (x86) rounds x / scale in double, half away from zero, and dequantizes
// as (q - zero_point) * scale; LiteRT 2.3 runs NEON loops (8 elements at a time) that use
// rint(x * (1 / scale)) and q * scale - zero_point * scale, and the scalar code for the rest.
// A DEQUANTIZE of a FLOAT16 constant is folded into a constant instead (delegate/claim.h). A
// DEQUANTIZE of an activation takes the float ops after it as an element-wise op does (a clamp,
// an epilogue, per-channel slopes) and the QUANTIZE closing them (fusion/requantize.cc).
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "graph/dequantize.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class QuantizeOp : public Op, public FoldTarget {
 public:
  QuantizeOp(const GraphView& g, const NodeInfo& node)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        op_(node.op),
        in_type_(g.value_type(node.inputs[0])),
        out_type_(g.value_type(node.outputs[0])),
        in_(g.quant(node.inputs[0])),
        out_(g.quant(node.outputs[0])),
        neon_(g.cpu_kernels().neon) {
    keeps_float32_ = true;  // it reads or writes float values only at the quantization boundary
  }

  const char* type_name() const override {
    return op_ == tfl::kQuantize ? "QUANTIZE" : "DEQUANTIZE";
  }
  std::string algorithm() const override {
    return in_type_ == ValueType::kFloat
               ? (epilogue_table().empty() ? "quantize" : "quantize+TABLE")
           : dequantize() ? std::string("dequantize") + (has_slopes() ? "+PRELU" : "") +
                                (output_quantize() ? "+QUANTIZE" : "")
                          : "requantize";
  }
  // A DEQUANTIZE's float output takes what follows it in float as any element-wise op does: a
  // clamp, an epilogue, slopes per channel. litert-torch's int8 models leave the ops its
  // quantizer does not cover (a PRELU) in float between a DEQUANTIZE and a QUANTIZE.
  // A QUANTIZE of floats stores through a table (fusion/epilogue.cc): the int8 scalar chain of an
  // input Rescaling after it.
  const FoldTarget* fold_target() const override {
    return dequantize() || in_type_ == ValueType::kFloat ? this : nullptr;
  }
  bool TakesTable() const override { return in_type_ == ValueType::kFloat; }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = -INFINITY, *hi = INFINITY;
    return dequantize();
  }
  bool TakesSlopes(const OpContext&, const std::vector<Shape>& in) const override {
    return dequantize() && !in.empty() && !in[0].empty() && in[0].back() > 0;
  }
  // And the QUANTIZE that closes such a float island (fusion/requantize.cc): stored quantized.
  bool TakesQuantize() const override { return dequantize(); }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return double(NumElements(in[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const int n = static_cast<int>(NumElements(in_shapes[0]));
    const int vec_below = NeonQuantizeBelow(neon_, n);
    const ValueType q = out_type_ == ValueType::kFloat ? in_type_ : out_type_;
    std::string defines = q == ValueType::kUInt8 ? "-DQUANT_UINT8" : "";
    if (in_type_ == ValueType::kUInt8) defines += " -DIN_UINT8";
    const Attachments::Quantize* store = output_quantize();
    if (store) {
      // One QT for both ends: the pass folds a QUANTIZE to the DEQUANTIZE's own type only.
      if (store->uint8 != (in_type_ == ValueType::kUInt8) || store->q.scale.empty())
        throw Error("DEQUANTIZE: a folded QUANTIZE to another type");
      defines += " -DQUANT_STORE";
    }
#if !defined(__x86_64__) && !defined(__i386__)
    defines += " -DQUANT_SATURATING_CVT";  // the CPU kernels' float -> int conversion here
#endif
    auto prog = ctx.GetProgram("quantize", defines);
    Launch l;
    l.name = in_type_ == ValueType::kFloat ? "quantize_float"
             : dequantize()                ? "dequantize"
                                           : "requantize";
    l.kernel = CreateKernel(*prog, l.name);
    if (in_type_ == ValueType::kFloat) {
      const float scale = out_.scale[0];
      // 1 / scale rounded once to float, as the NEON loop has it.
      const float inv = static_cast<float>(1.0 / static_cast<double>(scale));
      SetArgs(l.kernel, in[0], out[0], n, scale, inv, out_.zero_point[0], QuantMin(out_type_),
              QuantMax(out_type_), vec_below);
      if (const std::vector<uint8_t>& t = epilogue_table(); !t.empty()) {
        if (t != table_) table_buf_ = UploadBytes(ctx, t.data(), t.size()), table_ = t;
        SetArgsFrom(l.kernel, 9, table_buf_.get());
        if (t.size() > 256)  // one table per channel of the last axis
          SetArgsFrom(l.kernel, 10,
                      static_cast<int>(in_shapes[0].empty() ? 1 : in_shapes[0].back()));
      }
    } else if (out_type_ == ValueType::kFloat) {
      const float scale = in_.scale[0];
      const float zero_scaled = static_cast<float>(in_.zero_point[0]) * scale;
      const auto [lo, hi] = ClampBounds(-INFINITY, INFINITY);
      SetArgs(l.kernel, in[0], out[0], n, scale, in_.zero_point[0], zero_scaled, vec_below, lo, hi);
      if (has_slopes()) SetArgsFrom(l.kernel, 9, in.back(), static_cast<int>(in_shapes[0].back()));
      if (store) {
        const float qs = store->q.scale[0];
        const ValueType qt = store->uint8 ? ValueType::kUInt8 : ValueType::kInt8;
        SetArgsFrom(l.kernel, has_slopes() ? 11 : 9, qs,
                    static_cast<float>(1.0 / static_cast<double>(qs)), store->q.zero_point[0],
                    QuantMin(qt), QuantMax(qt));
      }
    } else {
      const FixedPoint f = QuantizeMultiplier(static_cast<double>(in_.scale[0]) /
                                              static_cast<double>(out_.scale[0]));
      SetArgs(l.kernel, in[0], out[0], n, in_.zero_point[0], f.multiplier, f.shift,
              out_.zero_point[0], QuantMin(out_type_), QuantMax(out_type_), vec_below);
    }
    l.global[0] = RoundUp(std::max(n, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  bool dequantize() const { return out_type_ == ValueType::kFloat; }

  int32_t op_;
  ValueType in_type_, out_type_;
  Buffer table_buf_;
  std::vector<uint8_t> table_;  // what table_buf_ holds
  QuantParams in_, out_;
  bool neon_;
};

std::string CheckQuantize(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (!g.valid_tensor(x) || !g.valid_tensor(y)) return "invalid tensor index";
  if (g.IsConstant(x)) return "the input is constant";
  const ValueType out = g.value_type(y);
  if (!IsQuantized(out))
    return std::string("output type ") + ValueTypeName(out) + " is not int8/uint8";
  if (auto why = CheckQuantActivation(g, y, out); !why.empty()) return why;
  const ValueType in = g.value_type(x);
  if (in == ValueType::kFloat) return CheckFloatTensors(g, {x});
  if (!IsQuantized(in)) return std::string("input type ") + ValueTypeName(in) + " is not supported";
  return CheckQuantActivation(g, x, in);
}

std::string CheckDequantize(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const int x = node.inputs[0], y = node.outputs[0];
  if (!g.valid_tensor(x) || !g.valid_tensor(y)) return "invalid tensor index";
  // A FLOAT16 or int8 / uint8 weight: folded into a constant while its consumers are claimed
  // (delegate/claim.h).
  if (g.IsFoldedDequantizeOutput(y))
    return "only a constant FLOAT16 or int8 weight feeding a delegated op is claimed";
  if (g.IsConstant(x)) {
    if (g.type(x) == kTfLiteFloat16)
      return "a constant FLOAT16 weight whose size disagrees with its declared output: not "
             "folded, left to the CPU, which checks it";
    if (!IsQuantized(g.value_type(x))) return "the input is a constant of an unsupported type";
    const std::string why = CheckDequantizable(g.tensor(x), g.shape(x), g.name(x));
    return "a constant " + std::string(ValueTypeName(g.value_type(x))) + " weight not folded: " +
           (why.empty() ? "its declared output's shape or type differs, left to the CPU" : why);
  }
  const ValueType in = g.value_type(x);
  if (!IsQuantized(in))
    return std::string("input type ") + ValueTypeName(in) + " is not int8/uint8";
  if (auto why = CheckQuantActivation(g, x, in); !why.empty()) return why;
  return CheckFloatTensors(g, {y});
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  return std::make_unique<QuantizeOp>(g, node);
}

}  // namespace

extern const OpHandler kQuantizeHandler = [] {
  OpHandler h{tfl::kQuantize, "QUANTIZE", CheckQuantize, Create,  nullptr,
              nullptr,        false,      false,         nullptr, true};
  h.table_epilogue = true;
  return h;
}();
extern const OpHandler kDequantizeHandler = {
    tfl::kDequantize, "DEQUANTIZE", CheckDequantize, Create, nullptr, nullptr, false, true,
    nullptr,          true};

}  // namespace clgpu
