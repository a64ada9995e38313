// The server's log: lines on stderr, filtered by a process-wide level
// (cairn-server --log-level). One write per line, so lines from concurrent
// requests never interleave.
#ifndef CAIRN_SERVICE_HOST_LOG_H_
#define CAIRN_SERVICE_HOST_LOG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cairn::service {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// "error", "warning", "info" or "debug"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// Thread-safe. The default is kInfo.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
// Writes "cairn: <line>\n" when `level` is enabled.
void LogLine(LogLevel level, absl::string_view line);

// `value` as a logfmt value: as it is when it is a plain word, else in
// double quotes with quotes, backslashes and control bytes escaped (client
// text can never break a line or forge a field).
std::string LogValue(absl::string_view value);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_LOG_H_
