#include "runtime/build_threads.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <thread>

#include "common/env.h"
#include "common/error.h"

namespace clgpu {

int BuildThreads() {
  const std::vector<double> n =
      EnvNumbers("CLGPU_BUILD_THREADS", 1, "a count >= 0",
                 [](const std::vector<double>& v) { return WholeAtLeast(v, 0); });
  if (!n.empty() && n[0] > 0) return static_cast<int>(std::min(n[0], 64.0));
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

void RunTakingTurns(const std::vector<std::function<void(std::mutex* turn)>>& tasks, int threads) {
  const size_t n = tasks.size();
  if (threads <= 1 || n <= 1) {
    for (const auto& t : tasks) t(nullptr);
    return;
  }
  std::mutex turn;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(n);
  auto work = [&] {
    for (;;) {
      std::lock_guard<std::mutex> lock(turn);
      if (failed) return;
      const size_t i = next++;
      if (i >= n) return;
      try {
        tasks[i](&turn);
      } catch (...) {
        errors[i] = std::current_exception();  // under the turn: one writer at a time
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min<size_t>(static_cast<size_t>(threads), n) - 1;
  try {
    for (size_t i = 0; i < extra; ++i) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started (and this one) do the work.
  }
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace clgpu
