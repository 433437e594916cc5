#include "ops/cpu_kernel_rules.h"

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "graph/quant.h"
#include "graph/validate.h"
#include "ops/pad.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

struct RankRule {
  int op;
  size_t input;
  size_t rank;
  const char* what;
};
// CONV_2D's kernel checks only its bias' element count, FULLY_CONNECTED's and TRANSPOSE_CONV's
// likewise.
constexpr RankRule kRankRules[] = {
    {tfl::kDepthwiseConv2d, 2, 1, "DEPTHWISE_CONV_2D's bias"},
    {tfl::kSplitV, 1, 1, "SPLIT_V's size_splits"},
    {tfl::kTranspose, 1, 1, "TRANSPOSE's perm"},
    {tfl::kTransposeConv, 0, 1, "TRANSPOSE_CONV's output_shape"},
    {tfl::kSlice, 1, 1, "SLICE's begin"},
    {tfl::kSlice, 2, 1, "SLICE's size"},
    {tfl::kStridedSlice, 1, 1, "STRIDED_SLICE's begin"},
    {tfl::kStridedSlice, 2, 1, "STRIDED_SLICE's end"},
    {tfl::kStridedSlice, 3, 1, "STRIDED_SLICE's strides"},
};
constexpr int kMaxStep = 32767;

}  // namespace

std::string CheckCpuOperandRanks(const GraphView& g, const NodeInfo& n) {
  for (const RankRule& r : kRankRules)
    if (n.op == r.op && HasInput(n, r.input) && g.shape(n.inputs[r.input]).size() != r.rank)
      return std::string(r.what) + " has rank " +
             std::to_string(g.shape(n.inputs[r.input]).size()) + ", TFLite's kernel takes " +
             std::to_string(r.rank);
  return "";
}

namespace {

// Where an op with a fused activation keeps it in its params; -1: none that this rule reads.
long ActivationOffset(int op) {
  switch (op) {
    case tfl::kConv2d:
      return long(offsetof(tfl::ConvParams, activation));
    case tfl::kDepthwiseConv2d:
      return long(offsetof(tfl::DepthwiseConvParams, activation));
    case tfl::kFullyConnected:
      return long(offsetof(tfl::FullyConnectedParams, activation));
    case tfl::kAdd:
    case tfl::kSub:
    case tfl::kMul:
      return long(offsetof(tfl::AddParams, activation));
    case tfl::kAveragePool2d:
    case tfl::kMaxPool2d:
      return long(offsetof(tfl::PoolParams, activation));
    default:
      return -1;
  }
}

}  // namespace

std::string CheckCpuActivationRange(const GraphView& g, const NodeInfo& n) {
  const long at = ActivationOffset(n.op);
  if (at < 0 || !n.builtin_data || n.outputs.empty() || !g.valid_tensor(n.outputs[0]) ||
      !IsQuantized(g.value_type(n.outputs[0])))
    return "";
  int activation = 0;
  std::memcpy(&activation, static_cast<const char*>(n.builtin_data) + at, sizeof activation);
  const QuantParams q = g.quant(n.outputs[0]);
  if (q.scale.empty()) return "";
  // RELU, RELU_N1_TO_1, RELU6: the bounds TFLite quantizes, round(f / scale) in float.
  const std::vector<float> bounds = activation == 1   ? std::vector<float>{0.f}
                                    : activation == 2 ? std::vector<float>{-1.f, 1.f}
                                    : activation == 3 ? std::vector<float>{0.f, 6.f}
                                                      : std::vector<float>{};
  for (float f : bounds) {
    const float r = std::round(f / q.scale[0]);
    if (!(r >= static_cast<float>(INT_MIN) && r <= static_cast<float>(INT_MAX)))
      return "its fused activation's bounds overflow int32 in the output's scale, which TFLite's "
             "kernel refuses at prepare";
  }
  return "";
}

std::string CheckCpuPrepare(const GraphView& g, const NodeInfo& n) {
  if (n.op == tfl::kShape && n.outputs.size() == 1 && g.valid_tensor(n.outputs[0])) {
    // SHAPE writes the type its options name: int32 or int64, or its prepare fails.
    int out_type = -1;
    if (n.builtin_data) std::memcpy(&out_type, n.builtin_data, sizeof out_type);
    if ((out_type != kTfLiteInt32 && out_type != kTfLiteInt64) || out_type != g.type(n.outputs[0]))
      return "SHAPE's options name the output type " + std::to_string(out_type) +
             ", TFLite's kernel writes int32 or int64 as its output is declared";
  }
  const std::string why = CheckCpuOperandRanks(g, n);
  return why.empty() ? CheckCpuActivationRange(g, n) : why;
}

namespace {

// A SLICE whose constant begin and size leave its input, or make a box larger than its output
// (tflite_runtime 2.14's kernel does not check them: it copies the box, past its input and its
// output, whose declared shape it keeps).
std::string SliceOutOfBounds(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kSlice || n.inputs.size() != 3 || !g.valid_tensor(n.inputs[0])) return "";
  std::vector<int64_t> begin, size;
  if (!g.ReadConstantInts(n.inputs[1], "begin", &begin).empty() ||
      !g.ReadConstantInts(n.inputs[2], "size", &size).empty())
    return "";
  const Shape in = g.shape(n.inputs[0]);
  if (begin.size() != in.size() || size.size() != in.size()) return "";
  Shape box(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t end = size[a] == -1 ? in[a] : begin[a] + size[a];
    if (begin[a] < 0 || size[a] < -1 || end > in[a])
      return "node " + std::to_string(n.index) + " is a SLICE past its input " + ShapeString(in);
    box[a] = static_cast<int>(end - begin[a]);
  }
  // A box within the input but larger than the output the model declares: the kernel writes
  // it all into that output (LiteRT's kernel sizes its output to the box first).
  if (n.outputs.size() == 1 && g.valid_tensor(n.outputs[0]) &&
      NumElements(box) > NumElements(g.shape(n.outputs[0])))
    return "node " + std::to_string(n.index) + " is a SLICE of " + ShapeString(box) +
           " into its declared output " + ShapeString(g.shape(n.outputs[0]));
  return "";
}

// A MIRROR_PAD whose constant paddings leave [0, extent - 1] on an axis in REFLECT mode or
// [0, extent] in SYMMETRIC (found by the fuzzer): tflite_runtime 2.14's kernel does not check
// them and mirrors its output's index past its input; with part of the model delegated the
// smaller arena made that a segmentation fault where the CPU alone got through. (LiteRT's kernel
// refuses them at prepare.)
std::string MirrorPadOutOfBounds(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kMirrorPad || n.inputs.size() != 2 || !n.builtin_data ||
      !g.valid_tensor(n.inputs[0]))
    return "";
  int mode = 0;  // TfLiteMirrorPaddingParams' first field
  std::memcpy(&mode, n.builtin_data, sizeof mode);
  std::vector<int64_t> p;
  if (!g.ReadConstantInts(n.inputs[1], "paddings", &p).empty()) return "";
  const Shape in = g.shape(n.inputs[0]);
  if (p.size() != 2 * in.size()) return "";
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t most = mode == kPadReflect ? in[a] - 1 : in[a];
    for (int64_t v : {p[2 * a], p[2 * a + 1]})
      if (v < 0 || v > most)
        return "node " + std::to_string(n.index) + " is a MIRROR_PAD whose paddings leave axis " +
               std::to_string(a) + " of its input " + ShapeString(in);
  }
  return "";
}

// A TRANSPOSE whose constant perm names an axis twice: TFLite's kernel checks each entry's range,
// not that they differ, and then strides past its input (perm [0, 2, 1, 2] on 1x6x6x8 reads
// offsets up to 320 of 288 values; the fuzzer's mutant ran out of bounds beside the delegate's
// partitions, a wrong output with one runtime and a heap corruption with the other).
std::string TransposeAxisRepeats(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kTranspose || n.inputs.size() != 2) return "";
  std::vector<int64_t> perm;
  if (!g.ReadConstantInts(n.inputs[1], "perm", &perm).empty()) return "";
  for (size_t i = 0; i < perm.size(); ++i)
    for (size_t j = i + 1; j < perm.size(); ++j)
      if (perm[i] == perm[j])
        return "node " + std::to_string(n.index) + " is a TRANSPOSE whose perm names axis " +
               std::to_string(perm[i]) + " twice";
  return "";
}

}  // namespace

std::string CpuKernelUnsafe(const GraphView& g, const NodeInfo& n) {
  if (std::string why = SliceOutOfBounds(g, n); !why.empty()) return why;
  if (std::string why = MirrorPadOutOfBounds(g, n); !why.empty()) return why;
  if (std::string why = TransposeAxisRepeats(g, n); !why.empty()) return why;
  if (!n.builtin_data) return "";
  std::vector<int> steps;
  if (n.op == tfl::kConv2d) {
    const auto* p = static_cast<const tfl::ConvParams*>(n.builtin_data);
    steps = {p->stride_width, p->stride_height, p->dilation_width, p->dilation_height};
  } else if (n.op == tfl::kDepthwiseConv2d) {
    const auto* p = static_cast<const tfl::DepthwiseConvParams*>(n.builtin_data);
    steps = {p->stride_width, p->stride_height, p->dilation_width, p->dilation_height};
  } else if (n.op == tfl::kAveragePool2d || n.op == tfl::kMaxPool2d) {
    const auto* p = static_cast<const tfl::PoolParams*>(n.builtin_data);
    steps = {p->stride_width, p->stride_height, p->filter_width, p->filter_height};
  }
  for (int s : steps)
    if (s > kMaxStep)
      return "node " + std::to_string(n.index) + " has a stride, dilation or window of " +
             std::to_string(s) + " (above " + std::to_string(kMaxStep) + ")";
  return "";
}

std::string WholeModelOnCpu(const GraphView& g, const std::vector<NodeInfo>& nodes, bool* warn) {
  *warn = false;
  if (std::string why = CheckGraphOrder(g, nodes); !why.empty())
    return "the graph is out of order: " + why;
  *warn = true;
  if (std::string why = CheckWrittenConstants(g, nodes); !why.empty())
    return why + ", which TFLite's partitioner takes for a constant";
  for (const NodeInfo& n : nodes)
    if (std::string why = CpuKernelUnsafe(g, n); !why.empty())
      return why + ", which TFLite's own kernel may run out of bounds";
  *warn = false;
  return "";
}

}  // namespace clgpu
