// The complex64 element-wise part of ops/spectral.cc, shared with CAST (ops/cast.cc), whose
// complex-to-float form is the real part; and CAST's one-kernel conversion op, which it runs on.
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

// An op mapping each element of its one input to one of its output in one launch of `kernel`
// (kernels/<program>.cl, taking in, out, n and, where op >= 0, op) (ops/cast.cc).
std::unique_ptr<Op> MakeConvertOp(const NodeInfo& node, const char* type, const char* algorithm,
                                  const char* program, const char* kernel, int op = -1);

}  // namespace clgpu
