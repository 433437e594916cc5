// Minimal logging: warnings go to stderr (logcat on Android). Level from
// $CLGPU_LOG (error|warning|info|debug), default warning.
#pragma once

#include <chrono>
#include <string>
#include <utility>

namespace clgpu {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

void Log(LogLevel level, const std::string& message);
bool LogEnabled(LogLevel level);

// Logs "<what> in X ms" at debug level when it goes out of scope: where a model's init goes
// (CLGPU_LOG=debug), phase by phase.
class DebugTimer {
 public:
  explicit DebugTimer(std::string what)
      : what_(std::move(what)), t0_(std::chrono::steady_clock::now()) {}
  ~DebugTimer();
  DebugTimer(const DebugTimer&) = delete;
  DebugTimer& operator=(const DebugTimer&) = delete;

 private:
  std::string what_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace clgpu
