#include "runtime/launch_forms.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
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

std::shared_ptr<FormVotes> FormVotes::For(uint64_t key) {
  if (key == 0) return std::make_shared<FormVotes>();
  static std::mutex mutex;
  static std::map<uint64_t, std::weak_ptr<FormVotes>> live;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = live.begin(); it != live.end();)  // the records no trial holds any more
    it = it->second.expired() ? live.erase(it) : std::next(it);
  std::weak_ptr<FormVotes>& slot = live[key];
  if (auto v = slot.lock()) return v;
  auto v = std::make_shared<FormVotes>();
  slot = v;
  return v;
}

bool FormVotes::Add(double ratio) {
  std::lock_guard<std::mutex> lock(mutex_);
  ratios_.push_back(ratio);
  if (int(ratios_.size()) > LaunchFormTrial::kWindow) ratios_.erase(ratios_.begin());
  if (int(ratios_.size()) < LaunchFormTrial::kPairs) return false;
  kept_ = Median(ratios_) <= LaunchFormTrial::kKeepFewer ? LaunchForm::kFewerLaunches
                                                         : LaunchForm::kShorterDevice;
  decided_ = true;
  return true;
}

void LaunchFormTrial::Reset(bool offered, uint64_t key) {
  offered_ = offered;
  seen_ = kept_ = 0;
  draw_ = 0x9E3779B9u;  // the same draws after every bind: a run repeats
  // $CLGPU_LAUNCH_FORM_SHARED=0: each trial on its own pairs (A/B).
  const bool shared = GetEnv("CLGPU_LAUNCH_FORM_SHARED").value_or("1") != "0";
  votes_ = FormVotes::For(offered && shared ? key : 0);
  pairing_ = first_pairs_ = !votes_->decided();
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

LaunchForm LaunchFormTrial::Next() {
  if (!offered_) return LaunchForm::kBoth;
  if (fixed_ != LaunchForm::kBoth) return fixed_;
  if (seen_ < kSkip) return LaunchForm::kShorterDevice;  // as untimed invokes run it
  // Between its first pairs, another trial of the key decided: no more first pairs here.
  if (first_pairs_ && first_ns_ < 0 && votes_->decided()) pairing_ = first_pairs_ = false;
  if (!pairing_) return votes_->kept();
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
  if (!votes_->Add(last_ratio_)) return NextPair();
  pairing_ = first_pairs_ = false;
  kept_ = 0;
}

}  // namespace clgpu
