// Element-wise int8 / uint8 ops whose output integer is a function of the input integer alone:
// LOGISTIC, TANH, ELU (TFLite's own lookup tables, built from float math), HARD_SWISH (its int16
// fixed-point reference code), the RELU family and LEAKY_RELU (requantization and a clamp). The
// 256 outputs are computed here on the host with the CPU kernels' arithmetic step by step (the
// same libm for the float ones) and the device only looks them up (kernels/lut_int8.cl).
//
// Which code each runtime's x86 wheel runs: both build the float tables with LUTPopulate (or its
// 2.14 predecessor, the same arithmetic) for LOGISTIC / TANH / ELU, and both run the scalar
// reference HARD_SWISH (its NEON loop is for real ARM NEON only) and ReluX / QuantizeLeakyRelu
// (scalar MultiplyByQuantizedMultiplier: ties away from zero).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

using Table = std::array<uint8_t, 256>;

// The table of `f` over the input type's integers, indexed by the integer's low byte.
template <typename F>
Table Tabulate(ValueType t, F f) {
  Table table{};
  for (int q = QuantMin(t); q <= QuantMax(t); ++q)
    table[static_cast<uint8_t>(q)] =
        static_cast<uint8_t>(std::clamp(f(q), QuantMin(t), QuantMax(t)));
  return table;
}

// TFLite's LUTPopulate: dequantize, transform, rescale and round, all in float.
template <typename F>
Table FloatTable(ValueType t, const QuantParams& in, const QuantParams& out, F transform) {
  const float inverse_scale = 1 / out.scale[0];
  return Tabulate(t, [&](int q) {
    const float dequantized = in.scale[0] * static_cast<float>(q - in.zero_point[0]);
    const float rescaled = std::round(transform(dequantized) * inverse_scale);
    return static_cast<int>(rescaled + static_cast<float>(out.zero_point[0]));
  });
}

// gemmlowp's int16 SaturatingRoundingDoublingHighMul and RoundingDivideByPOT.
int16_t RoundingHighMul16(int16_t a, int16_t b) {
  if (a == b && a == std::numeric_limits<int16_t>::min())
    return std::numeric_limits<int16_t>::max();
  const int32_t ab = int32_t(a) * int32_t(b);
  const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return static_cast<int16_t>((ab + nudge) / (1 << 15));
}
int16_t RoundingShift16(int16_t x, int exponent) {
  const int32_t mask = (1 << exponent) - 1;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return static_cast<int16_t>((x >> exponent) + ((x & mask) > threshold ? 1 : 0));
}
int16_t SaturatingShift16(int16_t v, int amount) {
  const int64_t r = int64_t(v) * (int64_t(1) << amount);
  return static_cast<int16_t>(std::clamp<int64_t>(r, -32768, 32767));
}
// TFLite's DownScaleInt32ToInt16Multiplier.
int16_t Multiplier16(int32_t m) {
  if (m >= std::numeric_limits<int32_t>::max() - (1 << 15)) return 32767;
  return static_cast<int16_t>((m + (1 << 15)) >> 16);
}

// HARD_SWISH as TFLite's reference_ops::HardSwish on int8 / uint8 (its params from
// HardSwishPrepare, the scales in float); false if the CPU kernel refuses the scales.
bool HardSwishTable(ValueType t, const QuantParams& in, const QuantParams& out, Table* table) {
  const float hires_input_scale = (1.0f / 128.0f) * in.scale[0];
  const float reluish_scale = 3.0f / 32768.0f;
  const FixedPoint om = QuantizeMultiplier(hires_input_scale / out.scale[0]);
  const FixedPoint rm = QuantizeMultiplier(hires_input_scale / reluish_scale);
  if (om.shift > 0) return false;
  const int16_t out_mult = Multiplier16(om.multiplier), relu_mult = Multiplier16(rm.multiplier);
  *table = Tabulate(t, [&](int q) {
    const int16_t x = static_cast<int16_t>(q - in.zero_point[0]);
    const int16_t hires = static_cast<int16_t>(x * (1 << 7));
    const int16_t preshift_out = RoundingHighMul16(hires, out_mult);
    int16_t reluish = hires;
    if (rm.shift > 0) reluish = SaturatingShift16(reluish, rm.shift - 1);
    reluish = RoundingHighMul16(reluish, relu_mult);
    if (rm.shift > 0) reluish = SaturatingShift16(reluish, 1);
    if (rm.shift < 0) reluish = RoundingShift16(reluish, -rm.shift);
    reluish = static_cast<int16_t>((reluish + (1 << 15)) >> 1);
    // SaturatingDoublingHighMul: truncating, saturating only -32768 * -32768.
    const int16_t preshift =
        reluish == -32768 && preshift_out == -32768
            ? int16_t(32767)
            : static_cast<int16_t>(int32_t(reluish) * int32_t(preshift_out) / (1 << 15));
    int16_t v = RoundingShift16(preshift, -om.shift);
    v = static_cast<int16_t>(v + out.zero_point[0]);
    return int(v);
  });
  return true;
}

// The RELU family as QuantizedReluX: requantize (the multiplier's scale ratio in float), then
// clamp to the activation's bounds rounded in float.
Table ReluTable(ValueType t, const QuantParams& in, const QuantParams& out, float lo, float hi) {
  const FixedPoint m = QuantizeMultiplier(in.scale[0] / out.scale[0]);
  const int zp = out.zero_point[0];
  const int qlo = std::max(QuantMin(t), zp + static_cast<int>(std::round(lo / out.scale[0])));
  const int qhi = std::isinf(hi)
                      ? QuantMax(t)
                      : std::min(QuantMax(t), zp + static_cast<int>(std::round(hi / out.scale[0])));
  return Tabulate(t, [&](int q) {
    const int v = zp + MultiplyByQuantizedMultiplier(q - in.zero_point[0], m.multiplier, m.shift);
    return std::clamp(v, qlo, qhi);
  });
}

// The table of this node, or the reason the CPU kernel (and so this op) cannot run it.
std::string MakeTable(const GraphView& g, const NodeInfo& node, Table* table) {
  const ValueType t = g.value_type(node.inputs[0]);
  const QuantParams in = g.quant(node.inputs[0]), out = g.quant(node.outputs[0]);
  const float inf = std::numeric_limits<float>::infinity();
  switch (node.op) {
    case tfl::kLogistic:
      // Both runtimes' Prepare insist on this output scale (any other fails on the CPU too).
      if (double(out.scale[0]) != 1.0 / 256) return "int8 LOGISTIC output scale is not 1/256";
      *table = FloatTable(t, in, out, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
      return "";
    case tfl::kTanh:
      *table = FloatTable(t, in, out, [](float v) { return std::tanh(v); });
      return "";
    case tfl::kElu:
      if (t != ValueType::kInt8) return "ELU on uint8 is not supported";
      *table = FloatTable(t, in, out, [](float v) { return v < 0.0f ? std::expm1(v) : v; });
      return "";
    case tfl::kHardSwish:
      if (!HardSwishTable(t, in, out, table))
        return "int8 HARD_SWISH output scale below the input's / 128";
      return "";
    case tfl::kRelu:
      *table = ReluTable(t, in, out, 0.0f, inf);
      return "";
    case tfl::kRelu6:
      *table = ReluTable(t, in, out, 0.0f, 6.0f);
      return "";
    case tfl::kReluN1To1:
      *table = ReluTable(t, in, out, -1.0f, 1.0f);
      return "";
    case tfl::kRelu0To1:
      *table = ReluTable(t, in, out, 0.0f, 1.0f);
      return "";
    case tfl::kLeakyRelu: {
      if (!node.builtin_data) return "missing LEAKY_RELU params";
      float alpha = 0;
      std::memcpy(&alpha, node.builtin_data, sizeof alpha);
      // LeakyReluPrepare: both ratios in float, then QuantizeMultiplier.
      const FixedPoint ma = QuantizeMultiplier(in.scale[0] * alpha / out.scale[0]);
      const FixedPoint mi = QuantizeMultiplier(in.scale[0] / out.scale[0]);
      *table = Tabulate(t, [&](int q) {
        const int x = q - in.zero_point[0];
        const FixedPoint& m = x >= 0 ? mi : ma;
        return out.zero_point[0] + MultiplyByQuantizedMultiplier(x, m.multiplier, m.shift);
      });
      return "";
    }
    default:
      return "no int8 table for this op";
  }
}

class LutInt8Op : public Op, public Chunker {
 public:
  LutInt8Op(const NodeInfo& node, const char* name, const Table& table)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), name_(name), table_(table) {}
  // A chunk: the same table over a box.
  explicit LutInt8Op(const LutInt8Op& whole)
      : Op(whole.node_index()), name_(whole.name_), table_(whole.table_) {}
  const char* type_name() const override { return name_; }
  std::string algorithm() const override { return "int8_table"; }
  const Chunker* chunker() const override { return this; }
  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    spec->views = {in[0], in[0]};
    for (size_t a = 0; a < in[0].size(); ++a) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>&, const Box& out) const override {
    return {out};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<LutInt8Op>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>&, const std::vector<Shape>& out_shapes,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    if (!table_buf_) table_buf_ = UploadBytes(ctx, table_.data(), table_.size());
    const int n = static_cast<int>(NumElements(out_shapes[0]));
    Launch l;
    l.name = "lut_int8";
    l.kernel = CreateKernel(*ctx.GetProgram("lut_int8"), l.name);
    SetArgs(l.kernel, in[0], table_buf_.get(), out[0], n);
    l.global[0] = RoundUp(std::max((n + 3) / 4, 1), 64);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  const char* name_;
  Table table_;
  Buffer table_buf_;
};

}  // namespace

std::string CheckLutInt8(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  const ValueType t = g.value_type(node.inputs[0]);
  for (int x : {node.inputs[0], node.outputs[0]})
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  if (g.shape(node.inputs[0]) != g.shape(node.outputs[0]))
    return "output shape differs from the input's";
  Table table;
  return MakeTable(g, node, &table);
}

std::string Int8UnaryTable(const GraphView& g, const NodeInfo& node, std::vector<uint8_t>* table) {
  if (auto why = CheckLutInt8(g, node); !why.empty()) return why;
  Table t;
  if (auto why = MakeTable(g, node, &t); !why.empty()) return why;
  table->assign(t.begin(), t.end());
  return "";
}

std::unique_ptr<Op> CreateLutInt8(const GraphView& g, const NodeInfo& node, const char* name) {
  Table table;
  if (auto why = MakeTable(g, node, &table); !why.empty()) throw Error(why);
  return std::make_unique<LutInt8Op>(node, name, table);
}

}  // namespace clgpu
