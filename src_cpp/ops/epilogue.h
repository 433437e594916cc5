// What an op's kernels may apply after their clamp when element-wise nodes fold into them
// (AttachEpilogue; the folds themselves are fusion/epilogue.cc): the MAXIMUM / MINIMUM of a
// constant scalar that may follow the unary op.
#pragma once

#include <cstddef>

namespace clgpu {

// A MAXIMUM or MINIMUM of an epilogue chain's value and a constant scalar (a clamp written as a
// node, as Keras' tf.math.maximum and PyTorch's clamp convert), applied in the node's operand
// order: TFLite compares, so where a NaN ends up depends on that order.
struct PostClamp {
  bool maximum = true;
  float value = 0;
  bool chain_first = true;  // the chain's value is the node's first operand
};
constexpr size_t kMaxPostClamps = 2;
constexpr int kIdentityEpilogue = 9;  // no unary op: only post clamps (kernels/common.cl)

}  // namespace clgpu
