#include "chat/jinja/error.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {
constexpr char kLinePayload[] = "cairn.jinja.line";
}  // namespace

absl::Status TemplateFailure(std::string_view exception, std::string_view message) {
  return absl::InvalidArgumentError(Cat(exception, ": ", message));
}

absl::Status TypeError(std::string_view message) { return TemplateFailure(kTypeError, message); }

absl::Status ValueError(std::string_view message) { return TemplateFailure(kValueError, message); }

absl::Status Unsupported(std::string_view what) {
  return absl::UnimplementedError(Cat(what, " is not supported by cairn's template interpreter"));
}

absl::Status LimitExceeded(std::string_view what) {
  return absl::ResourceExhaustedError(Cat("template limit exceeded: ", what));
}

absl::Status WithLine(absl::Status status, int line) {
  if (status.ok() || line <= 0 || status.GetPayload(kLinePayload).has_value()) return status;
  status.SetPayload(kLinePayload, absl::Cord(Cat(line)));
  return status;
}

int ErrorLine(const absl::Status& status) {
  const auto payload = status.GetPayload(kLinePayload);
  int line = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &line)) return 0;
  return line;
}

std::string DescribeError(const absl::Status& status) {
  const int line = ErrorLine(status);
  if (line == 0) return std::string(status.message());
  return Cat(status.message(), " (template line ", line, ")");
}

}  // namespace cairn::jinja
