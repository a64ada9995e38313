// The history a client states it has (GenerateRequest.session_tokens): an
// appended Generate on a session continues the session's history cut back to
// it, as after a RewindSession, so that a turn the server ended OK but the
// client saw end without OK (its cancel or deadline came just after the
// server's end) is never built on. The cut joins the session's history only
// with a turn that ends OK (generate_call.cc).
#ifndef CAIRN_SERVICE_API_STATED_HISTORY_H_
#define CAIRN_SERVICE_API_STATED_HISTORY_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"
#include "service/scheduling/history.h"

namespace cairn::service {

// The request alone: INVALID_ARGUMENT when session_tokens is negative or
// given without a session_id (a sessionless request has no history to cut).
// Thread-safe (reads `req` only).
absl::Status CheckStatedHistory(const v1::GenerateRequest& req);

// The session's history the request continues from: `committed` cut back to
// the stated length, or nullopt when the request states none or exactly
// `committed`'s length (nothing to cut). FAILED_PRECONDITION when the stated
// length exceeds `committed` (the client claims symbols the session never
// held). Message boundaries past the cut go with it. Pure.
absl::StatusOr<std::optional<History>> StatedHistory(const History& committed, const v1::GenerateRequest& req);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_STATED_HISTORY_H_
