// Whether a node's tensors and its op's own buffers fit the device's largest allocation, split
// into pieces and chunks where they do not (runtime/split.h): the claim check behind
// max_alloc_bytes.
#include <algorithm>

#include "common/error.h"
#include "delegate/delegate.h"
#include "graph/validate.h"
#include "ops/op.h"
#include "runtime/split.h"

namespace clgpu {

std::string DelegateCore::CheckAllocationLimit(const GraphView& g, const NodeInfo& n,
                                               const OpHandler& h, std::string* note) const {
  const size_t limit = max_alloc_bytes();
  // Device bytes of an element of tensor t: the float storage, or its integer type's.
  auto eb = [&](int t) {
    const ValueType vt = g.value_type(t);
    return vt == ValueType::kFloat ? storage_bytes() : HostElementBytes(vt);
  };
  // Most nodes are far below the limit: nothing an op allocates (transformed
  // weights, Winograd or split-K scratch) is 64x its largest tensor.
  size_t largest = 0;
  for (const auto* list : {&n.inputs, &n.outputs})
    for (int t : *list)
      if (g.valid_tensor(t)) largest = std::max(largest, size_t(NumElements(g.shape(t))) * eb(t));
  if (largest <= limit / 64) return "";
  const std::string over =
      "exceeds the device's largest allocation (" + std::to_string(limit) + " bytes) and ";
  try {
    std::unique_ptr<Op> op = h.create(g, n);
    std::vector<Shape> in;
    for (int t : op->inputs()) in.push_back(g.shape(t));
    std::vector<Shape> with_deps = in;
    for (int t : op->ShapeInputs()) with_deps.push_back(g.shape(t));
    const std::vector<Shape> out = op->InferShapes(with_deps);
    for (const Shape& s : out)
      if (auto why = CheckElementCount(s, "its output"); !why.empty()) return why;
    // Tensors larger than one buffer are kept in pieces; each must be cut.
    int pieces = 0;
    for (size_t i = 0; i < in.size() + out.size(); ++i) {
      const Shape& s = i < in.size() ? in[i] : out[i - in.size()];
      const int t = i < in.size() ? op->inputs()[i] : op->outputs()[i - in.size()];
      if (size_t(NumElements(s)) * eb(t) <= limit) continue;
      std::string why;
      const size_t count = PlanPieces(s, limit / eb(t), &why).size();
      if (!count)
        return "tensor " + g.name(t) + " (" + std::to_string(NumElements(s) * eb(t)) + " bytes) " +
               over + "cannot be split: " + why;
      pieces += static_cast<int>(count);
    }
    // Activations all of one quantized type: the op prepares in that type's context (as in
    // Partition::OpCtx).
    ValueType common = ValueType::kUnsupported;
    for (const auto* list : {&op->inputs(), &op->outputs()})
      for (int t : *list) {
        if (common == ValueType::kUnsupported) common = g.value_type(t);
        if (g.value_type(t) != common) common = ValueType::kFloat;
      }
    OpContext ctx = IsQuantized(common) ? MakeOpContext().ForValues(common) : MakeOpContext();
    ChunkPlan plan;
    const std::string why = PlanOpChunks(ctx, *op, in, out, limit, &plan);
    if (!why.empty()) return "the node " + over + why;
    if (!plan.empty())
      *note =
          "runs in chunks within the largest allocation (" + std::to_string(limit) + " bytes)" +
          (pieces ? "; its large tensors in " + std::to_string(pieces) + " pieces" : std::string());
    else if (pieces)  // a flat copy (RESHAPE): copied piece by piece, no chunks
      *note = "its large tensors in " + std::to_string(pieces) +
              " pieces within the largest allocation (" + std::to_string(limit) + " bytes)";
    return "";
  } catch (const std::exception& e) {
    return "could not check its buffers against the largest allocation: " + What(e);
  }
}

}  // namespace clgpu
