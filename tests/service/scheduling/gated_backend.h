// A turnstile in front of a real backend for the scheduler's tests: it only
// counts and holds Forward calls, so that a test can line requests up; it
// computes nothing itself.
#ifndef CAIRN_TESTS_SERVICE_SCHEDULING_GATED_BACKEND_H_
#define CAIRN_TESTS_SERVICE_SCHEDULING_GATED_BACKEND_H_

#include <algorithm>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "gtest/gtest.h"

namespace cairn::service::testing {

inline constexpr absl::Duration kPatience = absl::Seconds(60);  // a loaded machine is slow, not stuck

// Forwards to the real backend; counts calls and the most runs one call
// held, and while held (Hold) lets a call enter but not proceed.
class GatedBackend final : public Backend {
 public:
  explicit GatedBackend(std::unique_ptr<Backend> real) : real_(std::move(real)) {}
  const ModelInfo& info() const override { return real_->info(); }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override { return real_->NewSequence(); }
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override {
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      most_runs_ = std::max(most_runs_, batch.size());
      auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !held_; };
      mu_.Await(absl::Condition(&open));
    }
    return real_->Forward(batch);
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  // Waits until `n` calls have entered.
  void AwaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto entered = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&entered), kPatience));
  }
  size_t most_runs() const {
    absl::MutexLock lock(&mu_);
    return most_runs_;
  }

 private:
  std::unique_ptr<Backend> real_;
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t most_runs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::service::testing

#endif  // CAIRN_TESTS_SERVICE_SCHEDULING_GATED_BACKEND_H_
