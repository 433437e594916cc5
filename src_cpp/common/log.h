// Minimal logging: warnings go to stderr (logcat on Android). Level from
// $CLGPU_LOG (error|warning|info|debug), default warning.
#pragma once

#include <string>

namespace clgpu {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

void Log(LogLevel level, const std::string& message);
bool LogEnabled(LogLevel level);

}  // namespace clgpu
