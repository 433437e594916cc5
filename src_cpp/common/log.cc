#include "common/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/env.h"

#ifdef __ANDROID__
#include <android/log.h>
#endif

namespace clgpu {
namespace {

LogLevel ThresholdFromEnv() {
  const std::optional<std::string> value = GetEnv("CLGPU_LOG");
  if (!value) return LogLevel::kWarning;
  const char* env = value->c_str();
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  if (!std::strcmp(env, "info")) return LogLevel::kInfo;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  return LogLevel::kWarning;
}

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kDebug:
      return "DEBUG";
  }
  return "?";
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return static_cast<int>(level) <= static_cast<int>(threshold);
}

void Log(LogLevel level, const std::string& message) {
  if (!LogEnabled(level)) return;
#ifdef __ANDROID__
  const int prio = level == LogLevel::kError     ? ANDROID_LOG_ERROR
                   : level == LogLevel::kWarning ? ANDROID_LOG_WARN
                   : level == LogLevel::kInfo    ? ANDROID_LOG_INFO
                                                 : ANDROID_LOG_DEBUG;
  __android_log_write(prio, "clgpu_delegate", message.c_str());
#else
  std::fprintf(stderr, "clgpu_delegate %s: %s\n", Name(level), message.c_str());
#endif
}

DebugTimer::~DebugTimer() {
  if (!LogEnabled(LogLevel::kDebug)) return;
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0_)
          .count();
  Log(LogLevel::kDebug,
      what_ + " in " + std::to_string(us / 1000) + "." + std::to_string(us / 100 % 10) + " ms");
}

}  // namespace clgpu
