#include "service/api/stated_history.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::service {

absl::Status CheckStatedHistory(const v1::GenerateRequest& req) {
  if (!req.has_session_tokens()) return absl::OkStatus();
  if (req.session_id().empty()) return absl::InvalidArgumentError("session_tokens needs a session_id");
  if (req.session_tokens() < 0) return absl::InvalidArgumentError("session_tokens must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<History>> StatedHistory(const History& committed, const v1::GenerateRequest& req) {
  if (!req.has_session_tokens()) return std::nullopt;
  if (absl::Status st = CheckStatedHistory(req); !st.ok()) return st;
  const auto stated = static_cast<size_t>(req.session_tokens());
  if (stated > committed.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session_tokens is ", stated, ": session '", req.session_id(), "' has ", committed.size()));
  }
  if (stated == committed.size()) return std::nullopt;
  History cut = committed;
  cut.Resize(stated);
  return std::optional<History>(std::move(cut));
}

}  // namespace cairn::service
