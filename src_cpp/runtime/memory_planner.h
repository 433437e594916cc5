// Assigns a partition's activation tensors to shared device buffers by lifetime
// (greedy by size, the "shared objects" strategy of TFLite GPU's planner):
// tensors whose lifetimes do not overlap may use the same buffer.
#pragma once

#include <cstddef>
#include <vector>

namespace clgpu {

struct TensorUsage {
  size_t bytes = 0;
  int first = 0;  // first step that uses it (inclusive)
  int last = 0;   // last step that uses it (inclusive)
};

struct MemoryPlan {
  std::vector<int> assignment;  // tensor -> buffer index
  std::vector<size_t> buffer_bytes;
  size_t naive_bytes = 0;        // every tensor its own buffer
  size_t lower_bound_bytes = 0;  // max over steps of bytes alive at once
  size_t allocated_bytes = 0;    // sum of buffer_bytes
};

MemoryPlan PlanGreedyBySize(const std::vector<TensorUsage>& tensors);

// Shared objects as well: the cheaper of greedy by size and greedy by first use.
MemoryPlan PlanSharedObjects(const std::vector<TensorUsage>& tensors);

// One arena, tensors at offsets (multiples of `alignment`): each tensor, largest
// first, takes the smallest gap left between the placed tensors whose lifetimes
// overlap its own. Gets closer to the lower bound than shared buffers.
struct OffsetPlan {
  std::vector<size_t> offsets;  // per tensor
  size_t arena_bytes = 0;
  size_t naive_bytes = 0, lower_bound_bytes = 0;
};

OffsetPlan PlanOffsetsGreedyBySize(const std::vector<TensorUsage>& tensors, size_t alignment);

}  // namespace clgpu
