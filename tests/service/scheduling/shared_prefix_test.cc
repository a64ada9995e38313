// Requests arriving together with a shared unmarked prefix (a system prompt
// sent as plain tokens) compute it once: the later ones wait for the first to
// compute it and restore its checkpoint (shared_prefix.h). Run through the
// real scheduler and checkpoint engine on the golden models of every family;
// a turnstile in front of the backend (GatedBackend) only lines the requests
// up.
#include "service/scheduling/shared_prefix.h"

#include <memory>
#include <random>
#include <utility>
#include <variant>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "checkpoint/options.h"
#include "checkpoint/store.h"
#include "gtest/gtest.h"
#include "service/scheduling/scheduler.h"
#include "tests/checkpoint/engine_testing.h"
#include "tests/service/scheduling/gated_backend.h"

namespace cairn::service {
namespace {

using testing::GatedBackend;
using testing::kPatience;

// A greedy request and the logprobs of its tokens, collected at each wake-up.
struct Request {
  std::shared_ptr<GenerateJob> job = std::make_shared<GenerateJob>();
  absl::Mutex mu;
  std::vector<float> logprobs ABSL_GUARDED_BY(mu);

  Request(const std::vector<TokenId>& prompt, int max_tokens) {
    for (TokenId t : prompt) job->prompt.AddToken(t);
    job->max_tokens = max_tokens;
    job->ignore_eos = true;
    job->stream_text = false;
    job->sampling.temperature = 0;
    job->sampling.logprobs = true;
    job->on_progress = [this] {
      absl::MutexLock lock(&mu);
      while (std::optional<GenerateEvent> e = job->TakeEvent()) {
        if (auto* t = std::get_if<TokenGenerated>(&*e)) logprobs.push_back(t->token.logprob);
      }
    };
  }
  bool AwaitDone() {
    absl::MutexLock lock(&mu);
    auto done = [this] { return job->done(); };
    return mu.AwaitWithTimeout(absl::Condition(&done), kPatience);
  }
};

struct Family {
  const char* model;
  double tolerance;  // on a token's logprob against the reference's
};

class SharedPrefixTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED(GetParam().model);
    auto backend = checkpoint::testing::LoadBackend(GetParam().model);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::make_unique<GatedBackend>(std::move(*backend));
    std::mt19937 rng(7);
    const int vocab = backend_->info().n_vocab;
    auto token = [&] { return 3 + static_cast<TokenId>(rng() % (vocab - 3)); };
    for (int i = 0; i < kShared; ++i) shared_.push_back(token());
    for (int suffix : {20, 9, 33}) {
      prompts_.push_back(shared_);
      for (int i = 0; i < suffix; ++i) prompts_.back().push_back(token());
    }
  }

  // A scheduler over a fresh engine; small steps so that the first prompt
  // is still being computed when the others are admitted.
  std::unique_ptr<Scheduler> Start(const checkpoint::CheckpointOptions& co, int32_t min_shared_prefix) {
    if (co.enabled) {
      auto store = checkpoint::CheckpointStore::Create(co.store());
      EXPECT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
    }
    auto engine = checkpoint::CheckpointEngine::Create(backend_.get(), co.enabled ? store_ : nullptr, co);
    EXPECT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    SchedulerModel model;
    model.name = "shared";
    model.backend = backend_.get();
    model.engine = engine_.get();
    model.context_length = backend_->info().n_ctx_train;
    SchedulerOptions so;
    so.step_tokens = 16;
    so.min_shared_prefix = min_shared_prefix;
    auto s = Scheduler::Create(model, so);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  // Runs prompts_ at once: the first is admitted and its first Forward
  // entered before the others are submitted.
  std::vector<std::unique_ptr<Request>> RunTogether(Scheduler& s) {
    std::vector<std::unique_ptr<Request>> reqs;
    for (const auto& p : prompts_) reqs.push_back(std::make_unique<Request>(p, kReply));
    backend_->Hold();
    EXPECT_TRUE(s.Submit(reqs[0]->job).ok());
    backend_->AwaitEntered(1);
    for (size_t i = 1; i < reqs.size(); ++i) EXPECT_TRUE(s.Submit(reqs[i]->job).ok());
    backend_->Release();
    for (auto& r : reqs) EXPECT_TRUE(r->AwaitDone());
    return reqs;
  }

  // What each prompt computes alone without any cache: the reference.
  void ExpectFreshReplies(const std::vector<std::unique_ptr<Request>>& reqs) {
    checkpoint::CheckpointOptions off;
    off.enabled = false;
    std::unique_ptr<Scheduler> fresh = Start(off, 0);
    for (size_t i = 0; i < reqs.size(); ++i) {
      Request alone(prompts_[i], kReply);
      ASSERT_TRUE(fresh->Submit(alone.job).ok());
      ASSERT_TRUE(alone.AwaitDone());
      EXPECT_EQ(reqs[i]->job->streamed, alone.job->streamed) << "prompt " << i;
      absl::MutexLock a(&alone.mu), b(&reqs[i]->mu);
      ASSERT_EQ(reqs[i]->logprobs.size(), alone.logprobs.size());
      for (size_t k = 0; k < alone.logprobs.size(); ++k) {
        EXPECT_NEAR(reqs[i]->logprobs[k], alone.logprobs[k], GetParam().tolerance) << "prompt " << i << " token " << k;
      }
    }
  }

  static constexpr int kShared = 96;
  static constexpr int kReply = 6;
  std::unique_ptr<GatedBackend> backend_;
  std::shared_ptr<checkpoint::CheckpointStore> store_;
  std::unique_ptr<checkpoint::CheckpointEngine> engine_;
  std::vector<TokenId> shared_;
  std::vector<std::vector<TokenId>> prompts_;
};

TEST_P(SharedPrefixTest, ComputedOnceWhenUsersArriveTogether) {
  std::unique_ptr<Scheduler> s = Start(checkpoint::CheckpointOptions{}, 32);
  std::vector<std::unique_ptr<Request>> reqs = RunTogether(*s);
  Pos recomputed = 0, minimum = kShared;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(reqs[i]->job->status().ok()) << reqs[i]->job->status();
    recomputed += reqs[i]->job->stats.recomputed;
    minimum += static_cast<Pos>(prompts_[i].size()) - kShared;
    if (i > 0) {
      EXPECT_EQ(reqs[i]->job->stats.reused, kShared) << "prompt " << i;
    }
  }
  EXPECT_EQ(recomputed, minimum);
  s.reset();
  ExpectFreshReplies(reqs);
}

// The baseline the test above must beat: without waiting, the prompts
// admitted while the first is still computing compute the prefix again.
TEST_P(SharedPrefixTest, ComputedPerUserWithoutWaiting) {
  std::unique_ptr<Scheduler> s = Start(checkpoint::CheckpointOptions{}, 0);
  std::vector<std::unique_ptr<Request>> reqs = RunTogether(*s);
  Pos recomputed = 0;
  for (auto& r : reqs) recomputed += r->job->stats.recomputed;
  EXPECT_GT(recomputed, 2 * kShared);
  s.reset();
  ExpectFreshReplies(reqs);
}

// A prefix shorter than the minimum is not worth a wait: each computes it.
TEST_P(SharedPrefixTest, ShortPrefixesDoNotWait) {
  std::unique_ptr<Scheduler> s = Start(checkpoint::CheckpointOptions{}, kShared + 1);
  std::vector<std::unique_ptr<Request>> reqs = RunTogether(*s);
  for (size_t i = 1; i < reqs.size(); ++i) EXPECT_LT(reqs[i]->job->stats.reused, kShared) << "prompt " << i;
}

const Family kFamilies[] = {
    {"golden/models/mamba2.gguf", 1e-3},        {"golden/models/qwen35.gguf", 1e-3},
    {"golden/models/granitehybrid.gguf", 1e-3}, {"golden/models/gemma3.gguf", 2e-2},
    {"golden/models/llama.gguf", 1e-3},
};

INSTANTIATE_TEST_SUITE_P(Families, SharedPrefixTest, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           std::string s = info.param.model;
                           s = s.substr(s.rfind('/') + 1);
                           return s.substr(0, s.rfind('.'));
                         });

}  // namespace
}  // namespace cairn::service
