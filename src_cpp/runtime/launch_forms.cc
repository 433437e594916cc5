#include "runtime/launch_forms.h"

#include <algorithm>
#include <string>

#include "common/env.h"
#include "common/error.h"

namespace clgpu {
namespace {

int64_t Median(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

void LaunchFormTrial::Reset(bool offered) {
  offered_ = offered;
  seen_ = kept_ = 0;
  fewer_ns_.clear();
  shorter_ns_.clear();
  fixed_ = LaunchForm::kBoth;
  const std::string f = GetEnv("CLGPU_LAUNCH_FORM").value_or("");
  if (f == "fewer")
    fixed_ = LaunchForm::kFewerLaunches;
  else if (f == "shorter")
    fixed_ = LaunchForm::kShorterDevice;
  else if (!f.empty() && f != "measure")
    throw Error("CLGPU_LAUNCH_FORM must be measure, fewer or shorter, not '" + f + "'");
  from_env_ = fixed_ != LaunchForm::kBoth;
}

LaunchForm LaunchFormTrial::Next() const {
  if (!offered_) return LaunchForm::kBoth;
  if (fixed_ != LaunchForm::kBoth) return fixed_;
  // In turns, the shorter form first (as untimed invokes run it).
  if (seen_ < kSkip) return LaunchForm::kShorterDevice;
  return (seen_ - kSkip) % 2 ? LaunchForm::kFewerLaunches : LaunchForm::kShorterDevice;
}

void LaunchFormTrial::Record(LaunchForm ran, int64_t ns) {
  if (!offered_ || from_env_) return;
  if (fixed_ != LaunchForm::kBoth) {
    if (++kept_ < kRecheck) return;
    fixed_ = LaunchForm::kBoth;  // measure again, in turns from the next invoke
    seen_ = kSkip;
    fewer_ns_.clear();
    shorter_ns_.clear();
    return;
  }
  if (seen_++ < kSkip) return;
  (ran == LaunchForm::kFewerLaunches ? fewer_ns_ : shorter_ns_).push_back(ns);
  if (int(fewer_ns_.size()) < kPerForm || int(shorter_ns_.size()) < kPerForm) return;
  fixed_ = double(Median(fewer_ns_)) <= kKeepFewer * double(Median(shorter_ns_))
               ? LaunchForm::kFewerLaunches
               : LaunchForm::kShorterDevice;
  kept_ = 0;
}

}  // namespace clgpu
