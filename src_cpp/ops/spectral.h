// The complex64 element-wise part of ops/spectral.cc, shared with CAST (ops/cast.cc), whose
// complex-to-float form is the real part.
#pragma once

#include <memory>
#include <string>

#include "ops/op.h"

namespace clgpu {

// What a complex element gives (kernels/spectral.cl complex_part's op numbers).
constexpr int kPartReal = 0, kPartImag = 1, kPartAbs = 2;

// A node of one complex64 run-time input and a float32 output of its shape: "" if ours.
std::string CheckComplexPart(const GraphView& g, const NodeInfo& node);
// Its op: `part` of each element, under the node's op name.
std::unique_ptr<Op> CreateComplexPart(const NodeInfo& node, const char* name, int part);

}  // namespace clgpu
