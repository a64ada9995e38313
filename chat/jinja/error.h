// The errors a template raises, as absl::Status values.
//
// What Jinja2 (in the sandbox transformers uses) would raise is
// INVALID_ARGUMENT with the message "<Python exception>: <message>"
// ("TemplateError: System role not supported", "UndefinedError: 'x' is
// undefined", "SecurityError: access to attribute 'append' of 'list' object
// is unsafe."), exactly as Hugging Face reports a refusal. What cairn does not
// implement is UNIMPLEMENTED; a limit hit (steps, depth, output, time) is
// RESOURCE_EXHAUSTED. The template line an error arose on travels as a status
// payload (ErrorLine), so messages stay comparable with the reference's.
#ifndef CAIRN_CHAT_JINJA_ERROR_H_
#define CAIRN_CHAT_JINJA_ERROR_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace cairn::jinja {

// Python exception names used in messages.
inline constexpr std::string_view kSyntaxError = "TemplateSyntaxError";
inline constexpr std::string_view kAssertionError = "TemplateAssertionError";
inline constexpr std::string_view kRuntimeError = "TemplateRuntimeError";
inline constexpr std::string_view kTemplateError = "TemplateError";
inline constexpr std::string_view kUndefinedError = "UndefinedError";
inline constexpr std::string_view kSecurityError = "SecurityError";
inline constexpr std::string_view kTypeError = "TypeError";
inline constexpr std::string_view kValueError = "ValueError";
inline constexpr std::string_view kZeroDivisionError = "ZeroDivisionError";
inline constexpr std::string_view kOverflowError = "OverflowError";

// INVALID_ARGUMENT "<exception>: <message>".
absl::Status TemplateFailure(std::string_view exception, std::string_view message);
absl::Status TypeError(std::string_view message);
absl::Status ValueError(std::string_view message);
absl::Status Unsupported(std::string_view what);
absl::Status LimitExceeded(std::string_view what);

// Attaches the template line to an error that has none yet.
absl::Status WithLine(absl::Status status, int line);
// The template line of an error (0 when unknown).
int ErrorLine(const absl::Status& status);
// The message with its line: "TemplateError: ... (template line 3)".
std::string DescribeError(const absl::Status& status);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_ERROR_H_
