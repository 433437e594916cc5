#include "runtime/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

namespace clgpu {

namespace {

// Every tensor its own buffer (naive) and the peak of bytes alive at once.
void Bounds(const std::vector<TensorUsage>& tensors, size_t* naive, size_t* lower_bound) {
  std::map<int, size_t> live;  // step -> bytes alive
  *naive = 0;
  for (const TensorUsage& t : tensors) {
    *naive += t.bytes;
    for (int s = t.first; s <= t.last; ++s) live[s] += t.bytes;
  }
  *lower_bound = 0;
  for (const auto& [step, bytes] : live) *lower_bound = std::max(*lower_bound, bytes);
}

// Shared objects, tensors visited in the given order: each takes the free buffer
// that fits best (smallest big enough, else the largest, grown), else a new one.
MemoryPlan AssignInOrder(const std::vector<TensorUsage>& tensors,
                         const std::vector<size_t>& order) {
  MemoryPlan plan;
  plan.assignment.assign(tensors.size(), -1);
  std::vector<std::vector<size_t>> users;
  auto free_for = [&](size_t buf, const TensorUsage& t) {
    for (size_t u : users[buf]) {
      const TensorUsage& o = tensors[u];
      if (!(o.last < t.first || t.last < o.first)) return false;
    }
    return true;
  };
  for (size_t i : order) {
    const TensorUsage& t = tensors[i];
    int best_fit = -1, largest = -1;
    for (size_t b = 0; b < users.size(); ++b) {
      if (!free_for(b, t)) continue;
      if (plan.buffer_bytes[b] >= t.bytes &&
          (best_fit < 0 || plan.buffer_bytes[b] < plan.buffer_bytes[best_fit]))
        best_fit = static_cast<int>(b);
      if (largest < 0 || plan.buffer_bytes[b] > plan.buffer_bytes[largest])
        largest = static_cast<int>(b);
    }
    int b = best_fit >= 0 ? best_fit : largest;
    if (b < 0) {
      b = static_cast<int>(users.size());
      users.emplace_back();
      plan.buffer_bytes.push_back(0);
    }
    users[b].push_back(i);
    plan.buffer_bytes[b] = std::max(plan.buffer_bytes[b], t.bytes);
    plan.assignment[i] = b;
  }
  plan.allocated_bytes =
      std::accumulate(plan.buffer_bytes.begin(), plan.buffer_bytes.end(), size_t{0});
  return plan;
}

}  // namespace

MemoryPlan PlanSharedObjects(const std::vector<TensorUsage>& tensors) {
  // Two visiting orders, the cheaper plan wins: largest first (greedy by size),
  // and by first use, largest first within a step (greedy by breadth).
  std::vector<size_t> by_size(tensors.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });
  std::vector<size_t> by_use = by_size;
  std::stable_sort(by_use.begin(), by_use.end(),
                   [&](size_t a, size_t b) { return tensors[a].first < tensors[b].first; });
  MemoryPlan a = AssignInOrder(tensors, by_size), b = AssignInOrder(tensors, by_use);
  MemoryPlan best = a.allocated_bytes <= b.allocated_bytes ? a : b;
  Bounds(tensors, &best.naive_bytes, &best.lower_bound_bytes);
  return best;
}

MemoryPlan PlanGreedyBySize(const std::vector<TensorUsage>& tensors) {
  std::vector<size_t> by_size(tensors.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });
  MemoryPlan plan = AssignInOrder(tensors, by_size);
  Bounds(tensors, &plan.naive_bytes, &plan.lower_bound_bytes);
  return plan;
}

OffsetPlan PlanOffsetsGreedyBySize(const std::vector<TensorUsage>& tensors, size_t alignment) {
  OffsetPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  alignment = std::max<size_t>(alignment, 1);
  auto aligned = [&](size_t x) { return (x + alignment - 1) / alignment * alignment; };
  Bounds(tensors, &plan.naive_bytes, &plan.lower_bound_bytes);

  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const TensorUsage& t = tensors[i];
    // Intervals [offset, offset + bytes) of placed tensors alive at the same time.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j : placed) {
      const TensorUsage& o = tensors[j];
      if (o.last < t.first || t.last < o.first) continue;
      busy.emplace_back(plan.offsets[j], plan.offsets[j] + o.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [lo, hi] : busy) {
      const size_t start = aligned(cursor);
      if (lo > start && lo - start >= t.bytes && lo - start < best_gap) {
        best = start;
        best_gap = lo - start;
      }
      cursor = std::max(cursor, hi);
    }
    plan.offsets[i] = best != SIZE_MAX ? best : aligned(cursor);
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + t.bytes);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace clgpu
