// Kernel init's program builds spread over the host's cores: the ops of a partition prepare
// on a few threads that take turns (one runs at a time), and a thread lets go of its turn only
// while a program it needs builds (OpContext::turn). Ops thus prepare as if alone, with no
// locking of their own, while the OpenCL compiler runs on several programs at once.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

namespace clgpu {

// Threads for building: $CLGPU_BUILD_THREADS (1: serial, as before; 0 or unset: one per host
// core, at most 16). Read at every call, so a test may switch it between models.
int BuildThreads();

// Runs every task once, on up to `threads` threads (this one among them) taking turns: a task
// holds `turn` while it runs, and passes it on to ProgramCache::Get. threads <= 1 or one task:
// in order on this thread, with `turn` null. After a failure no further task starts; the tasks
// already running finish; then the failure of the first task (in order) that failed is thrown.
void RunTakingTurns(const std::vector<std::function<void(std::mutex* turn)>>& tasks, int threads);

}  // namespace clgpu
