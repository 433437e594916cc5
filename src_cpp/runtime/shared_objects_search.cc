#include "runtime/shared_objects_search.h"

namespace clgpu {
namespace shared_objects {

void SharedObjectSearch::Improve(bool swaps, size_t limit) {
  limit_ = limit;
  for (int pass = 0; pass < 64 && *work_ < limit_; ++pass) {
    bool better = Moves();
    better = Ejections() || better;
    if (swaps) better = Swaps() || better;
    better = TailExchanges() || better;
    if (!better) break;
  }
}

void SharedObjectSearch::Rebuild(const std::vector<std::pair<int, int>>& windows, bool by_size) {
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

std::vector<std::pair<int, int>> SharedObjectSearch::SizingWindows(size_t pick, int half) const {
  std::vector<size_t> used;
  for (size_t b = 0; b < members_.size(); ++b)
    if (!members_[b].empty()) used.push_back(b);
  const size_t b = used[pick % used.size()];
  std::vector<std::pair<int, int>> windows;
  for (size_t i : members_[b])
    if (T(i).bytes == top_[b].bytes) windows.emplace_back(T(i).first - half, T(i).last + half);
  return windows;
}

size_t SharedObjectSearch::Cheapest(size_t i) {
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

bool SharedObjectSearch::Moves() {
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

size_t SharedObjectSearch::OnlyConflict(size_t i, size_t b) const {
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

std::pair<int64_t, int64_t> SharedObjectSearch::ChainDelta(size_t i, size_t a, size_t b, size_t u,
                                                           size_t c) const {
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

bool SharedObjectSearch::Ejections() {
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

bool SharedObjectSearch::Swaps() {
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

bool SharedObjectSearch::TailExchanges() {
  bool better = false;
  for (size_t a = 0; a < members_.size() && *work_ < limit_; ++a) {
    for (size_t b = a + 1; b < members_.size(); ++b) {
      if (members_[a].empty() || members_[b].empty()) continue;
      if (TailExchange(a, b)) better = true;
    }
  }
  return better;
}

bool SharedObjectSearch::TailExchange(size_t a, size_t b) {
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

}  // namespace shared_objects
}  // namespace clgpu
