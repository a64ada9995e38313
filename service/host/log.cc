#include "service/host/log.h"

#include <atomic>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cairn::service {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  return absl::InvalidArgumentError(absl::StrCat("log level '", name, "': expected error, warning, info or debug"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void LogLine(LogLevel level, absl::string_view line) {
  if (!LogEnabled(level)) return;
  const std::string out = absl::StrCat("cairn: ", line, "\n");
  std::fwrite(out.data(), 1, out.size(), stderr);
}

std::string LogValue(absl::string_view value) {
  bool plain = !value.empty();
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '"' || c == '\\' || c == '=') plain = false;
  }
  if (plain) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace cairn::service
