// CONCATENATION's op, shared with PACK (ops/pack.cc): stacking N tensors along a new axis is
// concatenating them each seen with a unit axis there, so PACK reuses the copy kernels and chunks.
#pragma once

#include <memory>

#include "ops/op.h"

namespace clgpu {

// PACK of the node's inputs along `axis` (in [0, rank]), as a concatenation.
std::unique_ptr<Op> MakePackOp(const NodeInfo& node, int axis);

}  // namespace clgpu
