#include "graph/dequantize.h"

#include <cstdint>

namespace clgpu {

std::string CheckDequantizable(const TfLiteTensor& x, const Shape& s, const std::string& name) {
  const ValueType t = ValueTypeOf(x.type);
  if (!IsQuantized(t)) return "constant " + name + " is not int8 or uint8";
  if (x.sparsity) return "constant " + name + " is sparse";
  const QuantParams q = ReadQuantParams(x);
  if (!q.valid())
    return "constant " + name + " has no usable quantization (scales missing, not finite and " +
           "positive, or not as many as its zero points)";
  for (int32_t z : q.zero_point)
    if (z < QuantMin(t) || z > QuantMax(t))
      return "constant " + name + " has zero point " + std::to_string(z) + " outside the " +
             ValueTypeName(t) + " range";
  if (q.per_channel()) {
    const int rank = static_cast<int>(s.size());
    if (q.axis < 0 || q.axis >= rank || s[q.axis] != static_cast<int>(q.scale.size()))
      return "constant " + name + " has " + std::to_string(q.scale.size()) + " scales along axis " +
             std::to_string(q.axis) + " of " + ShapeString(s);
  }
  if (x.data.raw_const == nullptr || x.bytes < static_cast<size_t>(NumElements(s)))
    return "constant " + name + " holds fewer bytes than its shape " + ShapeString(s) + " needs";
  return "";
}

void DequantizeInto(const void* data, ValueType type, const Shape& s, const QuantParams& q,
                    float* out) {
  // [outer, channels, inner] around the quantized axis: one (scale, zero point) per channel.
  int64_t outer = 1, channels = 1, inner = 1;
  if (q.per_channel()) {
    for (int a = 0; a < q.axis; ++a) outer *= s[a];
    channels = s[q.axis];
    for (size_t a = q.axis + 1; a < s.size(); ++a) inner *= s[a];
  } else {
    inner = NumElements(s);
  }
  const auto* i8 = static_cast<const int8_t*>(data);
  const auto* u8 = static_cast<const uint8_t*>(data);
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const float scale = q.scale[c];
      const int32_t zp = q.zero_point[c];
      for (int64_t k = 0; k < inner; ++k, ++i) {
        const int32_t v = type == ValueType::kUInt8 ? int32_t(u8[i]) : int32_t(i8[i]);
        // One rounding, as TFLite's DEQUANTIZE and hybrid kernels: float(q - zp) * scale.
        out[i] = static_cast<float>(v - zp) * scale;
      }
    }
}

}  // namespace clgpu
