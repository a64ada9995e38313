#include "service/scheduling/generate_job.h"

#include <utility>

namespace cairn::service {

void GenerateJob::RequestStop(StopReason reason) {
  int expected = 0;
  stop_.compare_exchange_strong(expected, static_cast<int>(reason));
  // The scheduler awaits its work on its own mutex: a stop is work.
  if (wake_scheduler) wake_scheduler();
}

void GenerateJob::Acknowledge() {
  acknowledged_.fetch_add(1);
  if (wake_scheduler) wake_scheduler();
}

std::optional<GenerateEvent> GenerateJob::TakeEvent() {
  absl::MutexLock lock(&mu_);
  if (events_.empty()) return std::nullopt;
  GenerateEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

bool GenerateJob::done() const {
  absl::MutexLock lock(&mu_);
  return done_ && events_.empty();
}

absl::Status GenerateJob::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void GenerateJob::Emit(GenerateEvent event) {
  {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  Wake();
}

void GenerateJob::Finish(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
  }
  Wake();
}

}  // namespace cairn::service
