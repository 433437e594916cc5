// Which of its two launch forms a partition runs (LaunchForm, ops/op_parts.h). Where its ops
// offer one, the form with fewer launches saves the host an enqueue per such op and costs the
// device a little more (split-K summed in the split kernel: the last group's atomic and reads).
// Which is faster depends on whether this invoke is bound by the host's enqueue or by the device,
// and so on the host's cost per launch in this process, which NVIDIA's driver holds at one of
// two levels that nothing on the host chooses (bench/results/enqueue-probe-cores-*): no estimate
// decides it, so the partition measures. Its first invokes after a bind run the forms in pairs,
// one invoke of each, in an order drawn per pair, and it keeps the fewer launches where the
// median of the pairs' ratios says so. The level changes within a process, every few tens of
// milliseconds, and the first pairs take about that long: after them one more pair runs every
// kEvery invokes, and each decides again on the last kWindow pairs. A decision on the first
// pairs alone kept the form 8 % slower on a PRELU CNN in one of two delegates of one plan
// (bench/results/never-slower-NVIDIA_H200.md at 4027c1f, in git). $CLGPU_LAUNCH_FORM=fewer or
// shorter fixes the form instead (tests, A/B).
//
// Why pairs in a drawn order: whatever else the process runs between invokes (another model,
// the CPU's threads) slows the invokes after it, and a fixed alternation lined up with such a
// period, with its slow invokes all in one form: in bench/never_slower.py's turns of six, one
// delegate kept the form 1.22x slower than the other delegate of that plan kept
// (bench/results/never-slower-heldout-seeds6162-NVIDIA_H200.md at a488b6c). A pair's two invokes
// share the conditions, and a slow first invoke falls to either form alike.
//
// Partitions of one process that launch the same kernels over the same extents (the delegates
// of one plan: two interpreters of one model, never_slower.py's columns) share one record of
// pairs (FormVotes): each pair any of them runs counts for all, and all run the form it keeps.
// Each deciding on its own pairs, delegates of one plan kept different forms for stretches of
// the same run and ran up to 1.2x apart (bench/results/instance-spread-forms-NVIDIA_H200.md).
// $CLGPU_LAUNCH_FORM_SHARED=0 gives each partition its own record (A/B).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/op_parts.h"

namespace clgpu {

// The pairs' ratios and the form they keep, for the trials of one key.
class FormVotes {
 public:
  // The record of `key` in this process, made when no live trial holds one; key 0: a new one
  // of its own.
  static std::shared_ptr<FormVotes> For(uint64_t key);
  // A pair's ratio (fewer / shorter) into the last kWindow; true once kPairs are in, when the
  // kept form is decided again on them.
  bool Add(double ratio);
  // Read on every invoke: atomics, no lock.
  bool decided() const { return decided_.load(std::memory_order_relaxed); }
  LaunchForm kept() const { return kept_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;  // ratios_
  std::vector<double> ratios_;
  std::atomic<LaunchForm> kept_{LaunchForm::kShorterDevice};
  std::atomic<bool> decided_{false};
};

class LaunchFormTrial {
 public:
  // At a bind: `offered`, whether any of the partition's launches has a form; `key`, what its
  // launches are (Partition::FormKey; 0: shared with no other trial). A trial whose key's record
  // is already decided skips the first pairs.
  void Reset(bool offered, uint64_t key = 0);
  // The form the next invoke runs (kBoth: the partition has no forms).
  LaunchForm Next();
  // That invoke's host time from its first enqueue to the end of its wait.
  void Record(LaunchForm ran, int64_t ns);
  // The ratio (fewer / shorter) of the pair the last Record completed; 0 where it completed none.
  double last_ratio() const { return last_ratio_; }
  // Whether `l` runs in form `f`.
  static bool Runs(const Launch& l, LaunchForm f) {
    return l.form == LaunchForm::kBoth || f == LaunchForm::kBoth || l.form == f;
  }

  // Invokes skipped after a bind (their first commands may still wait on buffer migrations), then
  // kPairs pairs back to back, one invoke in each form; then a pair after every kEvery invokes
  // in the kept form (one invoke in 34 in the other form: a few tenths of a percent of the
  // time where the forms differ by 10 %), deciding on the last kWindow pairs' ratios.
  static constexpr int kSkip = 2, kPairs = 12, kEvery = 32, kWindow = 24;
  // The form with fewer launches is kept where the median of its pairs' time ratios (fewer /
  // shorter) is at most this, so a tie keeps it: where two delegates of one plan kept different
  // forms with 0.98 here, the one in this form ran faster in 15 of 17 rows (1-18 %; draws
  // 81-90, main, DS-width and wheels tables at cf32780): its pairs under-read its gain. The
  // cost model counts this form where it is the cheaper (ops/gemm.h SplitKLastUs).
  static constexpr double kKeepFewer = 1.02;

 private:
  void NextPair();  // the next pair's order
  bool offered_ = false;
  LaunchForm fixed_ = LaunchForm::kBoth;  // $CLGPU_LAUNCH_FORM
  std::shared_ptr<FormVotes> votes_;      // the pairs, this trial's and its key's others'
  bool pairing_ = true;                   // in a pair, or in the first kPairs
  bool first_pairs_ = true;               // no decision yet since the bind
  int seen_ = 0, kept_ = 0;  // invokes since the bind (to kSkip); in the kept form since a pair
  LaunchForm first_ = LaunchForm::kShorterDevice;  // the form the open pair ran first
  int64_t first_ns_ = -1;                          // its time; -1: no pair open
  uint32_t draw_ = 0;                              // the pairs' order (xorshift32)
  double last_ratio_ = 0;
};
}  // namespace clgpu
