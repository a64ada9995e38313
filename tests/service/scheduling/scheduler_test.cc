// The scheduler on its own: jobs submitted directly (no gRPC), run on the
// built-in demo-transformer's real backend and a real checkpoint engine. A
// turnstile in front of the backend (GatedBackend) only counts and holds
// Forward calls, so that a test can line requests up; it computes nothing.
#include "service/scheduling/scheduler.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "backends/register_builtin.h"
#include "checkpoint/options.h"
#include "checkpoint/store.h"
#include "gtest/gtest.h"
#include "service/programs/demo_models.h"
#include "tests/service/scheduling/gated_backend.h"

namespace cairn::service {
namespace {

using std::chrono::milliseconds;
using testing::GatedBackend;
using testing::kPatience;

// A job and what its wake-ups delivered, taken as a caller takes them: at
// each wake-up, every event queued (and, when `acknowledge`, each token as
// if written at once).
struct Watched {
  std::shared_ptr<GenerateJob> job = std::make_shared<GenerateJob>();
  bool acknowledge = false;
  absl::Mutex mu;
  std::vector<GenerateEvent> events ABSL_GUARDED_BY(mu);
  int wakes ABSL_GUARDED_BY(mu) = 0;
  int aborts ABSL_GUARDED_BY(mu) = 0;

  void OnProgress() {
    absl::MutexLock lock(&mu);
    ++wakes;
    while (std::optional<GenerateEvent> e = job->TakeEvent()) {
      if (acknowledge && std::holds_alternative<TokenGenerated>(*e)) job->Acknowledge();
      events.push_back(std::move(*e));
    }
  }
  // Waits for the job's end through its wake-ups (never polls).
  bool AwaitDone() {
    absl::MutexLock lock(&mu);
    auto done = [this] { return job->done(); };
    return mu.AwaitWithTimeout(absl::Condition(&done), kPatience);
  }
  // Waits until the job has generated `n` tokens.
  bool AwaitStreamed(size_t n) {
    absl::MutexLock lock(&mu);
    auto streamed = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return job->done() || events.size() >= n + 1;  // PromptProcessed, then tokens
    };
    return mu.AwaitWithTimeout(absl::Condition(&streamed), kPatience);
  }
  int wake_count() {
    absl::MutexLock lock(&mu);
    return wakes;
  }
  std::vector<GenerateEvent> Events() {
    absl::MutexLock lock(&mu);
    return events;
  }
};

std::unique_ptr<Watched> NewWatched(std::vector<TokenId> prompt, int max_tokens) {
  auto w = std::make_unique<Watched>();
  for (TokenId t : prompt) w->job->prompt.AddToken(t);
  w->job->max_tokens = max_tokens;
  w->job->ignore_eos = true;
  w->job->stream_text = false;
  w->job->sampling.temperature = 0;
  Watched* p = w.get();
  w->job->on_progress = [p] { p->OnProgress(); };
  w->job->abort_stream = [p] {
    absl::MutexLock lock(&p->mu);
    ++p->aborts;
  };
  return w;
}

std::vector<TokenId> Prompt(int n, TokenId base = 300) {
  std::vector<TokenId> v;
  for (int i = 0; i < n; ++i) v.push_back(base + (i * 37) % 200);
  return v;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto demo = BuildDemoModel("demo-transformer");
    ASSERT_TRUE(demo.ok()) << demo.status();
    BackendRegistry families;
    ASSERT_TRUE(RegisterBuiltinBackends(families).ok());
    BackendOptions bo;
    bo.n_threads = 1;
    auto real = families.Create(demo->file, bo);
    ASSERT_TRUE(real.ok()) << real.status();
    backend_ = std::make_unique<GatedBackend>(std::move(*real));
    checkpoint::CheckpointOptions co;
    auto store = checkpoint::CheckpointStore::Create(co.store());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto engine = checkpoint::CheckpointEngine::Create(backend_.get(), store_, co);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }
  void TearDown() override {
    scheduler_.reset();
    watched_.clear();
    sequences_.clear();
  }

  Scheduler& Start(SchedulerOptions options = {}) {
    SchedulerModel model;
    model.name = "tiny";
    model.backend = backend_.get();
    model.engine = engine_.get();
    model.context_length = backend_->info().n_ctx_train;
    auto s = Scheduler::Create(model, options);
    EXPECT_TRUE(s.ok()) << s.status();
    scheduler_ = std::move(*s);
    return *scheduler_;
  }
  // A scheduler whose streams pause with `unacknowledged` tokens unwritten
  // and end after `stalled` without a write.
  Scheduler& StartWithBackpressure(int32_t unacknowledged, milliseconds stalled, SchedulerOptions options = {}) {
    options.max_unacknowledged_tokens = unacknowledged;
    options.stalled_stream = stalled;
    return Start(options);
  }
  checkpoint::Sequence* NewSequence() {
    auto s = engine_->NewSequence();
    EXPECT_TRUE(s.ok()) << s.status();
    sequences_.push_back(std::move(*s));
    return sequences_.back().get();
  }
  // A job to submit, watched until the scheduler is gone.
  Watched* Watch(std::vector<TokenId> prompt, int max_tokens) {
    watched_.push_back(NewWatched(std::move(prompt), max_tokens));
    return watched_.back().get();
  }
  // One request running but paused after its first token (nobody
  // acknowledges it; it keeps its place, as a stream stalled for less than a
  // second does) and, behind it, one waiting (a batch of one) until
  // `queued_deadline`.
  std::pair<Watched*, Watched*> RunningAndQueued(SchedulerOptions options,
                                                 Clock::time_point queued_deadline = Clock::time_point::max()) {
    options.max_batch = 1;
    StartWithBackpressure(1, milliseconds(600000), options);
    Watched* running = Watch(Prompt(4), 100);
    EXPECT_TRUE(scheduler_->Submit(running->job).ok());
    EXPECT_TRUE(running->AwaitStreamed(1));
    Watched* queued = Watch(Prompt(4, 330), 4);
    queued->job->deadline = queued_deadline;
    EXPECT_TRUE(scheduler_->Submit(queued->job).ok());
    return {running, queued};
  }
  // The tokens a job generates alone, on a fresh sequence.
  std::vector<TokenId> Alone(std::vector<TokenId> prompt, int max_tokens) {
    auto w = Watch(std::move(prompt), max_tokens);
    EXPECT_TRUE(scheduler_->Submit(w->job).ok());
    EXPECT_TRUE(w->AwaitDone());
    return w->job->streamed;
  }

  std::unique_ptr<GatedBackend> backend_;
  std::shared_ptr<checkpoint::CheckpointStore> store_;
  std::unique_ptr<checkpoint::CheckpointEngine> engine_;
  std::vector<std::unique_ptr<checkpoint::Sequence>> sequences_;  // before the engine goes
  std::vector<std::unique_ptr<Watched>> watched_;                 // their jobs' wake-ups go there
  std::unique_ptr<Scheduler> scheduler_;                          // first: ends every job
};

TEST_F(SchedulerTest, EventsComeInOrderEachWithAWakeUp) {
  Start();
  auto w = Watch(Prompt(6), 5);
  ASSERT_TRUE(scheduler_->Submit(w->job).ok());
  ASSERT_TRUE(w->AwaitDone());
  ASSERT_TRUE(w->job->status().ok()) << w->job->status();
  const std::vector<GenerateEvent> events = w->Events();
  ASSERT_EQ(events.size(), 7u);
  EXPECT_TRUE(std::holds_alternative<PromptProcessed>(events.front()));
  for (size_t i = 1; i <= 5; ++i) {
    ASSERT_TRUE(std::holds_alternative<TokenGenerated>(events[i]));
    EXPECT_EQ(std::get<TokenGenerated>(events[i]).token.id, w->job->streamed[i - 1]);
  }
  const auto& finished = std::get<GenerationFinished>(events.back());
  EXPECT_EQ(finished.reason, FinishReason::kLength);
  EXPECT_EQ(finished.completion_tokens, 5);
  EXPECT_EQ(finished.stats.prompt_symbols, 6u);
  // One wake-up per event, one when done: the caller never needs to look.
  EXPECT_EQ(w->wake_count(), 8);
  EXPECT_TRUE(w->job->prefilled);
  // Without a session the scheduler made the sequence, parked it in the
  // store and freed it before the job was done.
  EXPECT_EQ(engine_->LiveSequences(), 0u);
  EXPECT_GT(store_->stats().ram_entries, 0u);
}

TEST_F(SchedulerTest, ASessionsSequenceKeepsThePromptAndReplyForTheNextRequest) {
  Start();
  checkpoint::Sequence* seq = NewSequence();
  auto first = Watch(Prompt(6), 4);
  first->job->seq = seq;
  ASSERT_TRUE(scheduler_->Submit(first->job).ok());
  ASSERT_TRUE(first->AwaitDone());
  ASSERT_TRUE(first->job->status().ok());
  // The last token was sampled, not absorbed.
  EXPECT_EQ(seq->history().size(), 6u + 3u);
  std::vector<TokenId> next = Prompt(6);
  next.insert(next.end(), first->job->streamed.begin(), first->job->streamed.end());
  next.push_back(301);
  auto second = Watch(next, 2);
  second->job->seq = seq;
  ASSERT_TRUE(scheduler_->Submit(second->job).ok());
  ASSERT_TRUE(second->AwaitDone());
  EXPECT_EQ(second->job->stats.reused, 9);
  EXPECT_EQ(second->job->stats.recomputed, 2);
  EXPECT_EQ(engine_->LiveSequences(), 1u);  // the session's, still the caller's
}

TEST_F(SchedulerTest, ConcurrentRequestsShareForwardCallsAndMatchTheirSoloRuns) {
  Start();
  const std::vector<TokenId> b_alone = Alone(Prompt(5, 310), 8);
  backend_->Hold();
  auto a = Watch(Prompt(7), 8);
  ASSERT_TRUE(scheduler_->Submit(a->job).ok());
  backend_->AwaitEntered(1);  // a's prompt waits in Forward
  auto b = Watch(Prompt(5, 310), 8);
  auto c = Watch(Prompt(9, 320), 8);
  ASSERT_TRUE(scheduler_->Submit(b->job).ok());
  ASSERT_TRUE(scheduler_->Submit(c->job).ok());
  backend_->Release();
  ASSERT_TRUE(a->AwaitDone() && b->AwaitDone() && c->AwaitDone());
  EXPECT_GE(backend_->most_runs(), 2u);  // decode rows of several requests in one Forward
  EXPECT_EQ(b->job->streamed, b_alone);
}

// A Forward that fails is retried run by run: only the request whose run
// fails ends (with the backend's error); the decode row batched with it goes
// on as if it had run alone.
TEST_F(SchedulerTest, AFailingRunEndsOnlyItsRequest) {
  Start();
  const std::vector<TokenId> a_alone = Alone(Prompt(7), 8);
  backend_->FailPromptRunsStartingWith(350);
  backend_->Hold();
  const int calls_before = static_cast<int>(backend_->calls().size());
  auto a = Watch(Prompt(7), 8);
  ASSERT_TRUE(scheduler_->Submit(a->job).ok());
  backend_->AwaitEntered(calls_before + 1);  // a's prompt waits in Forward
  auto b = Watch(Prompt(5, 350), 8);
  ASSERT_TRUE(scheduler_->Submit(b->job).ok());
  backend_->Release();
  ASSERT_TRUE(a->AwaitDone() && b->AwaitDone());
  EXPECT_EQ(b->job->status().code(), absl::StatusCode::kInvalidArgument) << b->job->status();
  EXPECT_TRUE(b->job->streamed.empty());
  ASSERT_TRUE(a->job->status().ok()) << a->job->status();
  EXPECT_EQ(a->job->streamed, a_alone);
  // The failed call carried both: a's decode row and b's prompt run.
  bool batched = false;
  for (const std::vector<testing::RunShape>& call : backend_->calls()) {
    batched = batched || (call.size() == 2 && call[1] == testing::RunShape{350, 5});
  }
  EXPECT_TRUE(batched);
}

// The Forward calls from `from` on that carry a prompt run starting with
// `first` (the first token of a prompt's slice), by index.
std::vector<size_t> CallsWithRun(const std::vector<std::vector<testing::RunShape>>& calls, TokenId first,
                                 size_t from = 0) {
  std::vector<size_t> out;
  for (size_t i = from; i < calls.size(); ++i) {
    for (const testing::RunShape& run : calls[i]) {
      if (run.first == first && run.tokens > 1) out.push_back(i);
    }
  }
  return out;
}

TEST_F(SchedulerTest, AShortPromptGoesBeforeALongOneAdmittedEarlier) {
  SchedulerOptions o;
  o.step_tokens = 8;
  Start(o);
  backend_->Hold();
  auto lng = Watch(Prompt(40), 1);
  ASSERT_TRUE(scheduler_->Submit(lng->job).ok());
  backend_->AwaitEntered(1);  // the long prompt's first 8 tokens wait in Forward
  auto shrt = Watch(Prompt(5, 330), 1);
  ASSERT_TRUE(scheduler_->Submit(shrt->job).ok());
  backend_->Release();
  ASSERT_TRUE(lng->AwaitDone() && shrt->AwaitDone());
  ASSERT_TRUE(lng->job->status().ok() && shrt->job->status().ok());
  const auto calls = backend_->calls();
  ASSERT_GE(calls.size(), 2u);
  // The next step serves the short prompt whole first, then the long one
  // with what is left of the budget (first come first served would have
  // given the long one all 8 tokens).
  ASSERT_FALSE(calls[1].empty());
  EXPECT_EQ(calls[1][0], (testing::RunShape{330, 5}));
}

TEST_F(SchedulerTest, APromptLeftOutForLongGoesFirst) {
  SchedulerOptions o;
  o.step_tokens = 4;
  Start(o);
  backend_->Hold();
  const std::vector<TokenId> long_prompt = Prompt(12);
  auto lng = Watch(long_prompt, 1);
  ASSERT_TRUE(scheduler_->Submit(lng->job).ok());
  backend_->AwaitEntered(1);  // its first 4 tokens wait in Forward
  // Ten shorter prompts, each filling a step: served first, but not all of
  // them before the long one runs again.
  std::vector<Watched*> shorts;
  for (TokenId base = 301; base <= 310; ++base) {
    shorts.push_back(Watch(Prompt(4, base), 1));
    ASSERT_TRUE(scheduler_->Submit(shorts.back()->job).ok());
  }
  backend_->Release();
  ASSERT_TRUE(lng->AwaitDone());
  for (Watched* w : shorts) ASSERT_TRUE(w->AwaitDone());
  const auto calls = backend_->calls();
  const std::vector<size_t> long_runs = CallsWithRun(calls, long_prompt[4], 1);
  const std::vector<size_t> first_short = CallsWithRun(calls, 301, 1);
  const std::vector<size_t> last_short = CallsWithRun(calls, 310, 1);
  ASSERT_EQ(long_runs.size(), 1u);
  ASSERT_EQ(first_short.size(), 1u);
  ASSERT_EQ(last_short.size(), 1u);
  EXPECT_LT(first_short[0], long_runs[0]);  // shortest first ...
  EXPECT_LT(long_runs[0], last_short[0]);   // ... until the long one has waited enough
}

TEST_F(SchedulerTest, PromptChunksShrinkWhileOthersDecode) {
  SchedulerOptions o;
  o.step_tokens = 64;
  o.decode_step_tokens = 4;
  Start(o);
  backend_->Hold();
  auto decoding = Watch(Prompt(4), 30);
  decoding->acknowledge = true;
  ASSERT_TRUE(scheduler_->Submit(decoding->job).ok());
  backend_->AwaitEntered(1);  // its prompt waits in Forward; it decodes from the next step
  auto beside = Watch(Prompt(20, 340), 1);
  ASSERT_TRUE(scheduler_->Submit(beside->job).ok());
  backend_->Release();
  ASSERT_TRUE(beside->AwaitDone() && decoding->AwaitDone());
  ASSERT_TRUE(beside->job->status().ok() && decoding->job->status().ok());
  // Next to the decode row, the prompt went 4 tokens a step.
  size_t shared = 0;
  for (const auto& call : backend_->calls()) {
    if (call.size() < 2) continue;
    ++shared;
    EXPECT_EQ(call[0].tokens, 1u);
    EXPECT_LE(call[1].tokens, 4u);
  }
  EXPECT_GE(shared, 5u);
  // Alone, a prompt takes the whole step.
  const size_t before = backend_->calls().size();
  auto alone = Watch(Prompt(30, 360), 1);
  ASSERT_TRUE(scheduler_->Submit(alone->job).ok());
  ASSERT_TRUE(alone->AwaitDone());
  const auto calls = backend_->calls();
  ASSERT_GT(calls.size(), before);
  EXPECT_EQ(calls[before], (std::vector<testing::RunShape>{{360, 30}}));
}

TEST_F(SchedulerTest, BackpressurePausesAStreamThenAbortsItWhenStalled) {
  StartWithBackpressure(3, milliseconds(200));
  auto w = Watch(Prompt(4), 100);
  ASSERT_TRUE(scheduler_->Submit(w->job).ok());
  ASSERT_TRUE(w->AwaitDone());  // nobody acknowledges: paused, then stalled
  EXPECT_EQ(w->job->streamed.size(), 3u);
  EXPECT_TRUE(absl::IsCancelled(w->job->status())) << w->job->status();
  EXPECT_NE(w->job->status().message().find("stopped reading"), std::string::npos);
  EXPECT_EQ(w->job->stop_reason(), StopReason::kStalled);
  absl::MutexLock lock(&w->mu);
  EXPECT_EQ(w->aborts, 1);
}

TEST_F(SchedulerTest, AcknowledgedStreamsRunToTheEnd) {
  StartWithBackpressure(2, milliseconds(60000));
  auto w = Watch(Prompt(4), 12);
  w->acknowledge = true;  // each token written as it comes
  ASSERT_TRUE(scheduler_->Submit(w->job).ok());
  ASSERT_TRUE(w->AwaitDone());
  EXPECT_TRUE(w->job->status().ok()) << w->job->status();
  EXPECT_EQ(w->job->streamed.size(), 12u);
}

TEST_F(SchedulerTest, APausedRequestStopsAtItsDeadline) {
  StartWithBackpressure(2, milliseconds(600000));
  auto w = Watch(Prompt(4), 100);
  w->job->deadline = Clock::now() + milliseconds(3000);
  ASSERT_TRUE(scheduler_->Submit(w->job).ok());
  // Paused after two tokens, nothing else to run: the loop wakes for the
  // deadline itself.
  ASSERT_TRUE(w->AwaitDone());
  EXPECT_TRUE(absl::IsDeadlineExceeded(w->job->status())) << w->job->status();
  EXPECT_EQ(w->job->streamed.size(), 2u);
  EXPECT_TRUE(w->job->prefilled);
}

TEST_F(SchedulerTest, AQueuedRequestLeavesTheQueueAtItsDeadline) {
  auto [running, queued] = RunningAndQueued({}, Clock::now() + milliseconds(100));
  ASSERT_TRUE(queued->AwaitDone());
  EXPECT_TRUE(absl::IsDeadlineExceeded(queued->job->status())) << queued->job->status();
  EXPECT_FALSE(queued->job->prefilled);
  EXPECT_TRUE(queued->Events().empty());
  EXPECT_FALSE(running->job->done());
  running->job->RequestStop(StopReason::kCancelled);
  ASSERT_TRUE(running->AwaitDone());
  EXPECT_TRUE(absl::IsCancelled(running->job->status()));
}

TEST_F(SchedulerTest, AFullQueueRefusesAndLeavesTheJobUntouched) {
  SchedulerOptions options;
  options.max_queue = 1;
  RunningAndQueued(options);
  Watched* refused = Watch(Prompt(4, 340), 4);
  const absl::Status st = scheduler_->Submit(refused->job);
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_EQ(scheduler_->queue_depth(), 1u);
  EXPECT_FALSE(refused->job->done());
  EXPECT_EQ(refused->wake_count(), 0);
}

TEST_F(SchedulerTest, ShutdownEndsRunningAndQueuedRequests) {
  auto [running, queued] = RunningAndQueued({});
  scheduler_.reset();
  EXPECT_TRUE(running->job->done() && queued->job->done());
  EXPECT_TRUE(absl::IsUnavailable(running->job->status())) << running->job->status();
  EXPECT_TRUE(absl::IsUnavailable(queued->job->status())) << queued->job->status();
  EXPECT_EQ(engine_->LiveSequences(), 0u);
}

}  // namespace
}  // namespace cairn::service
