// How far a partition's device setup has come, for the interpreter's thread to weigh against
// its CPU kernels while the setup thread binds (cpu_warmup, runtime/partition_warmup.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace clgpu {

class SetupProgress {
 public:
  // Setup thread: `tasks` op prepares (programs, weights) are about to run.
  void Start(size_t tasks) {
    done_.store(0, std::memory_order_relaxed);
    total_.store(static_cast<int>(tasks), std::memory_order_relaxed);
    start_ns_.store(Now(), std::memory_order_release);
  }
  void Reset() { start_ns_.store(0, std::memory_order_release); }  // before a setup starts
  void TaskDone() { done_.fetch_add(1, std::memory_order_acq_rel); }
  // The time the tasks left would take at the pace of those done; infinity before the first is
  // done (the pace is unknown, and the memory plan before them is not counted).
  double RemainingMs() const {
    const int64_t start = start_ns_.load(std::memory_order_acquire);
    const int done = done_.load(std::memory_order_acquire);
    const int total = total_.load(std::memory_order_relaxed);
    if (start == 0 || done <= 0) return std::numeric_limits<double>::infinity();
    return double(Now() - start) / 1e6 * double(total - done) / double(done);
  }

 private:
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::atomic<int64_t> start_ns_{0};
  std::atomic<int> total_{0}, done_{0};
};

}  // namespace clgpu
