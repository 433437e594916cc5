#include "ops/cpu_kernel_rules.h"

#include <vector>

#include "graph/validate.h"
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

// A SLICE whose constant begin and size leave its input (tflite_runtime 2.14's kernel does not
// check them: it copies the box, past its input and its output, whose declared shape it keeps).
std::string SliceOutOfBounds(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kSlice || n.inputs.size() != 3 || !g.valid_tensor(n.inputs[0])) return "";
  std::vector<int64_t> begin, size;
  if (!g.ReadConstantInts(n.inputs[1], "begin", &begin).empty() ||
      !g.ReadConstantInts(n.inputs[2], "size", &size).empty())
    return "";
  const Shape in = g.shape(n.inputs[0]);
  if (begin.size() != in.size() || size.size() != in.size()) return "";
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t end = size[a] == -1 ? in[a] : begin[a] + size[a];
    if (begin[a] < 0 || size[a] < -1 || end > in[a])
      return "node " + std::to_string(n.index) + " is a SLICE past its input " + ShapeString(in);
  }
  return "";
}

}  // namespace

std::string CpuKernelUnsafe(const GraphView& g, const NodeInfo& n) {
  if (std::string why = SliceOutOfBounds(g, n); !why.empty()) return why;
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
