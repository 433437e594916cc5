// Knobs of the environment for tuning and research (CLGPU_FLUSH, CLGPU_COST_TUNE, ...): a fixed
// count of comma-separated numbers and nothing else, or a one-line error naming the variable.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace clgpu {

// $name, copied under the process's lock (common/process_lock.h); nullopt when unset. Every read
// of the environment goes through here: a driver starting on another thread may setenv().
std::optional<std::string> GetEnv(const char* name);

// $name as `count` numbers; empty when unset or empty. Throws Error("NAME must be EXPECT, not
// 'VALUE'") when it holds anything else, a non-finite number, or numbers `valid` refuses.
std::vector<double> EnvNumbers(const char* name, size_t count, const char* expect,
                               const std::function<bool(const std::vector<double>&)>& valid = {});

// $name as a switch: nullopt when unset or empty, else 0 -> false and 1 -> true; anything else
// throws as EnvNumbers does ("NAME must be 0 or 1, not 'VALUE'").
std::optional<bool> EnvSwitch(const char* name);

// True when every value is a whole number >= lo (counts and indices).
bool WholeAtLeast(const std::vector<double>& v, double lo);

}  // namespace clgpu
