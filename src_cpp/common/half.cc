#include "common/half.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace clgpu {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / inf
  if (abs >= 0x477ff000u) return sign | 0x7bffu;  // rounds past 65504: saturates
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): scale into an integer count of 2^-24 units.
    const float a = std::fabs(f) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(a));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  float f;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24, exact in float
    f = static_cast<float>(mant) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &f, 4);
  } else if (exp == 31) {
    f = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    std::memcpy(&bits, &f, 4);
  } else {  // normal: rebias the exponent (15 -> 127), widen the mantissa; no libm call, as
            // weights of hundreds of MB are widened at a model's start
    bits = ((exp + 112u) << 23) | (mant << 13);
  }
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace clgpu
