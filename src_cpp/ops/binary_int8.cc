// ADD, SUB, MUL and PRELU on int8 / uint8 tensors, with broadcasting (binary_int8.cl): TFLite's
// integer arithmetic. PRELU rescales x - zero point by in_scale / out_scale where it is >= 0, else
// its product with alpha - alpha's zero point by in_scale * alpha_scale / out_scale (both ratios
// in float, as PRELU's Prepare computes them). ADD / SUB rescale each operand to twice the larger
// input scale with 20 bits of headroom and the sum to the output; MUL rescales the product of the
// offset operands by in1_scale * in2_scale / out_scale (that product and ratio in float, as MUL's
// Prepare computes it). Their multipliers are applied by TFLite's own rounding (ties away from
// zero, ops/quant.h) in both runtimes, measured with power-of-two scale ratios (many ties):
// LiteRT's NEON MUL loop divides with gemmlowp's RoundingDivideByPOT, which rounds as the scalar
// code does.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// Output dims, then each operand's strides aligned to them (0 where it broadcasts).
std::vector<int> BroadcastMeta(const Shape& a, const Shape& b, const Shape& out) {
  std::vector<int> meta(out.begin(), out.end());
  for (const Shape* s : {&a, &b}) {
    std::vector<int> strides(out.size(), 0);
    int stride = 1;
    for (int i = static_cast<int>(s->size()) - 1; i >= 0; --i) {
      strides[out.size() - s->size() + i] = (*s)[i] == 1 ? 0 : stride;
      stride *= (*s)[i];
    }
    meta.insert(meta.end(), strides.begin(), strides.end());
  }
  return meta;
}

// PRELU's two multipliers, as its Prepare computes them: x >= 0 by in / out, else x * alpha by
// in * alpha / out. The kernel and the folded table (Int8PreluTable) both take them from here.
std::pair<FixedPoint, FixedPoint> PreluMultipliers(const QuantParams& in, const QuantParams& alpha,
                                                   const QuantParams& out) {
  return {QuantizeMultiplier(in.scale[0] / out.scale[0]),
          QuantizeMultiplier(in.scale[0] * alpha.scale[0] / out.scale[0])};
}

// The 14 parameters of binary_int8.cl's kernels for an ADD, SUB, MUL or PRELU node (its layout
// there), as each op's Prepare computes them.
std::vector<int> BinaryInt8Params(const GraphView& g, const NodeInfo& node, int activation) {
  const ValueType type = g.value_type(node.outputs[0]);
  const QuantParams a = g.quant(node.inputs[0]), b = g.quant(node.inputs[1]),
                    out = g.quant(node.outputs[0]);
  int lo = 0, hi = 0;
  QuantizedActivationRange(activation, out, type, &lo, &hi);
  if (node.op == tfl::kPrelu) {
    const auto [m1, m2] = PreluMultipliers(a, b, out);
    return {-a.zero_point[0],
            -b.zero_point[0],
            0,
            m1.multiplier,
            m1.shift,
            m2.multiplier,
            m2.shift,
            0,
            0,
            out.zero_point[0],
            lo,
            hi,
            0,
            0};
  }
  if (node.op == tfl::kMul) {
    const FixedPoint m = QuantizeMultiplier(a.scale[0] * b.scale[0] / out.scale[0]);
    return {-a.zero_point[0],
            -b.zero_point[0],
            0,
            m.multiplier,
            m.shift,
            0,
            0,
            0,
            0,
            out.zero_point[0],
            lo,
            hi,
            2,
            0};
  }
  constexpr int kLeftShift = 20;
  // As TFLite computes them: the doubled larger scale in float, the ratios in double.
  const float twice_max = 2 * std::max(a.scale[0], b.scale[0]);
  const FixedPoint ma = QuantizeMultiplier(double(a.scale[0]) / double(twice_max));
  const FixedPoint mb = QuantizeMultiplier(double(b.scale[0]) / double(twice_max));
  const FixedPoint mo =
      QuantizeMultiplier(double(twice_max) / double(float(1 << kLeftShift) * out.scale[0]));
  return {-a.zero_point[0],
          -b.zero_point[0],
          kLeftShift,
          ma.multiplier,
          ma.shift,
          mb.multiplier,
          mb.shift,
          mo.multiplier,
          mo.shift,
          out.zero_point[0],
          lo,
          hi,
          node.op == tfl::kSub ? 1 : 0,
          0};
}

// One output integer of those kernels (ties away from zero, as TFLite's scalar code rounds), for
// the tables of an operand that is a constant scalar.
int BinaryInt8Value(int32_t op, const std::vector<int>& p, int qa, int qb) {
  auto mul = [](int32_t x, int m, int shift) { return MultiplyByQuantizedMultiplier(x, m, shift); };
  int v = 0;
  if (op == tfl::kMul) {
    v = mul((qa + p[0]) * (qb + p[1]), p[3], p[4]) + p[9];
  } else if (op == tfl::kPrelu) {
    const int x = qa + p[0];
    v = (x >= 0 ? mul(x, p[3], p[4]) : mul(x * (qb + p[1]), p[5], p[6])) + p[9];
  } else {
    const int sa = mul((qa + p[0]) * (1 << p[2]), p[3], p[4]);
    const int sb = mul((qb + p[1]) * (1 << p[2]), p[5], p[6]);
    v = mul(p[12] ? sa - sb : sa + sb, p[7], p[8]) + p[9];
  }
  return std::clamp(v, p[10], p[11]);
}

class AddInt8Op : public Op, public FoldTarget, public FoldSource {
 public:
  AddInt8Op(const GraphView& g, const NodeInfo& node, int activation)
      : Op(node, {node.inputs[0], node.inputs[1]}, {node.outputs[0]}),
        op_(node.op),
        type_(g.value_type(node.outputs[0])),
        params_(BinaryInt8Params(g, node, activation)) {}

  const char* type_name() const override {
    return op_ == tfl::kPrelu ? "PRELU"
           : op_ == tfl::kMul ? "MUL"
           : op_ == tfl::kSub ? "SUB"
                              : "ADD";
  }
  std::string algorithm() const override {
    return epilogue_table().empty() ? "int8" : "int8+TABLE";
  }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  // Its kernels store through a table (kernels/binary_int8.cl's QUANT_TABLE): a PRELU after a
  // block's residual ADD (which the residual fold then moves with the ADD into the convolution).
  bool TakesTable() const override { return true; }
  // An ADD folds into the int8 op producing one operand (fusion/residual.cc): that op applies this
  // arithmetic to its output integers, so they must come first in the parameters.
  bool IsResidualAdd(int residual, ResidualAdd* add) const override {
    if (op_ != tfl::kAdd) return false;
    add->quant = params_;
    if (residual == inputs()[0]) {
      std::swap(add->quant[0], add->quant[1]);
      std::swap(add->quant[3], add->quant[5]);
      std::swap(add->quant[4], add->quant[6]);
    }
    return true;
  }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const size_t rank = std::max(in[0].size(), in[1].size());
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i) {
      const int da = i < rank - in[0].size() ? 1 : in[0][i - (rank - in[0].size())];
      const int db = i < rank - in[1].size() ? 1 : in[1][i - (rank - in[1].size())];
      if (da != db && da != 1 && db != 1)
        throw Error(std::string(type_name()) + " shapes " + ShapeString(in[0]) + " and " +
                    ShapeString(in[1]) + " do not broadcast");
      out[i] = da == 1 ? db : da;
    }
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return double(NumElements(out[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape& o = out_shapes[0];
    const int total = static_cast<int>(NumElements(o));
    if (!params_buf_) params_buf_ = UploadInts(ctx, params_);
    meta_ = UploadInts(ctx, BroadcastMeta(in_shapes[0], in_shapes[1], o));
    const int up_below = 0;
    Launch l;
    l.name = op_ == tfl::kPrelu ? "prelu_int8" : op_ == tfl::kMul ? "mul_int8" : "add_int8";
    l.kernel = CreateKernel(
        *ctx.GetProgram("binary_int8", type_ == ValueType::kUInt8 ? "-DQUANT_UINT8" : ""), l.name);
    SetArgs(l.kernel, in[0], in[1], out[0], total, static_cast<int>(o.size()), meta_.get(),
            params_buf_.get(), up_below);
    if (!epilogue_table().empty()) {
      const std::vector<uint8_t>& t = epilogue_table();  // this plan's: uploaded when it changes
      if (!table_buf_ || t != table_) {
        table_buf_ = UploadBytes(ctx, t.data(), t.size());
        table_ = t;
      }
      SetArgsFrom(l.kernel, 8, table_buf_.get());
    }
    l.global[0] = RoundUp(std::max(total, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  int32_t op_;
  ValueType type_;
  std::vector<int> params_;
  Buffer params_buf_, meta_, table_buf_;
  std::vector<uint8_t> table_;  // what table_buf_ holds
};

}  // namespace

std::string CheckAddInt8(const GraphView& g, const NodeInfo& node) {
  const ValueType t = g.value_type(node.inputs[0]);
  for (int x : {node.inputs[0], node.inputs[1], node.outputs[0]})
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  return "";
}

std::string CheckMulInt8(const GraphView& g, const NodeInfo& node) {
  if (auto why = CheckAddInt8(g, node); !why.empty()) return why;
  // LiteRT's NEON loop (same shapes) narrows the rescaled product to int16 with saturation and
  // adds the zero point in int16, wrapping, where the scalar code clamps in int32: refuse the
  // scales whose products could leave int16 there.
  if (!g.cpu_kernels().neon) return "";
  const ValueType t = g.value_type(node.inputs[0]);
  const QuantParams a = g.quant(node.inputs[0]), b = g.quant(node.inputs[1]),
                    out = g.quant(node.outputs[0]);
  auto reach = [&](const QuantParams& q) {
    return double(
        std::max(std::abs(QuantMin(t) - q.zero_point[0]), std::abs(QuantMax(t) - q.zero_point[0])));
  };
  const double scale = double(a.scale[0] * b.scale[0] / out.scale[0]);
  if (reach(a) * reach(b) * scale + 2 + std::abs(out.zero_point[0]) > 32767)
    return "int8 MUL whose products may leave int16 in LiteRT's NEON loop";
  return "";
}

std::string Int8MulTable(const GraphView& g, const NodeInfo& mul, int x,
                         const std::vector<uint8_t>& s_of_x, std::vector<uint8_t>* table) {
  if (mul.op != tfl::kMul || mul.inputs.size() != 2 || mul.outputs.size() != 1 ||
      !mul.builtin_data || s_of_x.size() != 256)
    return "not a MUL of two operands";
  if (auto why = CheckMulInt8(g, mul); !why.empty()) return why;
  const int first = mul.inputs[0] == x ? 0 : mul.inputs[1] == x ? 1 : -1;
  if (first < 0) return "the MUL does not read the folded tensor";
  const Shape out = g.shape(mul.outputs[0]);
  if (g.shape(mul.inputs[0]) != out || g.shape(mul.inputs[1]) != out) return "MUL broadcasts";
  const ValueType t = g.value_type(mul.outputs[0]);
  int activation = 0, lo = 0, hi = 0;
  std::memcpy(&activation, mul.builtin_data, sizeof activation);
  if (!QuantizedActivationRange(activation, g.quant(mul.outputs[0]), t, &lo, &hi))
    return "unsupported MUL activation";
  const std::vector<int> p = BinaryInt8Params(g, mul, activation);
  table->assign(256, 0);
  for (int q = QuantMin(t); q <= QuantMax(t); ++q) {
    const uint8_t byte = s_of_x[static_cast<uint8_t>(q)];
    const int s = t == ValueType::kUInt8 ? int(byte) : int(static_cast<int8_t>(byte));
    const int v = first == 0 ? BinaryInt8Value(mul.op, p, q, s) : BinaryInt8Value(mul.op, p, s, q);
    (*table)[static_cast<uint8_t>(q)] = static_cast<uint8_t>(v);
  }
  return "";
}

std::vector<int> Int8GateParams(const GraphView& g, const NodeInfo& mul, int x, std::string* why) {
  *why = "";
  if (mul.op != tfl::kMul || mul.inputs.size() != 2 || mul.outputs.size() != 1 ||
      (mul.inputs[0] != x && mul.inputs[1] != x) || mul.inputs[0] == mul.inputs[1]) {
    *why = "not a MUL of x and another operand";
    return {};
  }
  if (g.value_type(mul.outputs[0]) != ValueType::kInt8) *why = "not int8";
  if (why->empty()) *why = CheckMulInt8(g, mul);
  int activation = 0, lo = 0, hi = 0;
  if (mul.builtin_data) std::memcpy(&activation, mul.builtin_data, sizeof activation);
  if (why->empty() &&
      !QuantizedActivationRange(activation, g.quant(mul.outputs[0]), ValueType::kInt8, &lo, &hi))
    *why = "unsupported MUL activation";
  if (!why->empty()) return {};
  const std::vector<int> p = BinaryInt8Params(g, mul, activation);
  const bool first = mul.inputs[0] == x;
  return {first ? p[0] : p[1], first ? p[1] : p[0], p[3], p[4], p[9], p[10], p[11]};
}

std::string Int8ScalarTable(const GraphView& g, const NodeInfo& n, int x,
                            std::vector<uint8_t>* table) {
  if ((n.op != tfl::kAdd && n.op != tfl::kSub && n.op != tfl::kMul) || n.inputs.size() != 2 ||
      n.outputs.size() != 1)
    return "not an ADD, SUB or MUL of two operands";
  const int first = n.inputs[0] == x ? 0 : n.inputs[1] == x ? 1 : -1;
  const int k = n.inputs[1 - std::max(first, 0)];
  if (first < 0 || k == x) return "not an op of the folded tensor and another";
  if (!g.valid_tensor(k) || !g.IsConstant(k) || NumElements(g.shape(k)) != 1)
    return "the other operand is not a constant scalar";
  if (auto why = n.op == tfl::kMul ? CheckMulInt8(g, n) : CheckAddInt8(g, n); !why.empty())
    return why;
  if (g.shape(n.outputs[0]) != g.shape(x)) return "the op broadcasts its input";
  const ValueType t = g.value_type(n.outputs[0]);
  const std::vector<uint8_t> bytes = g.ConstantBytes(k);
  if (bytes.size() != 1) return "the scalar is not one byte";
  const int kq = t == ValueType::kUInt8 ? int(bytes[0]) : int(static_cast<int8_t>(bytes[0]));
  int activation = 0, lo = 0, hi = 0;
  if (n.builtin_data) std::memcpy(&activation, n.builtin_data, sizeof activation);
  if (!QuantizedActivationRange(activation, g.quant(n.outputs[0]), t, &lo, &hi))
    return "unsupported activation";
  const std::vector<int> p = BinaryInt8Params(g, n, activation);
  table->assign(256, 0);
  for (int q = QuantMin(t); q <= QuantMax(t); ++q) {
    const int v = first == 0 ? BinaryInt8Value(n.op, p, q, kq) : BinaryInt8Value(n.op, p, kq, q);
    (*table)[static_cast<uint8_t>(q)] = static_cast<uint8_t>(v);
  }
  return "";
}

std::string Int8PreluTable(const GraphView& g, const NodeInfo& prelu, int x,
                           std::vector<uint8_t>* table) {
  if (prelu.op != tfl::kPrelu || prelu.inputs.size() != 2 || prelu.outputs.size() != 1 ||
      prelu.inputs[0] != x)
    return "not a PRELU of the folded tensor";
  if (auto why = CheckAddInt8(g, prelu); !why.empty()) return why;
  const int a = prelu.inputs[1];
  if (!g.IsConstant(a)) return "PRELU slopes are not a constant";
  const std::vector<uint8_t> slopes = g.ConstantBytes(a);
  if (g.shape(prelu.outputs[0]) != g.shape(x)) return "PRELU broadcasts beyond its input";
  const Shape xs = g.shape(x), as = g.shape(a);
  const bool one = !slopes.empty() && std::all_of(slopes.begin(), slopes.end(),
                                                  [&](uint8_t v) { return v == slopes[0]; });
  const bool per_channel = !xs.empty() && !as.empty() && as.back() == xs.back() &&
                           NumElements(as) == xs.back() && slopes.size() == size_t(xs.back());
  if (!one && !per_channel) return "PRELU slopes differ, not one per channel";
  // The same arithmetic as prelu_int8 (binary_int8.cl) with AddInt8Op's parameters.
  const ValueType t = g.value_type(prelu.outputs[0]);
  const std::vector<int> p = BinaryInt8Params(g, prelu, 0);  // PRELU has no activation
  const size_t tables = one ? 1 : slopes.size();
  table->assign(256 * tables, 0);
  for (size_t c = 0; c < tables; ++c) {
    const int alpha = t == ValueType::kUInt8 ? int(slopes[c]) : int(static_cast<int8_t>(slopes[c]));
    uint8_t* row = table->data() + 256 * c;
    for (int q = QuantMin(t); q <= QuantMax(t); ++q)
      row[static_cast<uint8_t>(q)] = static_cast<uint8_t>(BinaryInt8Value(prelu.op, p, q, alpha));
  }
  return "";
}

std::unique_ptr<Op> CreateAddInt8(const GraphView& g, const NodeInfo& node) {
  int activation = 0;  // PRELU has no parameters
  if (node.builtin_data) std::memcpy(&activation, node.builtin_data, sizeof activation);
  return std::make_unique<AddInt8Op>(g, node, activation);
}

}  // namespace clgpu
