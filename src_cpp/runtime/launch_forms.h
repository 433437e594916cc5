// Which of its two launch forms a partition runs (LaunchForm, ops/op_parts.h). Where its ops
// offer one, the form with fewer launches saves the host an enqueue per such op and costs the
// device a little more (split-K summed in the split kernel: the last group's atomic and reads).
// Which is faster depends on whether this invoke is bound by the host's enqueue or by the device,
// and so on the host's cost per launch in this process, which NVIDIA's driver holds at one of
// two levels that nothing on the host chooses (bench/results/enqueue-probe-cores-*): no estimate
// decides it, so the partition measures. Its first invokes after a bind alternate the forms, and
// it keeps the one whose median invoke was faster; the level can change within a process, so it
// measures again every kRecheck invokes. $CLGPU_LAUNCH_FORM=fewer or shorter fixes the form
// instead (tests, A/B).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_parts.h"

namespace clgpu {

class LaunchFormTrial {
 public:
  // At a bind: `offered`, whether any of the partition's launches has a form.
  void Reset(bool offered);
  // The form the next invoke runs (kBoth: the partition has no forms).
  LaunchForm Next() const;
  // That invoke's host time from its first enqueue to the end of its wait.
  void Record(LaunchForm ran, int64_t ns);
  // Whether `l` runs in form `f`.
  static bool Runs(const Launch& l, LaunchForm f) {
    return l.form == LaunchForm::kBoth || f == LaunchForm::kBoth || l.form == f;
  }

  // Invokes skipped after a bind (their first commands may still wait on buffer migrations), then
  // invokes timed per form, in turns; invokes in the kept form before the next such turns (at
  // most 8 of them in the slower form: a few tenths of a percent of the invokes).
  static constexpr int kSkip = 2, kPerForm = 8, kRecheck = 2000;
  // The form with fewer launches is kept where its median is at most this share of the other's:
  // the other form is what the cost model counted, so a tie keeps it.
  static constexpr double kKeepFewer = 0.98;

 private:
  bool offered_ = false;
  LaunchForm fixed_ = LaunchForm::kBoth;  // $CLGPU_LAUNCH_FORM, or decided
  bool from_env_ = false;
  int seen_ = 0, kept_ = 0;  // invokes since the bind; since the last decision
  std::vector<int64_t> fewer_ns_, shorter_ns_;
};

}  // namespace clgpu
