// The HTTP door's transport of one Generate call (service/api/
// generate_sink.h): the call writes into it, the connection's thread takes
// each message out, sends what it makes, and reports the write back, so the
// scheduler's backpressure holds for HTTP clients as for gRPC ones.
#ifndef CAIRN_SERVICE_HTTP_HTTP_SINK_H_
#define CAIRN_SERVICE_HTTP_HTTP_SINK_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/api/generate_sink.h"

namespace cairn::service::http {

// Thread-safe: the call's threads write, one connection thread reads.
class HttpSink final : public GenerateSink {
 public:
  // `method`: the route, for the access log and metrics; `authorization`:
  // the request's Authorization header (nullopt: none); `request`: what the
  // call runs (owned here, so it lives as long as the call); `deadline`:
  // the request's, as a gRPC call's (time_point::max(): none).
  HttpSink(std::string method, std::optional<std::string> authorization, v1::GenerateRequest request,
           std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max())
      : method_(std::move(method)),
        authorization_(std::move(authorization)),
        request_(std::move(request)),
        deadline_(deadline) {}

  const v1::GenerateRequest& request() const { return request_; }

  // GenerateSink.
  std::string_view Method() const override { return method_; }
  absl::StatusOr<Caller> Authenticate(const Authenticator& auth) const override;
  std::chrono::system_clock::time_point Deadline() const override { return deadline_; }
  void Write(const v1::GenerateResponse* message) override ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(const absl::Status& status, const v1::GenerateResponse* final) override ABSL_LOCKS_EXCLUDED(mu_);
  void Abort() override ABSL_LOCKS_EXCLUDED(mu_);

  // What the connection's thread takes next.
  struct Next {
    enum Kind { kNothingYet, kMessage, kEnd } kind = kNothingYet;
    v1::GenerateResponse message;  // kMessage: the write to report with WriteDone; kEnd: the final one, if any
    bool has_final = false;
    absl::Status status;  // kEnd
  };
  // Waits up to `timeout` for the next message or the end. After a
  // kMessage the caller reports GenerateStream::WriteDone before the call
  // writes again; kEnd comes once and last.
  Next Take(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // The scheduler gave up on this client (Abort).
  bool aborted() const ABSL_LOCKS_EXCLUDED(mu_);
  // The connection stops reading (its client went away, or the server
  // stops): `call` is cancelled, and its writes from now on are reported
  // failed at once, so that it ends (settling its session) with no reader.
  void Detach(const std::shared_ptr<GenerateStream>& call) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string method_;
  const std::optional<std::string> authorization_;
  const v1::GenerateRequest request_;
  const std::chrono::system_clock::time_point deadline_;

  mutable absl::Mutex mu_;
  std::optional<v1::GenerateResponse> message_ ABSL_GUARDED_BY(mu_);  // written, not yet taken
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool end_taken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::GenerateResponse> final_ ABSL_GUARDED_BY(mu_);
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  // Set by Detach: the call, held (as a transport holds its call) until
  // Finish, since no reader holds it any more.
  std::shared_ptr<GenerateStream> detached_from_ ABSL_GUARDED_BY(mu_);
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_HTTP_SINK_H_
