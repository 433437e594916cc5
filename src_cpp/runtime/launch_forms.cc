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
  ratios_.clear();
  pairing_ = true;
  kept_form_ = LaunchForm::kShorterDevice;
  NextPair();
  fixed_ = LaunchForm::kBoth;
  const std::string f = GetEnv("CLGPU_LAUNCH_FORM").value_or("");
  if (f == "fewer")
    fixed_ = LaunchForm::kFewerLaunches;
  else if (f == "shorter")
    fixed_ = LaunchForm::kShorterDevice;
  else if (!f.empty() && f != "measure")
    throw Error("CLGPU_LAUNCH_FORM must be measure, fewer or shorter, not '" + f + "'");
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
  if (!pairing_) return kept_form_;
  return first_ns_ < 0 ? first_ : Other(first_);
}

void LaunchFormTrial::Record(LaunchForm ran, int64_t ns) {
  last_ratio_ = 0;
  if (!offered_ || fixed_ != LaunchForm::kBoth) return;
  if (seen_ < kSkip) {
    ++seen_;
    return;
  }
  if (!pairing_) {
    if (++kept_ >= kEvery) pairing_ = true, NextPair();
    return;
  }
  if (first_ns_ < 0) {
    first_ns_ = ns;
    return;
  }
  const int64_t fewer = ran == LaunchForm::kFewerLaunches ? ns : first_ns_;
  const int64_t shorter = ran == LaunchForm::kFewerLaunches ? first_ns_ : ns;
  last_ratio_ = double(std::max<int64_t>(fewer, 1)) / double(std::max<int64_t>(shorter, 1));
  ratios_.push_back(last_ratio_);
  if (int(ratios_.size()) > kWindow) ratios_.erase(ratios_.begin());
  if (int(ratios_.size()) < kPairs) return NextPair();
  kept_form_ =
      Median(ratios_) <= kKeepFewer ? LaunchForm::kFewerLaunches : LaunchForm::kShorterDevice;
  pairing_ = false;
  kept_ = 0;
}

}  // namespace clgpu
