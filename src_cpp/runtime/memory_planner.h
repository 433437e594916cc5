// Assigns a partition's activation tensors to device memory by lifetime: either
// shared whole buffers (tensors whose lifetimes do not overlap may use the same
// buffer; the "shared objects" strategy of TFLite GPU's planner) or offsets in
// one arena.
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
  // No shared-objects plan is below this: sum over k of the largest k-th
  // largest tensor alive at a step (at or above lower_bound_bytes).
  size_t shared_lower_bound_bytes = 0;
  size_t allocated_bytes = 0;  // sum of buffer_bytes
};

// The naive sum (every tensor its own buffer) and the peak of bytes alive at once.
void LiveBounds(const std::vector<TensorUsage>& tensors, size_t* naive, size_t* lower_bound);

MemoryPlan PlanGreedyBySize(const std::vector<TensorUsage>& tensors);

// Shared objects, as little memory as a short search finds: greedy plans from
// several visiting orders (by size, first use, last use, lifetime, breadth),
// each improved by local search (moves, two-step ejections, swaps, buffers
// trading their tails), then an iterated search that rebuilds windows of steps.
// Deterministic (fixed seed, budget counted in work, not time); never worse
// than greedy by size or by first use; well under 10 ms for 300 tensors.
MemoryPlan PlanSharedObjects(const std::vector<TensorUsage>& tensors);

// Whether no two tensors of a buffer are alive at once, every buffer holds its
// largest tensor and allocated_bytes is the sum of the buffers.
bool IsValidSharedPlan(const std::vector<TensorUsage>& tensors, const MemoryPlan& plan);

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
