// The real values of an int8 / uint8 constant (a dynamic-range model's weights, or the source of
// a DEQUANTIZE of a constant): w = scale[c] * (q - zero_point[c]), c the index along the
// quantized dimension when there is one scale per channel, else one scale for all. Shared by the
// folded DEQUANTIZE (delegate/claim.h) and the hybrid ops' weights (ops/hybrid_weights.h).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// "" if `x` (of shape `s`) holds int8 / uint8 data with quantization we can apply: valid params
// (graph/quant.h), per-channel ones along an axis of `s` with one scale per index of it, and at
// least the shape's bytes. Else why not ("... has 3 scales along axis 0 of [4,2]").
std::string CheckDequantizable(const TfLiteTensor& x, const Shape& s, const std::string& name);

// The dequantized values of the elements of `data` (int8 or uint8 per `type`) laid out as `s`.
void DequantizeInto(const void* data, ValueType type, const Shape& s, const QuantParams& q,
                    float* out);

}  // namespace clgpu
