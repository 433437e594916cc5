#include "ops/quant.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace clgpu {

FixedPoint QuantizeMultiplier(double real) {
  FixedPoint f;
  if (real == 0.0) return f;
  int shift = 0;
  const double q = std::frexp(real, &shift);
  auto fixed = static_cast<int64_t>(std::round(q * static_cast<double>(1LL << 31)));
  if (fixed == (1LL << 31)) {
    fixed /= 2;
    ++shift;
  }
  if (shift < -31) {
    shift = 0;
    fixed = 0;
  }
  f.multiplier = static_cast<int32_t>(fixed);
  f.shift = shift;
  return f;
}

int32_t MultiplyByQuantizedMultiplier(int32_t x, int32_t multiplier, int shift, bool up) {
  const int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
  const int64_t prod = int64_t(int32_t(uint32_t(x) << left)) * multiplier;
  const int64_t high = (prod + (int64_t(1) << 30)) >> 31;
  if (right == 0) return int32_t(high);
  if (up) return int32_t((high + (int64_t(1) << (right - 1))) >> right);
  const int64_t mask = (int64_t(1) << right) - 1;
  const int64_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return int32_t((high >> right) + ((high & mask) > threshold ? 1 : 0));
}

bool QuantizedActivationRange(int activation, const QuantParams& out, ValueType type, int* lo,
                              int* hi) {
  const int qmin = QuantMin(type), qmax = QuantMax(type);
  // zero_point + round(f / scale), the division in float as TFLite does; saturated to the type's
  // range first (a tiny scale would overflow the int).
  auto quantize = [&](float f) {
    const double r = std::round(static_cast<double>(f / out.scale[0]));
    return static_cast<int>(std::clamp(r + out.zero_point[0], double(INT_MIN), double(INT_MAX)));
  };
  *lo = qmin, *hi = qmax;
  switch (activation) {
    case 0:
      return true;
    case 1:  // RELU
      *lo = std::max(qmin, quantize(0.f));
      return true;
    case 2:  // RELU_N1_TO_1
      *lo = std::max(qmin, quantize(-1.f));
      *hi = std::min(qmax, quantize(1.f));
      return true;
    case 3:  // RELU6
      *lo = std::max(qmin, quantize(0.f));
      *hi = std::min(qmax, quantize(6.f));
      return true;
    default:
      return false;
  }
}

int VectorLoopRounding(const CpuKernels& k, int channels, int width) {
  return k.neon ? channels / width * width : 0;
}

OutputStage MakeOutputStage(float input_scale, const std::vector<float>& weight_scales,
                            int channels, const QuantParams& out, int up_below, int act_min,
                            int act_max) {
  OutputStage s;
  s.params.reserve(2 * size_t(channels));
  for (int c = 0; c < channels; ++c) {
    const float ws = weight_scales.size() == 1 ? weight_scales[0] : weight_scales.at(c);
    // TFLite computes the effective scale in double from the float scales.
    const FixedPoint f =
        QuantizeMultiplier(static_cast<double>(input_scale) * static_cast<double>(ws) /
                           static_cast<double>(out.scale[0]));
    s.params.push_back(f.multiplier);
    s.params.push_back(f.shift);
  }
  s.up_below = up_below;
  s.zero_point = out.zero_point[0];
  s.act_min = act_min;
  s.act_max = act_max;
  return s;
}

Buffer UploadOutputStage(OpContext& ctx, const OutputStage& s, int c0, int count) {
  const int total = static_cast<int>(s.params.size() / 2);
  if (count < 0) count = total - c0;
  std::vector<int> ints(s.params.begin() + 2 * c0, s.params.begin() + 2 * (c0 + count));
  if (!s.table.empty()) {
    const size_t at = ints.size();
    ints.resize(at + (s.table.size() + 3) / 4);
    std::memcpy(ints.data() + at, s.table.data(), s.table.size());
  }
  return UploadInts(ctx, ints);
}

std::string CheckQuantActivation(const GraphView& g, int t, ValueType type) {
  if (!g.valid_tensor(t)) return "tensor index " + std::to_string(t) + " is invalid";
  if (g.value_type(t) != type)
    return "tensor " + g.name(t) + " is " + ValueTypeName(g.value_type(t)) + ", not " +
           ValueTypeName(type);
  if (!g.tensor(t).dims) return "tensor " + g.name(t) + " has no shape";
  const QuantParams q = g.quant(t);
  if (!q.valid()) return "tensor " + g.name(t) + " has no valid quantization";
  if (q.per_channel()) return "tensor " + g.name(t) + " is quantized per channel";
  if (q.zero_point[0] < QuantMin(type) || q.zero_point[0] > QuantMax(type))
    return "tensor " + g.name(t) + " has zero point " + std::to_string(q.zero_point[0]) +
           " outside its type's range";
  if (NumElements(g.shape(t)) > INT_MAX)
    return "tensor " + g.name(t) + " has more than 2^31 - 1 elements";
  return "";
}

std::string CheckMovedTensors(const GraphView& g, const std::vector<int>& tensors) {
  const ValueType t =
      !tensors.empty() && g.valid_tensor(tensors[0]) ? g.value_type(tensors[0]) : ValueType::kFloat;
  if (!IsQuantized(t)) return CheckFloatTensors(g, tensors);
  for (int x : tensors)
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  return "";
}

std::string CheckQuantWeights(const GraphView& g, int t, int axis, int channels) {
  if (!g.valid_tensor(t) || g.type(t) != kTfLiteInt8) return "weights are not int8";
  if (!g.IsConstant(t)) return "weights are not constant";
  const QuantParams q = g.quant(t);
  if (!q.valid()) return "weights have no valid quantization";
  if (q.per_channel() && (q.axis != axis || int(q.scale.size()) != channels))
    return "weights are quantized per channel along axis " + std::to_string(q.axis) + " (" +
           std::to_string(q.scale.size()) + " scales), not along the output channels";
  for (int32_t z : q.zero_point)
    if (z != 0) return "weights have a nonzero zero point";
  return "";
}

std::string CheckQuantBias(const GraphView& g, int t, int channels) {
  if (!g.valid_tensor(t) || g.type(t) != kTfLiteInt32) return "bias is not int32";
  if (!g.IsConstant(t)) return "bias is not constant";
  if (NumElements(g.shape(t)) != channels) return "bias size != output channels";
  return "";
}

std::string CheckInt8FilterOp(const GraphView& g, const NodeInfo& node, int weight_axis,
                              int channels) {
  const int x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  if (g.value_type(x) != ValueType::kInt8 || g.value_type(y) != ValueType::kInt8)
    return "quantized input/output is not int8 (uint8 filters are not supported)";
  if (auto why = CheckQuantActivation(g, x, ValueType::kInt8); !why.empty()) return why;
  if (auto why = CheckQuantActivation(g, y, ValueType::kInt8); !why.empty()) return why;
  if (auto why = CheckQuantWeights(g, w, weight_axis, channels); !why.empty()) return why;
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  if (has_bias)
    if (auto why = CheckQuantBias(g, node.inputs[2], channels); !why.empty()) return why;
  // Each output sums K products of at most 255 x 128 in int32, as TFLite does; and the GEMM's
  // bias with the input zero point folded in must stay an int32.
  const int64_t k = NumElements(g.shape(w)) / std::max(channels, 1);
  if (k * 255 * 128 > INT_MAX) return "more than 65793 products per output overflow int32";
  const std::vector<uint8_t> bytes = g.ConstantBytes(w);
  const auto* wq = reinterpret_cast<const int8_t*>(bytes.data());
  const auto n = static_cast<int64_t>(bytes.size());
  const std::vector<int32_t> bias =
      has_bias ? ConstantInt32(g, node.inputs[2]) : std::vector<int32_t>();
  const int64_t zp = g.quant(x).zero_point[0];
  std::vector<int64_t> sum(channels, 0);
  const Shape ws = g.shape(w);
  int64_t inner = 1;  // elements after the channel axis
  for (size_t a = weight_axis + 1; a < ws.size(); ++a) inner *= ws[a];
  // Runs of `inner` elements cycle through the channels (no division per element: this runs at
  // every claim, over every weight of the model).
  for (int64_t i = 0, c = 0; i < n && channels > 0; i += inner, c = c + 1 == channels ? 0 : c + 1) {
    int64_t s = 0;
    for (int64_t j = i, end = std::min(i + inner, n); j < end; ++j) s += wq[j];
    sum[c] += s;
  }
  for (int c = 0; c < channels; ++c) {
    const int64_t f = (has_bias ? bias[c] : 0) - zp * sum[c];
    if (f < INT_MIN || f > INT_MAX)
      return "the bias with the input zero point folded in overflows int32";
  }
  return "";
}

std::string DescribeQuant(const QuantParams& q) {
  if (!q.valid()) return "none";
  if (q.per_channel())
    return "per-channel(" + std::to_string(q.scale.size()) + ",axis=" + std::to_string(q.axis) +
           ")";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g/%d", q.scale[0], q.zero_point[0]);
  return buf;
}

std::vector<int8_t> ConstantInt8(const GraphView& g, int t) {
  const std::vector<uint8_t> b = g.ConstantBytes(t);
  std::vector<int8_t> v(b.size());
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<int32_t> ConstantInt32(const GraphView& g, int t) {
  const std::vector<uint8_t> b = g.ConstantBytes(t);
  std::vector<int32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

}  // namespace clgpu
