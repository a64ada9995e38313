#include "service/scheduling/fair_backend.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cairn::service {
namespace {

class FairBackend final : public Backend {
 public:
  explicit FairBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  const ModelInfo& info() const override { return inner_->info(); }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override { return inner_->NewSequence(); }
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override {
    {
      absl::MutexLock lock(&mu_);
      const uint64_t ticket = next_++;
      auto my_turn = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return serving_ == ticket; };
      mu_.Await(absl::Condition(&my_turn));
    }
    absl::StatusOr<std::vector<RunLogits>> out = inner_->Forward(batch);
    absl::MutexLock lock(&mu_);
    ++serving_;
    return out;
  }

 private:
  std::unique_ptr<Backend> inner_;
  absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeFairBackend(std::unique_ptr<Backend> inner) {
  return std::make_unique<FairBackend>(std::move(inner));
}

}  // namespace cairn::service
