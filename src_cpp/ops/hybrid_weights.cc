#include "ops/hybrid_weights.h"

#include <map>

#include "graph/dequantize.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kWeightInput = 1;  // the filter / weights / y of every hybrid op
constexpr TfLiteType kTfLiteInt4 = static_cast<TfLiteType>(18);

const char* HybridOpName(int32_t op) {
  switch (op) {
    case tfl::kFullyConnected:
      return "FULLY_CONNECTED";
    case tfl::kConv2d:
      return "CONV_2D";
    case tfl::kDepthwiseConv2d:
      return "DEPTHWISE_CONV_2D";
    case tfl::kBatchMatMul:
      return "BATCH_MATMUL";
    case tfl::kEmbeddingLookup:
      return "EMBEDDING_LOOKUP";
    default:
      return nullptr;
  }
}

// A node whose weights may be dynamic-range ones: a hybrid op with a float input and weights
// of a quantized type (not a float constant or a folded DEQUANTIZE's output).
bool HybridCandidate(const GraphView& g, const NodeInfo& n) {
  if (!HybridOpName(n.op) || n.inputs.size() <= kWeightInput) return false;
  const int x = n.inputs[0], w = n.inputs[kWeightInput];
  if (!g.valid_tensor(x) || !g.valid_tensor(w)) return false;
  // EMBEDDING_LOOKUP's input 0 is its int32 ids; its hybrid kernel writes float rows.
  if (n.op == tfl::kEmbeddingLookup
          ? g.type(x) != kTfLiteInt32 || n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) ||
                g.type(n.outputs[0]) != kTfLiteFloat32
          : g.value_type(x) != ValueType::kFloat)
    return false;
  if (g.IsFoldedDequantizeOutput(w) || g.IsComputedConstant(w)) return false;
  const TfLiteType t = g.type(w);
  return t == kTfLiteInt8 || t == kTfLiteUInt8 || t == kTfLiteInt4;
}

// The weights' output-channel axis, the one a per-channel scale must run along (TFLite's
// kernels index their scales by output channel); -1 when the op has none of its own.
int OutputChannelAxis(const NodeInfo& n, const Shape& w) {
  switch (n.op) {
    case tfl::kFullyConnected:
    case tfl::kConv2d:
    case tfl::kEmbeddingLookup:  // a scale per row
      return 0;
    case tfl::kDepthwiseConv2d:
      return 3;
    default:  // BATCH_MATMUL's y[..., K, N] (adj_y: [..., N, K]); its params start with adj_x,
              // adj_y
      if (w.size() < 2) return -1;
      const bool adj_y = n.builtin_data && static_cast<const bool*>(n.builtin_data)[1];
      return static_cast<int>(w.size()) - (adj_y ? 2 : 1);
  }
}

// "" if the candidate `n` runs as its float op on the dequantized weights and agrees with
// TFLite's hybrid kernel there, else why not.
std::string HybridRule(const GraphView& g, const NodeInfo& n) {
  const std::string op = HybridOpName(n.op);
  const int w = n.inputs[kWeightInput];
  const std::string what = op + " dynamic-range weights " + g.name(w);
  const TfLiteType t = g.type(w);
  if (t == kTfLiteUInt8) return what + " are uint8 (only int8 symmetric weights are supported)";
  if (t == kTfLiteInt4) return what + " are int4 (only int8 symmetric weights are supported)";
  if (!g.IsConstant(w)) return what + " are computed at run time (int8 weights must be constants)";
  for (int out : n.outputs)
    if (!g.valid_tensor(out) || g.type(out) != kTfLiteFloat32)
      return op + " with int8 weights " + g.name(w) + " and a float input has a non-float32 output";
  const Shape s = g.shape(w);
  if (auto why = CheckDequantizable(g.tensor(w), s, g.name(w)); !why.empty()) return why;
  const QuantParams q = g.quant(w);
  for (int32_t z : q.zero_point)
    if (z != 0)
      return what + " have zero point " + std::to_string(z) +
             " (TFLite's hybrid kernels take weights as symmetric: zero point 0)";
  const int axis = OutputChannelAxis(n, s);
  if (q.per_channel() && q.axis != axis)
    return what + " are quantized per channel along axis " + std::to_string(q.axis) +
           ", not along the output channels (axis " + std::to_string(axis) + ")";
  // Per-tensor depthwise weights: TFLite's hybrid kernel reads one scale per channel whatever
  // the count, past the end of the array (its output is undefined).
  if (n.op == tfl::kDepthwiseConv2d && !q.per_channel() && s.size() == 4 && s[3] > 1)
    return what + " have one scale for " + std::to_string(s[3]) +
           " channels (TFLite's hybrid DEPTHWISE_CONV_2D reads one per channel: its output is "
           "undefined)";
  // Measured: tflite_runtime 2.14's hybrid FULLY_CONNECTED and BATCH_MATMUL give zeros when
  // the weights have a scale per channel; LiteRT's apply the scales.
  if (q.per_channel() && !g.cpu_kernels().litert &&
      (n.op == tfl::kFullyConnected || n.op == tfl::kBatchMatMul))
    return what + " have a scale per channel, for which tflite_runtime 2.14's hybrid " + op +
           " outputs zeros (left to it, so the outputs are its own; LiteRT runs them)";
  // Measured: tflite_runtime 2.14's hybrid EMBEDDING_LOOKUP outputs zeros when the table has a
  // scale per row (tests/test_gather_indexed.py); LiteRT's applies each row's.
  if (q.per_channel() && !g.cpu_kernels().litert && n.op == tfl::kEmbeddingLookup)
    return what +
           " have a scale per row, for which tflite_runtime 2.14's hybrid EMBEDDING_LOOKUP "
           "outputs zeros (left to it, so the outputs are its own; LiteRT runs them)";
  return "";
}

}  // namespace

void MarkHybridWeights(GraphView& g, const std::vector<NodeInfo>& nodes) {
  // Per tensor: whether every node reading it reads it as hybrid weights it may run with.
  std::map<int, bool> all_hybrid;
  for (const NodeInfo& n : nodes) {
    const bool hybrid = HybridCandidate(g, n) && HybridRule(g, n).empty();
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int t = n.inputs[i];
      if (t < 0) continue;
      const bool ok = hybrid && i == kWeightInput;
      auto [it, fresh] = all_hybrid.emplace(t, ok);
      if (!fresh) it->second = it->second && ok;
    }
  }
  for (const auto& [t, ok] : all_hybrid)
    if (ok) g.AddDequantizedWeight(t);
}

std::string CheckHybridWeights(const GraphView& g, const NodeInfo& node) {
  if (!HybridCandidate(g, node) || g.IsDequantizedWeight(node.inputs[kWeightInput])) return "";
  if (auto why = HybridRule(g, node); !why.empty()) return why;
  return std::string(HybridOpName(node.op)) + " int8 weights " + g.name(node.inputs[kWeightInput]) +
         " are also read by an op that does not take them as dynamic-range weights";
}

}  // namespace clgpu
