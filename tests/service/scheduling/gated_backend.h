// A turnstile in front of a real backend for the scheduler's tests: it only
// counts and holds Forward calls, so that a test can line requests up, and
// fails the calls that carry a chosen prompt run; it computes nothing itself.
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

// One run of a Forward call as a test sees it: its first token (prompts
// of different bases tell requests apart) and how many tokens it carried.
struct RunShape {
  TokenId first = -1;  // -1: a chunk of embeddings
  size_t tokens = 0;
  bool operator==(const RunShape&) const = default;
};

// Forwards to the real backend; counts calls and the most runs one call
// held, records each call's runs, and while held (Hold) lets a call enter
// but not proceed.
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
      std::vector<RunShape>& call = calls_.emplace_back();
      for (const SequenceRun& run : batch) {
        call.push_back(run.chunk != nullptr ? RunShape{-1, static_cast<size_t>(run.chunk->n_rows())}
                                            : RunShape{run.tokens.empty() ? -1 : run.tokens[0], run.tokens.size()});
      }
      auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !held_; };
      mu_.Await(absl::Condition(&open));
      for (const SequenceRun& run : batch) {
        if (run.tokens.size() > 1 && run.tokens[0] == fail_first_) {
          return absl::InvalidArgumentError("a prompt run the test refuses");
        }
      }
    }
    return real_->Forward(batch);
  }
  // From now on a call carrying a prompt run (more than one token) that
  // starts with `first` fails as a whole, before anything is computed.
  void FailPromptRunsStartingWith(TokenId first) {
    absl::MutexLock lock(&mu_);
    fail_first_ = first;
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
  // Every call's runs so far, in call order (decode rows first in each).
  std::vector<std::vector<RunShape>> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  std::unique_ptr<Backend> real_;
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  TokenId fail_first_ ABSL_GUARDED_BY(mu_) = -1;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t most_runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<RunShape>> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::service::testing

#endif  // CAIRN_TESTS_SERVICE_SCHEDULING_GATED_BACKEND_H_
