#include "service/http/http_sink.h"

#include <utility>

namespace cairn::service::http {

absl::StatusOr<Caller> HttpSink::Authenticate(const Authenticator& auth) const {
  absl::StatusOr<Caller> caller = authorization_.has_value() ? auth.Authenticate(std::string_view(*authorization_))
                                                             : auth.Authenticate(std::nullopt);
  // A session still finishing a stopped request is waited for until the
  // deadline, as for a gRPC call (none: until it ends, within a step).
  if (caller.ok()) {
    caller->wait_until = deadline_ == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture()
                                                                                   : absl::FromChrono(deadline_);
  }
  return caller;
}

void HttpSink::Write(const v1::GenerateResponse* message) {
  std::shared_ptr<GenerateStream> unread;
  {
    absl::MutexLock lock(&mu_);
    if (!detached_) {
      message_ = *message;
      return;
    }
    unread = detached_from_;
  }
  if (unread != nullptr) unread->WriteDone(false);
}

void HttpSink::Detach(const std::shared_ptr<GenerateStream>& call) {
  bool pending;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;  // nothing left to stop
    detached_ = true;
    detached_from_ = call;
    pending = message_.has_value();
    message_.reset();
  }
  if (pending) call->WriteDone(false);
  call->Cancel();
}

void HttpSink::Finish(const absl::Status& status, const v1::GenerateResponse* final) {
  std::shared_ptr<GenerateStream> done;  // dropped after the lock: the call runs this
  absl::MutexLock lock(&mu_);
  finished_ = true;
  status_ = status;
  if (final != nullptr) final_ = *final;
  done = std::move(detached_from_);
}

void HttpSink::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
}

bool HttpSink::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

HttpSink::Next HttpSink::Take(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return message_.has_value() || (finished_ && !end_taken_); };
  Next next;
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return next;
  if (message_.has_value()) {
    next.kind = Next::kMessage;
    next.message = std::move(*message_);
    message_.reset();
    return next;
  }
  end_taken_ = true;
  next.kind = Next::kEnd;
  next.status = status_;
  if (final_.has_value()) {
    next.has_final = true;
    next.message = std::move(*final_);
  }
  return next;
}

}  // namespace cairn::service::http
