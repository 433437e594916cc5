#include "delegate/constant_folding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>

#include "common/error.h"
#include "common/half.h"
#include "ops/densify.h"
#include "runtime/cpu_fallback.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// What a fold may hold: a larger constant (a broadcast to a huge shape) stays a run-time value.
constexpr size_t kMaxTensorBytes = size_t{64} << 20;
constexpr size_t kMaxTotalBytes = size_t{256} << 20;

// The element types a fold reads back; its float32 outputs may feed any op, the others only
// other folded nodes.
bool Readable(TfLiteType t) {
  return t == kTfLiteFloat32 || t == kTfLiteFloat16 || t == kTfLiteInt32 || t == kTfLiteInt64 ||
         t == kTfLiteBool;
}

bool AlreadyFolded(const GraphView& g, int t) {
  return g.FoldedIntsOf(t) || g.IsComputedConstant(t) || g.IsFoldedDequantizeOutput(t);
}

// The candidates: every input model data (what a CPU kernel can read now) or a candidate's
// output, every output readable, within the size limits (plan order: producers come first).
std::set<int> Candidates(const GraphView& g, const std::vector<NodeInfo>& nodes) {
  std::set<int> chosen, values;  // nodes; their output tensors
  size_t total = 0;
  for (const NodeInfo& n : nodes) {
    if (!tfl::PureFunctionOfInputs(n.op) || n.outputs.empty()) continue;
    // A DENSIFY of a constant left here is one whose sparsity metadata FoldConstantDensifies
    // refused: TFLite's kernel writes where its indices say, past its output on a bad one
    // (a fuzzed pose_detection corrupted the fold's own memory so).
    if (*DensifyNodeName(n.op)) continue;
    bool ok = std::any_of(n.inputs.begin(), n.inputs.end(), [](int t) { return t >= 0; });
    for (int t : n.inputs) ok = ok && (t < 0 || g.IsModelConstant(t) || values.count(t));
    size_t bytes = 0;
    for (int t : n.outputs) {
      // Not where the model declares another type than the CPU kernel gives (a hostile model's
      // float EXPAND_DIMS of int32 data, graph/validate.h): its readers stay as they were.
      ok = ok && g.valid_tensor(t) && Readable(g.type(t)) && !AlreadyFolded(g, t) &&
           g.type(t) == g.tensor(t).type;
      if (!ok) break;
      const size_t each = g.type(t) == kTfLiteBool      ? 1
                          : g.type(t) == kTfLiteFloat16 ? 2
                          : g.type(t) == kTfLiteInt64   ? 8
                                                        : 4;
      const size_t b = static_cast<size_t>(std::max<int64_t>(NumElements(g.shape(t)), 0)) * each;
      ok = b <= kMaxTensorBytes;
      bytes += b;
    }
    if (!ok || total + bytes > kMaxTotalBytes) continue;
    total += bytes;
    chosen.insert(n.index);
    values.insert(n.outputs.begin(), n.outputs.end());
  }
  return chosen;
}

// Drops the candidates whose non-float32 outputs another op reads (that op would need the value
// in its own type) or no op reads (a model output), until none is left: a node dropped leaves
// its producers' outputs read by a node that runs.
void KeepClosed(const GraphView& g, const std::vector<NodeInfo>& nodes, std::set<int>* chosen) {
  std::map<int, std::vector<int>> readers;  // tensor -> the nodes reading it
  for (const NodeInfo& n : nodes)
    for (int t : n.inputs)
      if (t >= 0) readers[t].push_back(n.index);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      if (!chosen->count(it->index)) continue;
      bool ok = true;
      for (int t : it->outputs) {
        const std::vector<int>& r = readers[t];
        const bool inside =
            std::all_of(r.begin(), r.end(), [&](int n) { return chosen->count(n) != 0; });
        ok = ok && !r.empty() && (inside || g.type(t) == kTfLiteFloat32);
      }
      if (!ok) chosen->erase(it->index), changed = true;
    }
  }
}

// A tensor the CPU kernels wrote, as floats.
std::vector<float> ReadBack(const TfLiteTensor& x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (!x.data.raw_const) throw Error("a folded tensor has no memory");
  const auto* p = x.data.raw_const;
  auto need = [&](size_t each) {
    if (x.bytes < static_cast<size_t>(n) * each) throw Error("a folded tensor is short");
  };
  switch (x.type) {
    case kTfLiteFloat32:
      need(4), std::memcpy(out.data(), p, out.size() * 4);
      break;
    case kTfLiteFloat16:
      need(2);
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(static_cast<const uint16_t*>(p)[i]);
      break;
    case kTfLiteInt32:
      need(4);
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(static_cast<const int32_t*>(p)[i]);
      break;
    case kTfLiteInt64:
      need(8);
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(static_cast<const int64_t*>(p)[i]);
      break;
    case kTfLiteBool:
      need(1);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<const bool*>(p)[i] ? 1.0f : 0.0f;
      break;
    default:
      throw Error("a folded tensor has a type the fold does not read");
  }
  return out;
}

}  // namespace

std::vector<const NodeInfo*> FoldConstantSubgraphs(GraphView& g, const std::vector<NodeInfo>& nodes,
                                                   TfLiteContext* ctx, TensorRoom* room,
                                                   std::string* why) {
  std::set<int> chosen = Candidates(g, nodes);
  KeepClosed(g, nodes, &chosen);
  if (chosen.empty()) return {};
  std::vector<int> order;
  std::vector<const NodeInfo*> folded;
  for (const NodeInfo& n : nodes)
    if (chosen.count(n.index)) order.push_back(n.index), folded.push_back(&n);
  // No boundary: the inputs are model constants, every other tensor is the fold's own.
  CpuFallback cpu(ctx->GetNodeAndRegistration, room, order, {}, {});
  std::map<int, std::vector<float>> values;
  try {
    if (std::string w = cpu.Prepare(ctx); !w.empty()) {
      *why = w;
      return {};
    }
    cpu.Invoke(ctx);
    for (const NodeInfo* n : folded)
      for (int t : n->outputs) {
        // A value the ops would read in another type than the kernel wrote it (a hostile model
        // declaring a float output of an int32 EXPAND_DIMS) stays a run-time one.
        if (ctx->tensors[t].type != g.type(t))
          throw Error("the CPU kernel of node " + std::to_string(n->index) + " gives tensor " +
                      g.name(t) + " another type than the graph says");
        values[t] = ReadBack(ctx->tensors[t], NumElements(g.shape(t)));
      }
  } catch (const Error& e) {
    cpu.Release(ctx);
    *why = e.what();
    return {};
  }
  cpu.Release(ctx);  // TFLite's own allocation back: the tensors hold no memory of ours
  for (auto& [t, v] : values) g.AddComputedConstant(t, std::move(v));
  return folded;
}

}  // namespace clgpu
