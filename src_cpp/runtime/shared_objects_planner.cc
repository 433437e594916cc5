// The shared-objects planner: whole buffers shared by tensors with disjoint lifetimes
// (greedy starts, local search, validation); used where views into one arena are avoided.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <functional>
#include <numeric>

#include "runtime/memory_planner.h"
#include "runtime/shared_objects_search.h"

namespace clgpu {

namespace {

using shared_objects::FreeFor;
using shared_objects::InsertByFirst;
using shared_objects::SharedObjectSearch;

// Iterated search budget: at most kSearchRounds rounds, kPatience rounds after
// the last gain and kSearchWork steps of work (see SharedObjectSearch), which keeps a few
// hundred tensors within a few ms. Models' plans settle within ~50 rounds.
constexpr int kSearchRounds = 400;
constexpr int kPatience = 100;
constexpr size_t kSearchWork = 300000;
constexpr uint32_t kMaxHalfWindow = 8;

bool Overlap(const TensorUsage& a, const TensorUsage& b) {
  return !(a.last < b.first || b.last < a.first);
}

// The steps at which some tensor starts, ascending: the set alive only grows
// there, so peaks over steps need look at these alone.
std::vector<int> StartSteps(const std::vector<TensorUsage>& tensors) {
  std::vector<int> starts;
  for (const TensorUsage& t : tensors) starts.push_back(t.first);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

// The k-th largest buffer of any shared-objects plan is at least the k-th
// largest tensor alive at any one step (those k tensors need k buffers), so the
// sum over k of the largest such sizes bounds every plan from below.
size_t SharedLowerBound(const std::vector<TensorUsage>& tensors) {
  std::vector<size_t> kth, sizes;
  for (int step : StartSteps(tensors)) {
    sizes.clear();
    for (const TensorUsage& t : tensors)
      if (t.first <= step && step <= t.last) sizes.push_back(t.bytes);
    std::sort(sizes.begin(), sizes.end(), std::greater<size_t>());
    if (kth.size() < sizes.size()) kth.resize(sizes.size(), 0);
    for (size_t k = 0; k < sizes.size(); ++k) kth[k] = std::max(kth[k], sizes[k]);
  }
  return std::accumulate(kth.begin(), kth.end(), size_t{0});
}

// Shared objects, tensors visited in the given order: each takes the free buffer
// that fits best (smallest big enough, else the largest, grown), else a new one.
MemoryPlan AssignInOrder(const std::vector<TensorUsage>& tensors,
                         const std::vector<size_t>& order) {
  MemoryPlan plan;
  plan.assignment.assign(tensors.size(), -1);
  std::vector<std::vector<size_t>> users;  // per buffer, in order of first use
  for (size_t i : order) {
    const TensorUsage& t = tensors[i];
    int best_fit = -1, largest = -1;
    for (size_t b = 0; b < users.size(); ++b) {
      if (!FreeFor(tensors, users[b], i)) continue;
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
    InsertByFirst(tensors, &users[b], i);
    plan.buffer_bytes[b] = std::max(plan.buffer_bytes[b], t.bytes);
    plan.assignment[i] = b;
  }
  plan.allocated_bytes =
      std::accumulate(plan.buffer_bytes.begin(), plan.buffer_bytes.end(), size_t{0});
  return plan;
}

// Visiting orders for the greedy starts. Ties keep the previous key's order, so
// every order is deterministic.
std::vector<std::vector<size_t>> VisitingOrders(const std::vector<TensorUsage>& t) {
  std::vector<size_t> by_size(t.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return t[a].bytes > t[b].bytes; });
  auto then = [&](auto key) {
    std::vector<size_t> order = by_size;
    std::stable_sort(order.begin(), order.end(), key);
    return order;
  };
  std::vector<std::vector<size_t>> orders;
  orders.push_back(by_size);
  orders.push_back(then([&](size_t a, size_t b) { return t[a].first < t[b].first; }));
  orders.push_back(then([&](size_t a, size_t b) { return t[a].last > t[b].last; }));
  orders.push_back(
      then([&](size_t a, size_t b) { return t[a].last - t[a].first > t[b].last - t[b].first; }));
  // Greedy by breadth: the steps with the most bytes alive first, and at each
  // step the tensors alive there not yet visited, largest first (start steps
  // alone: any other holds a subset of the start step before it).
  std::vector<std::pair<size_t, std::vector<size_t>>> steps;  // (bytes alive, tensors)
  for (int step : StartSteps(t)) {
    steps.emplace_back();
    for (size_t i : by_size)
      if (t[i].first <= step && step <= t[i].last) {
        steps.back().first += t[i].bytes;
        steps.back().second.push_back(i);
      }
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> breadth;
  std::vector<char> seen(t.size(), 0);
  for (const auto& [bytes, alive] : steps)
    for (size_t i : alive)
      if (!seen[i]) {
        seen[i] = 1;
        breadth.push_back(i);
      }
  orders.push_back(breadth);
  return orders;
}

}  // namespace

bool IsValidSharedPlan(const std::vector<TensorUsage>& tensors, const MemoryPlan& plan) {
  if (plan.assignment.size() != tensors.size()) return false;
  std::vector<std::vector<size_t>> users(plan.buffer_bytes.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int b = plan.assignment[i];
    if (b < 0 || static_cast<size_t>(b) >= users.size()) return false;
    if (plan.buffer_bytes[b] < tensors[i].bytes) return false;
    users[b].push_back(i);
  }
  size_t total = 0;
  for (size_t b = 0; b < users.size(); ++b) {
    auto& u = users[b];
    std::sort(u.begin(), u.end(),
              [&](size_t x, size_t y) { return tensors[x].first < tensors[y].first; });
    for (size_t k = 1; k < u.size(); ++k)
      if (Overlap(tensors[u[k - 1]], tensors[u[k]])) return false;
    total += plan.buffer_bytes[b];
  }
  return total == plan.allocated_bytes;
}

MemoryPlan PlanSharedObjects(const std::vector<TensorUsage>& tensors) {
  MemoryPlan best;
  if (tensors.empty()) return best;
  size_t work = 0;
  // Greedy starts from several visiting orders, each improved by local search
  // within an equal share of half the budget; the best (the first of equals)
  // seeds the iterated search below.
  const std::vector<std::vector<size_t>> orders = VisitingOrders(tensors);
  std::vector<SharedObjectSearch> starts;
  for (const std::vector<size_t>& order : orders) {
    starts.emplace_back(tensors, AssignInOrder(tensors, order).assignment, &work);
    starts.back().Improve(/*swaps=*/true, work + kSearchWork / (2 * orders.size()));
  }
  SharedObjectSearch current = starts[0];
  for (const SharedObjectSearch& s : starts)
    if (!current.NoWorseThan(s)) current = s;
  best = current.Plan();
  // Iterated local search: rebuild the tensors of a window of steps (or those
  // around the tensors that size one buffer), improve, keep the result unless
  // it is worse (equal plans are kept so that the search drifts across
  // plateaus). A fixed seed and a budget of work rather than time keep the plan
  // deterministic; it stops early at the lower bound, as no plan is cheaper.
  const size_t floor = SharedLowerBound(tensors);
  int steps = 1;
  for (const TensorUsage& t : tensors) steps = std::max(steps, t.last + 1);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state](uint32_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % n);
  };
  for (int round = 0, last_gain = 0; round < kSearchRounds && round - last_gain < kPatience &&
                                     work < kSearchWork && best.allocated_bytes > floor;
       ++round) {
    work += tensors.size();  // the copy
    SharedObjectSearch trial = current;
    const int center = next(steps), half = next(kMaxHalfWindow) + 1;
    if (next(2) == 0)
      trial.Rebuild({{center - half, center + half}}, next(2) == 0);
    else
      trial.Rebuild(trial.SizingWindows(next(1 << 16), half), next(2) == 0);
    trial.Improve(/*swaps=*/false, kSearchWork);
    if (!trial.NoWorseThan(current)) continue;
    current = std::move(trial);
    if (current.Total() < best.allocated_bytes) {
      best = current.Plan();
      last_gain = round;
    }
  }
  if (!IsValidSharedPlan(tensors, best)) {
    // A bug in the search must not share memory between live tensors: the plain
    // greedy plan is valid by construction.
    assert(false && "PlanSharedObjects: invalid plan");
    return PlanGreedyBySize(tensors);
  }
  LiveBounds(tensors, &best.naive_bytes, &best.lower_bound_bytes);
  best.shared_lower_bound_bytes = floor;
  return best;
}

MemoryPlan PlanGreedyBySize(const std::vector<TensorUsage>& tensors) {
  std::vector<size_t> by_size(tensors.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](size_t a, size_t b) { return tensors[a].bytes > tensors[b].bytes; });
  MemoryPlan plan = AssignInOrder(tensors, by_size);
  LiveBounds(tensors, &plan.naive_bytes, &plan.lower_bound_bytes);
  plan.shared_lower_bound_bytes = SharedLowerBound(tensors);
  return plan;
}

}  // namespace clgpu
