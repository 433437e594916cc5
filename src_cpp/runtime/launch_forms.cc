#include "runtime/launch_forms.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/env.h"
#include "common/error.h"

namespace clgpu {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

LaunchForm Other(LaunchForm f) {
  return f == LaunchForm::kFewerLaunches ? LaunchForm::kShorterDevice : LaunchForm::kFewerLaunches;
}

}  // namespace

void LaunchFormTrial::Reset(bool offered) {
  offered_ = offered;
  seen_ = kept_ = 0;
  draw_ = 0x9E3779B9u;  // the same draws after every bind: a run repeats
  StartPairs();
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

void LaunchFormTrial::StartPairs() {
  ratios_.clear();
  NextPair();
}

void LaunchFormTrial::NextPair() {
  first_ns_ = -1;
  draw_ ^= draw_ << 13, draw_ ^= draw_ >> 17, draw_ ^= draw_ << 5;
  first_ = draw_ & 1 ? LaunchForm::kFewerLaunches : LaunchForm::kShorterDevice;
}

LaunchForm LaunchFormTrial::Next() const {
  if (!offered_) return LaunchForm::kBoth;
  if (fixed_ != LaunchForm::kBoth) return fixed_;
  if (seen_ < kSkip) return LaunchForm::kShorterDevice;  // as untimed invokes run it
  return first_ns_ < 0 ? first_ : Other(first_);
}

void LaunchFormTrial::Record(LaunchForm ran, int64_t ns) {
  if (!offered_ || from_env_) return;
  if (fixed_ != LaunchForm::kBoth) {
    if (++kept_ < kRecheck) return;
    fixed_ = LaunchForm::kBoth;  // measure again, in pairs from the next invoke
    seen_ = kSkip;
    StartPairs();
    return;
  }
  if (seen_++ < kSkip) return;
  if (first_ns_ < 0) {
    first_ns_ = ns;
    return;
  }
  const int64_t fewer = ran == LaunchForm::kFewerLaunches ? ns : first_ns_;
  const int64_t shorter = ran == LaunchForm::kFewerLaunches ? first_ns_ : ns;
  ratios_.push_back(double(fewer) / double(std::max<int64_t>(shorter, 1)));
  if (int(ratios_.size()) < kPairs) return NextPair();
  fixed_ = Median(ratios_) <= kKeepFewer ? LaunchForm::kFewerLaunches : LaunchForm::kShorterDevice;
  kept_ = 0;
}

}  // namespace clgpu
