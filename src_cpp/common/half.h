// IEEE half <-> float on the host (weights uploaded in fp16 storage, fp16 models).
#pragma once

#include <cstdint>

namespace clgpu {

uint16_t FloatToHalf(float f);  // round to nearest even; overflow -> inf
float HalfToFloat(uint16_t h);

}  // namespace clgpu
