// What an op's kernels may apply after their clamp when element-wise nodes fold into them
// (AttachEpilogue; the folds themselves are fusion/epilogue.cc): the MAXIMUM / MINIMUM, MUL, ADD,
// SUB or DIV of a constant scalar that may follow the unary op.
#pragma once

#include <cstddef>
#include <string>

namespace clgpu {

// A node of an epilogue chain's value and a constant scalar: a MAXIMUM or MINIMUM (a clamp
// written as a node, as Keras' tf.math.maximum and PyTorch's clamp convert), applied in the
// node's operand order (TFLite compares, so where a NaN ends up depends on that order); or a MUL,
// ADD, SUB or DIV without an activation (hard sigmoid's / 6 after a RELU6, a rescale), SUB and
// DIV with the chain's value first. `op` is kernels/common.cl's POST_CLAMP number.
struct PostClamp {
  enum Op { kMaximum = 1, kMinimum = 2, kMul = 5, kAdd = 6, kSub = 7, kDiv = 8 };
  Op op = kMaximum;
  float value = 0;
  bool chain_first = true;  // the chain's value is the node's first operand
  // The POST_CLAMP number: a MAXIMUM / MINIMUM with the constant first is 2 more.
  int Code() const { return op + (op <= kMinimum && !chain_first ? 2 : 0); }
};
constexpr size_t kMaxPostClamps = 2;
constexpr int kIdentityEpilogue = 9;  // no unary op: only post clamps (kernels/common.cl)

// An epilogue's build defines (Op::epilogue_defines: -DCLGPU_EPILOGUE=..., -DCLGPU_POST1=...)
// under another kernel's names for a second epilogue it applies: `prefix` in place of "CLGPU_"
// (the squeeze's dense layers "SQ1_", a folded depthwise "CLGPU_DW_").
inline std::string EpilogueDefinesAs(const std::string& defines, const std::string& prefix) {
  std::string out = defines;
  const std::string from = "CLGPU_";
  for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + prefix.size()))
    out.replace(at, from.size(), prefix);
  return out;
}

}  // namespace clgpu
