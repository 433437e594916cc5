// The shared-objects planner: whole buffers shared by tensors with disjoint lifetimes
// (greedy starts, local search, validation); used where views into one arena are avoided.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <functional>
#include <numeric>

#include "runtime/memory_planner.h"

namespace clgpu {

namespace {

// Iterated search budget: at most kSearchRounds rounds, kPatience rounds after
// the last gain and kSearchWork steps of work (see Search), which keeps a few
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

// Whether tensor i may join the tensors `users` (disjoint lifetimes, in order of
// first use), ignoring `except`. Those that overlap i are consecutive and end
// with the last one that starts no later than i ends: at most two to check.
bool FreeFor(const std::vector<TensorUsage>& t, const std::vector<size_t>& users, size_t i,
             size_t except = SIZE_MAX) {
  auto end = std::upper_bound(users.begin(), users.end(), t[i].last,
                              [&](int step, size_t j) { return step < t[j].first; });
  for (int k = 0; k < 2 && end != users.begin(); ++k) {
    const size_t j = *--end;
    if (t[j].last < t[i].first) return true;
    if (j != except) return false;
  }
  return true;
}

void InsertByFirst(const std::vector<TensorUsage>& t, std::vector<size_t>* users, size_t i) {
  users->insert(std::lower_bound(users->begin(), users->end(), i,
                                 [&](size_t x, size_t y) { return t[x].first < t[y].first; }),
                i);
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

// A shared-objects assignment being improved by local search. Each buffer keeps
// its tensors in order of first use (their lifetimes are disjoint, so also in
// order of last use) and its largest sizes, so that the cost of taking a tensor
// out is known without a scan. Plans compare by total bytes, then by `sizing`
// (the bytes of the tensors that set their buffer's size): among equal totals
// the one whose buffers are sized by fewer tensors is closer to shrinking one.
// `work` counts the steps of the search so that callers can bound it by a
// budget that does not depend on timing (the plan stays deterministic).
class Search {
 public:
  Search(const std::vector<TensorUsage>& tensors, const std::vector<int>& assignment, size_t* work)
      : t_(&tensors), work_(work), buffer_of_(assignment) {
    int buffers = 0;
    for (int b : assignment) buffers = std::max(buffers, b + 1);
    members_.resize(buffers);
    for (size_t i = 0; i < t_->size(); ++i) members_[buffer_of_[i]].push_back(i);
    top_.resize(buffers);
    for (int b = 0; b < buffers; ++b) {
      std::sort(members_[b].begin(), members_[b].end(),
                [&](size_t x, size_t y) { return T(x).first < T(y).first; });
      Refresh(b);
    }
  }

  size_t Total() const {
    size_t total = 0;
    for (const Top& t : top_) total += t.bytes;
    return total;
  }

  // Compares by (total, sizing): true if this plan is no worse than `o`.
  bool NoWorseThan(const Search& o) const {
    const size_t a = Total(), b = o.Total();
    return a != b ? a < b : Sizing() <= o.Sizing();
  }

  // Passes of single moves, ejection chains, pairwise swaps and tail exchanges
  // until none of them improves the plan (each accepted step lowers (total,
  // sizing), so this ends) or the work reaches `limit`.
  void Improve(bool swaps, size_t limit) {
    limit_ = limit;
    for (int pass = 0; pass < 64 && *work_ < limit_; ++pass) {
      bool better = Moves();
      better = Ejections() || better;
      if (swaps) better = Swaps() || better;
      better = TailExchanges() || better;
      if (!better) break;
    }
  }

  // A kick out of a local optimum: every tensor alive in one of the windows of
  // steps [lo, hi] is taken out and put back, largest first or in order of
  // first use, each where the total grows least (a new buffer only where no
  // buffer is free).
  void Rebuild(const std::vector<std::pair<int, int>>& windows, bool by_size) {
    *work_ += t_->size() * windows.size() + members_.size();
    std::vector<size_t> out;
    for (size_t i = 0; i < t_->size(); ++i)
      for (const auto& [lo, hi] : windows)
        if (T(i).first <= hi && lo <= T(i).last) {
          out.push_back(i);
          break;
        }
    for (size_t i : out) Erase(i);
    for (size_t b = 0; b < members_.size(); ++b) Refresh(b);
    std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
      return by_size ? T(a).bytes > T(b).bytes : T(a).first < T(b).first;
    });
    for (size_t i : out) {
      const size_t b = Cheapest(i);
      Insert(i, b);
      Refresh(b);
    }
  }

  // Windows around the tensors that set the size of one buffer (the pick-th,
  // wrapping): rebuilding them is how that buffer can shrink, which may take
  // moving all of them at once.
  std::vector<std::pair<int, int>> SizingWindows(size_t pick, int half) const {
    std::vector<size_t> used;
    for (size_t b = 0; b < members_.size(); ++b)
      if (!members_[b].empty()) used.push_back(b);
    const size_t b = used[pick % used.size()];
    std::vector<std::pair<int, int>> windows;
    for (size_t i : members_[b])
      if (T(i).bytes == top_[b].bytes) windows.emplace_back(T(i).first - half, T(i).last + half);
    return windows;
  }

  MemoryPlan Plan() const {
    MemoryPlan plan;
    plan.assignment.assign(t_->size(), -1);
    for (size_t b = 0; b < members_.size(); ++b) {
      if (members_[b].empty()) continue;  // emptied by the search
      for (size_t i : members_[b]) plan.assignment[i] = static_cast<int>(plan.buffer_bytes.size());
      plan.buffer_bytes.push_back(top_[b].bytes);
    }
    plan.allocated_bytes =
        std::accumulate(plan.buffer_bytes.begin(), plan.buffer_bytes.end(), size_t{0});
    return plan;
  }

 private:
  struct Top {
    size_t bytes = 0;   // the buffer's size: its largest tensor
    size_t count = 0;   // how many of its tensors have that size
    size_t second = 0;  // the largest smaller size (the size once those leave)
  };

  const TensorUsage& T(size_t i) const { return (*t_)[i]; }

  size_t Sizing() const {
    size_t sizing = 0;
    for (const Top& t : top_) sizing += t.bytes * t.count;
    return sizing;
  }

  void Refresh(size_t b) {
    Top top;
    for (size_t i : members_[b]) {
      const size_t bytes = T(i).bytes;
      if (bytes > top.bytes) {
        top.second = top.bytes;
        top.bytes = bytes;
        top.count = 1;
      } else if (bytes == top.bytes) {
        ++top.count;
      } else {
        top.second = std::max(top.second, bytes);
      }
    }
    top_[b] = top;
  }

  // Buffer b's size once tensor i has left it.
  size_t SizeWithout(size_t b, size_t i) const {
    const Top& t = top_[b];
    return T(i).bytes == t.bytes && t.count == 1 ? t.second : t.bytes;
  }

  // Whether tensor i may join buffer b, ignoring b's tensor `except`.
  bool Fits(size_t i, size_t b, size_t except = SIZE_MAX) const {
    ++*work_;
    return FreeFor(*t_, members_[b], i, except);
  }

  // The buffer where tensor i costs least: free during its lifetime, grown the
  // least, the smallest of equals; else an empty or new one.
  size_t Cheapest(size_t i) {
    size_t best = SIZE_MAX, best_grown = 0;
    for (size_t b = 0; b < members_.size(); ++b) {
      if (members_[b].empty() || !Fits(i, b)) continue;
      const size_t size = top_[b].bytes;
      const size_t grown = T(i).bytes > size ? T(i).bytes - size : 0;
      if (best == SIZE_MAX || grown < best_grown ||
          (grown == best_grown && size < top_[best].bytes)) {
        best = b;
        best_grown = grown;
      }
    }
    if (best != SIZE_MAX) return best;
    for (size_t b = 0; b < members_.size(); ++b)
      if (members_[b].empty()) return b;
    members_.emplace_back();
    top_.emplace_back();
    return members_.size() - 1;
  }

  void Insert(size_t i, size_t b) {
    InsertByFirst(*t_, &members_[b], i);
    buffer_of_[i] = static_cast<int>(b);
  }

  void Erase(size_t i) {
    auto& m = members_[buffer_of_[i]];
    m.erase(std::find(m.begin(), m.end(), i));
  }

  void Move(size_t i, size_t b) {
    const size_t a = buffer_of_[i];
    Erase(i);
    Insert(i, b);
    Refresh(a);
    Refresh(b);
  }

  // Each tensor that sets its buffer's size goes where the total drops most;
  // failing that, one of several such tensors goes where it sets nothing (the
  // total stays, the sizing drops).
  bool Moves() {
    bool better = false;
    for (size_t i = 0; i < t_->size() && *work_ < limit_; ++i) {
      const size_t a = buffer_of_[i];
      if (T(i).bytes != top_[a].bytes) continue;  // moving it cannot shrink a
      const size_t saved = top_[a].bytes - SizeWithout(a, i);
      size_t best = SIZE_MAX, best_gain = 0;
      for (size_t b = 0; b < members_.size(); ++b) {
        ++*work_;
        if (b == a || members_[b].empty()) continue;
        const size_t size = top_[b].bytes;
        if (saved == 0) {
          if (size > T(i).bytes && (best == SIZE_MAX || size < top_[best].bytes) && Fits(i, b))
            best = b;
          continue;
        }
        const size_t grown = T(i).bytes > size ? T(i).bytes - size : 0;
        if (grown < saved && saved - grown > best_gain && Fits(i, b)) {
          best = b;
          best_gain = saved - grown;
        }
      }
      if (best == SIZE_MAX) continue;
      Move(i, best);
      better = true;
    }
    return better;
  }

  // The one tensor of buffer b in the way of tensor i; SIZE_MAX if none or several.
  size_t OnlyConflict(size_t i, size_t b) const {
    const auto& m = members_[b];
    auto end = std::upper_bound(m.begin(), m.end(), T(i).last,
                                [&](int step, size_t j) { return step < T(j).first; });
    size_t found = SIZE_MAX;
    while (end != m.begin()) {
      const size_t j = *--end;
      if (T(j).last < T(i).first) break;
      if (found != SIZE_MAX) return SIZE_MAX;
      found = j;
    }
    return found;
  }

  // Change of (total, sizing) if tensor i moved from buffer a to b and tensor u
  // from b to c (c may be a): the three buffers' sizes, recounted.
  std::pair<int64_t, int64_t> ChainDelta(size_t i, size_t a, size_t b, size_t u, size_t c) const {
    int64_t total = 0, sizing = 0;
    const size_t touched[3] = {a, b, c};
    for (int k = 0; k < 3; ++k) {
      const size_t buf = touched[k];
      if (k == 2 && c == a) continue;
      Top top;
      auto add = [&](size_t j) {
        const size_t bytes = T(j).bytes;
        if (bytes > top.bytes) {
          top.bytes = bytes;
          top.count = 1;
        } else if (bytes == top.bytes) {
          ++top.count;
        }
      };
      for (size_t j : members_[buf])
        if (j != i && j != u) add(j);
      if (buf == b) add(i);
      if (buf == c) add(u);
      total += static_cast<int64_t>(top.bytes) - static_cast<int64_t>(top_[buf].bytes);
      sizing += static_cast<int64_t>(top.bytes * top.count) -
                static_cast<int64_t>(top_[buf].bytes * top_[buf].count);
    }
    return {total, sizing};
  }

  // Ejection chains of two: a tensor that sets its buffer's size moves into a
  // buffer where exactly one tensor is in its way, which moves on to a third
  // buffer (or to where the first one was); taken where (total, sizing) drops.
  // Frees a buffer that no single move or swap can.
  bool Ejections() {
    bool better = false;
    for (size_t i = 0; i < t_->size() && *work_ < limit_; ++i) {
      const size_t a = buffer_of_[i];
      if (T(i).bytes != top_[a].bytes) continue;
      std::pair<int64_t, int64_t> best{0, 0};
      size_t best_b = SIZE_MAX, best_u = SIZE_MAX, best_c = SIZE_MAX;
      const int64_t size_a = top_[a].bytes, a_without = SizeWithout(a, i);
      for (size_t b = 0; b < members_.size(); ++b) {
        ++*work_;
        if (b == a || members_[b].empty()) continue;
        const size_t u = OnlyConflict(i, b);
        if (u == SIZE_MAX) continue;  // free (a plain move) or several in the way
        const int64_t u_bytes = T(u).bytes;
        const int64_t b_change =
            std::max<int64_t>(SizeWithout(b, u), T(i).bytes) - static_cast<int64_t>(top_[b].bytes);
        for (size_t c = 0; c < members_.size(); ++c) {
          ++*work_;
          if (c == b || members_[c].empty()) continue;
          // The sizes after, from the tops alone; the recount only for a contender.
          const int64_t size_c = top_[c].bytes;
          const int64_t total =
              b_change + (c == a ? std::max(a_without, u_bytes) - size_a
                                 : a_without - size_a + std::max(size_c, u_bytes) - size_c);
          if (total > best.first || !Fits(u, c, c == a ? i : SIZE_MAX)) continue;
          const auto delta = ChainDelta(i, a, b, u, c);
          if (delta < best) {
            best = delta;
            best_b = b;
            best_u = u;
            best_c = c;
          }
        }
      }
      if (best_b == SIZE_MAX) continue;
      Erase(i);
      Erase(best_u);
      Insert(i, best_b);
      Insert(best_u, best_c);
      Refresh(a);
      Refresh(best_b);
      Refresh(best_c);
      better = true;
    }
    return better;
  }

  // Two tensors of different buffers trade places where that lowers the total:
  // only possible if one of them alone sets its buffer's size.
  bool Swaps() {
    bool better = false;
    for (size_t i = 0; i < t_->size() && *work_ < limit_; ++i) {
      const size_t a = buffer_of_[i];
      if (T(i).bytes != top_[a].bytes || top_[a].count != 1) continue;
      for (size_t j = 0; j < t_->size(); ++j) {
        ++*work_;
        const size_t b = buffer_of_[j];
        if (a == b) continue;
        const size_t new_a = std::max(SizeWithout(a, i), T(j).bytes);
        const size_t new_b = std::max(SizeWithout(b, j), T(i).bytes);
        if (new_a + new_b >= top_[a].bytes + top_[b].bytes) continue;
        if (!Fits(j, a, i) || !Fits(i, b, j)) continue;
        Erase(i);
        Erase(j);
        Insert(j, a);
        Insert(i, b);
        Refresh(a);
        Refresh(b);
        better = true;
        break;  // i has moved: its buffer and role are different now
      }
    }
    return better;
  }

  // Two buffers trade everything from one step on: valid at any step that no
  // tensor of either buffer spans, and it can cut both sizes at once (a large
  // early tensor and a large late one end up together).
  bool TailExchanges() {
    bool better = false;
    for (size_t a = 0; a < members_.size() && *work_ < limit_; ++a) {
      for (size_t b = a + 1; b < members_.size(); ++b) {
        if (members_[a].empty() || members_[b].empty()) continue;
        if (TailExchange(a, b)) better = true;
      }
    }
    return better;
  }

  bool TailExchange(size_t a, size_t b) {
    const auto& ma = members_[a];
    const auto& mb = members_[b];
    SuffixMax(ma, &tail_a_);
    SuffixMax(mb, &tail_b_);
    const size_t before = top_[a].bytes + top_[b].bytes;
    size_t best_total = before, best_ia = 0, best_ib = 0;
    size_t ia = 0, ib = 0, head_a = 0, head_b = 0;
    // Candidate cuts: the first steps of the tensors of either buffer, ascending.
    while (ia < ma.size() || ib < mb.size()) {
      ++*work_;
      const int cut = std::min(ia < ma.size() ? T(ma[ia]).first : INT32_MAX,
                               ib < mb.size() ? T(mb[ib]).first : INT32_MAX);
      const bool clear =
          (ia == 0 || T(ma[ia - 1]).last < cut) && (ib == 0 || T(mb[ib - 1]).last < cut);
      if (clear && (ia > 0 || ib > 0)) {
        const size_t total = std::max(head_a, tail_b_[ib]) + std::max(head_b, tail_a_[ia]);
        if (total < best_total) {
          best_total = total;
          best_ia = ia;
          best_ib = ib;
        }
      }
      // Past the cut: every tensor starting at it joins the heads.
      while (ia < ma.size() && T(ma[ia]).first == cut) head_a = std::max(head_a, T(ma[ia++]).bytes);
      while (ib < mb.size() && T(mb[ib]).first == cut) head_b = std::max(head_b, T(mb[ib++]).bytes);
    }
    if (best_total >= before) return false;
    std::vector<size_t> new_a(ma.begin(), ma.begin() + best_ia);
    std::vector<size_t> new_b(mb.begin(), mb.begin() + best_ib);
    new_a.insert(new_a.end(), mb.begin() + best_ib, mb.end());
    new_b.insert(new_b.end(), ma.begin() + best_ia, ma.end());
    members_[a] = std::move(new_a);
    members_[b] = std::move(new_b);
    for (size_t i : members_[a]) buffer_of_[i] = static_cast<int>(a);
    for (size_t i : members_[b]) buffer_of_[i] = static_cast<int>(b);
    Refresh(a);
    Refresh(b);
    return true;
  }

  // out[k] = the largest of m[k..], out[m.size()] = 0.
  void SuffixMax(const std::vector<size_t>& m, std::vector<size_t>* out) const {
    *work_ += m.size() + 1;
    out->assign(m.size() + 1, 0);
    for (size_t k = m.size(); k-- > 0;) (*out)[k] = std::max((*out)[k + 1], T(m[k]).bytes);
  }

  const std::vector<TensorUsage>* t_;
  size_t* work_;
  size_t limit_ = SIZE_MAX;  // of *work_, for Improve's passes
  std::vector<int> buffer_of_;
  std::vector<std::vector<size_t>> members_;
  std::vector<Top> top_;
  std::vector<size_t> tail_a_, tail_b_;  // scratch of TailExchange
};

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
  std::vector<Search> starts;
  for (const std::vector<size_t>& order : orders) {
    starts.emplace_back(tensors, AssignInOrder(tensors, order).assignment, &work);
    starts.back().Improve(/*swaps=*/true, work + kSearchWork / (2 * orders.size()));
  }
  Search current = starts[0];
  for (const Search& s : starts)
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
    Search trial = current;
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
