// The transport of one Generate call, seen from the call: where its stream
// messages and its status go. The call (generate_call.h) owns every step of
// a request (validation, prompt, session, budget, scheduler, reply parsing,
// access log, metrics); a transport only carries it. gRPC's reactor is one
// transport, the OpenAI-compatible HTTP door (service/http/) another, so
// both serve the same Generate path.
#ifndef CAIRN_SERVICE_API_GENERATE_SINK_H_
#define CAIRN_SERVICE_API_GENERATE_SINK_H_

#include <chrono>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"
#include "service/api/auth.h"
#include "service/sessions/caller.h"

namespace cairn::service {

// Implemented by a transport; called by the call on its worker and
// transport threads, never two methods at once, except Abort (any thread).
class GenerateSink {
 public:
  virtual ~GenerateSink() = default;

  // The method label of the access log and metrics ("Generate" for gRPC).
  virtual std::string_view Method() const = 0;
  // The caller by the transport's credentials (UNAUTHENTICATED without a
  // valid token), its wait_until the call's deadline.
  virtual absl::StatusOr<Caller> Authenticate(const Authenticator& auth) const = 0;
  // When the client gives up (time_point::max(): never).
  virtual std::chrono::system_clock::time_point Deadline() const = 0;
  // Sends one stream message; `message` stays valid, and no other Write
  // comes, until the transport calls GenerateStream::WriteDone.
  virtual void Write(const v1::GenerateResponse* message) = 0;
  // The end, once: `final` (null: none; valid until the transport is done)
  // then `status`. No Write follows.
  virtual void Finish(const absl::Status& status, const v1::GenerateResponse* final) = 0;
  // The scheduler gave up on a stalled reader: break the stream (the
  // transport then reports WriteDone(false) or Cancel).
  virtual void Abort() = 0;
};

// The call, seen from its transport. Thread-safe.
class GenerateStream {
 public:
  virtual ~GenerateStream() = default;
  // The Write in flight completed; `ok` false: the client is gone.
  virtual void WriteDone(bool ok) = 0;
  // The client cancelled or went away: the job stops, the turn changes no
  // session, and the call ends (Finish) with CANCELLED.
  virtual void Cancel() = 0;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_GENERATE_SINK_H_
