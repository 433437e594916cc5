// IEEE half <-> float on the host (weights uploaded in fp16 storage, fp16 models).
#pragma once

#include <cstdint>

namespace clgpu {

// Round to nearest even. A finite value past the half range saturates at +-65504 (as the
// device's stores do, kernels/common.cl): Inf there would make a product with zero NaN.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

}  // namespace clgpu
