// A PRELU spelled as element-wise ops of one value: litert-torch lowers nn.PReLU to
// SUB(RELU(x), MUL(MUL(x, -1, RELU), slopes)); other converters write MAXIMUM / MINIMUM / NEG
// forms of the same function. The epilogue pass (one slope) and the prelu pass (a slope per
// channel) fold such a form as they fold a PRELU node, through this one matcher, so the cost
// model and the partition count the same kernels.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

struct PreluForm {
  std::vector<size_t> nodes;       // positions in execution order; the last writes `output`
  std::vector<int> intermediates;  // x first, then every member's output but the last
  int output = -1;
  std::vector<float> slopes;  // one (every channel's the same) or one per channel
  int slopes_tensor = -1;     // per channel: a constant operand of the form holding exactly them
};

// Whether a constant of shape v holds one value per channel of `channels`, shaped as ones then
// the channels ([C], [1, 1, C], ...): a PRELU node's slopes, or a form's.
inline bool PerChannelShape(const Shape& v, int channels) {
  return !v.empty() && v.back() == channels && NumElements(v) == channels;
}

// The form reading the output x of nodes[p]: at least two nodes read x, every node is a RELU,
// NEG, MAXIMUM / MINIMUM (of two members, or of one and zero), MUL by a constant scalar or
// per-channel vector, ADD or SUB of two members (fused activation none or RELU), all float32 of
// x's shape, and every value but the last is read by the form alone and is not a partition
// output. The value each writes is tracked as p * relu(x) + q * relu(-x) (every op above keeps
// that shape, since the two parts are never both non-zero); the last must have p = 1, and the
// slopes are -q. `readers`: the positions reading each tensor.
std::optional<PreluForm> FindPreluForm(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       size_t p, const std::map<int, std::vector<size_t>>& readers,
                                       const std::set<int>& outputs);

}  // namespace clgpu
