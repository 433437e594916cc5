// The local search of the shared-objects planner (shared_objects_planner.cc): an assignment of
// tensors to whole shared buffers, improved by moves, ejection chains, swaps and tail exchanges.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "runtime/memory_planner.h"

namespace clgpu {
namespace shared_objects {

// Whether tensor i may join the tensors `users` (disjoint lifetimes, in order of
// first use), ignoring `except`. Those that overlap i are consecutive and end
// with the last one that starts no later than i ends: at most two to check.
inline bool FreeFor(const std::vector<TensorUsage>& t, const std::vector<size_t>& users, size_t i,
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

inline void InsertByFirst(const std::vector<TensorUsage>& t, std::vector<size_t>* users, size_t i) {
  users->insert(std::lower_bound(users->begin(), users->end(), i,
                                 [&](size_t x, size_t y) { return t[x].first < t[y].first; }),
                i);
}

// A shared-objects assignment being improved by local search. Each buffer keeps
// its tensors in order of first use (their lifetimes are disjoint, so also in
// order of last use) and its largest sizes, so that the cost of taking a tensor
// out is known without a scan. Plans compare by total bytes, then by `sizing`
// (the bytes of the tensors that set their buffer's size): among equal totals
// the one whose buffers are sized by fewer tensors is closer to shrinking one.
// `work` counts the steps of the search so that callers can bound it by a
// budget that does not depend on timing (the plan stays deterministic).
class SharedObjectSearch {
 public:
  SharedObjectSearch(const std::vector<TensorUsage>& tensors, const std::vector<int>& assignment,
                     size_t* work)
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
  bool NoWorseThan(const SharedObjectSearch& o) const {
    const size_t a = Total(), b = o.Total();
    return a != b ? a < b : Sizing() <= o.Sizing();
  }

  // Passes of single moves, ejection chains, pairwise swaps and tail exchanges
  // until none of them improves the plan (each accepted step lowers (total,
  // sizing), so this ends) or the work reaches `limit`.
  void Improve(bool swaps, size_t limit);

  // A kick out of a local optimum: every tensor alive in one of the windows of
  // steps [lo, hi] is taken out and put back, largest first or in order of
  // first use, each where the total grows least (a new buffer only where no
  // buffer is free).
  void Rebuild(const std::vector<std::pair<int, int>>& windows, bool by_size);

  // Windows around the tensors that set the size of one buffer (the pick-th,
  // wrapping): rebuilding them is how that buffer can shrink, which may take
  // moving all of them at once.
  std::vector<std::pair<int, int>> SizingWindows(size_t pick, int half) const;

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
  size_t Cheapest(size_t i);

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
  bool Moves();

  // The one tensor of buffer b in the way of tensor i; SIZE_MAX if none or several.
  size_t OnlyConflict(size_t i, size_t b) const;

  // Change of (total, sizing) if tensor i moved from buffer a to b and tensor u
  // from b to c (c may be a): the three buffers' sizes, recounted.
  std::pair<int64_t, int64_t> ChainDelta(size_t i, size_t a, size_t b, size_t u, size_t c) const;

  // Ejection chains of two: a tensor that sets its buffer's size moves into a
  // buffer where exactly one tensor is in its way, which moves on to a third
  // buffer (or to where the first one was); taken where (total, sizing) drops.
  // Frees a buffer that no single move or swap can.
  bool Ejections();

  // Two tensors of different buffers trade places where that lowers the total:
  // only possible if one of them alone sets its buffer's size.
  bool Swaps();

  // Two buffers trade everything from one step on: valid at any step that no
  // tensor of either buffer spans, and it can cut both sizes at once (a large
  // early tensor and a large late one end up together).
  bool TailExchanges();

  bool TailExchange(size_t a, size_t b);

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

}  // namespace shared_objects
}  // namespace clgpu
