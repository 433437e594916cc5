// The offsets planner (one arena; the default where views into it are allowed), and the
// naive / lower-bound figures both planners report.
#include "runtime/memory_planner.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>

namespace clgpu {

// Every tensor its own buffer (naive) and the peak of bytes alive at once.
void LiveBounds(const std::vector<TensorUsage>& tensors, size_t* naive, size_t* lower_bound) {
  *naive = 0;
  for (const TensorUsage& t : tensors) *naive += t.bytes;
  // Sweep: +bytes at a tensor's first step, -bytes after its last.
  std::vector<std::pair<int, int64_t>> events;
  for (const TensorUsage& t : tensors) {
    events.emplace_back(t.first, static_cast<int64_t>(t.bytes));
    events.emplace_back(t.last + 1, -static_cast<int64_t>(t.bytes));
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    live += events[k].second;
    if (k + 1 == events.size() || events[k + 1].first != events[k].first)
      peak = std::max(peak, live);
  }
  *lower_bound = static_cast<size_t>(peak);
}

OffsetPlan PlanOffsetsGreedyBySize(const std::vector<TensorUsage>& tensors, size_t alignment) {
  OffsetPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  alignment = std::max<size_t>(alignment, 1);
  auto aligned = [&](size_t x) { return (x + alignment - 1) / alignment * alignment; };
  LiveBounds(tensors, &plan.naive_bytes, &plan.lower_bound_bytes);

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
