// The per-model scheduler: continuous batching of every running sequence,
// and every engine call of a generation.
//
// One thread per model runs steps. Each step is ONE Backend::Forward over
// the next token of every decoding sequence plus prompt runs of the
// sequences still processing their prompt, within a per-step token budget
// (SchedulerOptions::step_tokens), so concurrent requests share the weight
// reads and a long prompt never stalls decoding for more than a step.
// Prompt reuse (cuts, restores, shared prefixes) is the checkpoint engine's:
// CheckpointEngine::StartPrefill applies it when a request is admitted and
// its PrefillJob hands out the remaining runs (and captures checkpoints as
// they are absorbed). A request whose prompt shares a prefix with a prompt
// still being computed, which nothing cached covers, waits (holding a batch
// place) until that prefix is computed and checkpointed once, then starts
// from it (shared_prefix.h, SchedulerOptions::min_shared_prefix).
//
// A request's engine calls are all made here, on the scheduler's thread, in
// order: NewSequence (a request without a session), StartPrefill, the
// prompt runs (PrefillJob::Absorbed) and decode rows (SequenceHold), then
// EndGeneration and Park (a request without a session, whose sequence is
// then freed). The caller only reads the job's events and, once it is done,
// its summary (generate_job.h).
//
// Fairness between prompts: each step serves the prompt with the fewest
// symbols left first (so a late short prompt does not wait behind a long
// early one), except that a prompt left out of kPromptPatience steps in a
// row goes first (so a stream of short prompts never starves a long one).
// While sequences decode, prompts get at most decode_step_tokens a step.
//
// Cancellation and deadlines: the request's stop flag and its deadline are
// checked before every step (and the loop wakes for the next deadline), so
// a request stops within one step. What the session holds afterwards is
// documented in inference.proto (GenerateRequest.session_id).
//
// Backpressure: a request whose stream has max_unacknowledged_tokens token
// deltas generated but not yet written (GenerateJob::Acknowledge counts the
// writes gRPC completed) is paused: it leaves the step's batch (the others
// go on) until a write completes. Paused without a completed write for
// stalled_stream, it is stopped (StopReason::kStalled, CANCELLED) and its
// stream aborted. So a client that stops reading holds at most that many
// tokens here, beyond what gRPC's flow-control window took.
#ifndef CAIRN_SERVICE_SCHEDULING_SCHEDULER_H_
#define CAIRN_SERVICE_SCHEDULING_SCHEDULER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/model/tokenizer.h"
#include "checkpoint/engine.h"
#include "service/scheduling/generate_job.h"
#include "service/scheduling/scheduler_metrics.h"
#include "service/scheduling/shared_prefix.h"

namespace cairn::service {

struct SchedulerOptions {
  // Sequences prefilling or decoding at once (streams paused for a second
  // or more aside); others wait.
  int32_t max_batch = 64;
  // Tokens per step (one Forward): every decoding sequence's next token
  // plus prompt runs up to this budget (at least one prompt run per step).
  int32_t step_tokens = 512;
  // Prompt tokens per step while sequences decode: their next tokens wait
  // for the whole Forward, so a smaller prompt share keeps them coming
  // (shorter stalls between tokens), at the cost of slower prompts (later
  // first tokens); with nothing decoding, prompts take the whole
  // step_tokens. 0: no cap (bench/serving.py measured no gain in
  // completion tokens/s from 128, and a later first token).
  int32_t decode_step_tokens = 0;
  int32_t max_queue = 256;  // admitted requests waiting; beyond: RESOURCE_EXHAUSTED
  // Backpressure (see above): a stream with this many token deltas not yet
  // written pauses; paused this long without a completed write, it ends.
  int32_t max_unacknowledged_tokens = 32;
  std::chrono::milliseconds stalled_stream{30000};
  const SchedulerMetrics* metrics = nullptr;  // borrowed; null: none
  // A request sharing at least this many prompt positions with a prompt
  // being processed, beyond what is computed, waits for that prefix to be
  // computed once (shared_prefix.h). 0: never waits.
  int32_t min_shared_prefix = 32;
  // Tests only: a reply forced through the real path. When set and it
  // returns an id for a request's `n`th generated token (from 0), that id
  // replaces the sampler's draw (the forward pass runs as always). Called on
  // the scheduler's thread.
  std::function<std::optional<TokenId>(const GenerateJob& job, int32_t n)> forced_token;
};

// What the scheduler runs one model with. Borrowed: the owner (a served
// model) keeps them alive and stops the scheduler before they go. The
// scheduler knows nothing else of the model, so it does not depend on
// the host's models.h (which owns the scheduler).
struct SchedulerModel {
  std::string name;                                // for error messages
  Backend* backend = nullptr;                      // Forward of every step
  checkpoint::CheckpointEngine* engine = nullptr;  // every engine call of a request
  const Tokenizer* tokenizer = nullptr;            // null: token ids only
  Pos context_length = 0;                          // most positions a sequence may hold
};

class Scheduler final {
 public:
  // INVALID_ARGUMENT without a backend and an engine, or with a
  // non-positive max_batch or max_queue.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerModel& model,
                                                           const SchedulerOptions& options);
  // Stops the thread; jobs not finished end with UNAVAILABLE.
  ~Scheduler();

  // Admits a job. RESOURCE_EXHAUSTED when the queue is full; the job is
  // then untouched. Thread-safe.
  absl::Status Submit(std::shared_ptr<GenerateJob> job) ABSL_LOCKS_EXCLUDED(mu_);

  size_t queue_depth() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t running() const ABSL_LOCKS_EXCLUDED(mu_);
  // Decoding requests paused by backpressure (as of the last step).
  size_t paused() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Running;
  struct Prefilling;
  struct StepBatch;
  Scheduler(const SchedulerModel& model, const SchedulerOptions& options);
  // The loop thread, one step per turn (see the steps below).
  void Loop();
  // Waits for work and moves queued jobs into the batch's free places;
  // takes the queued jobs past their deadline out. False when stopping.
  bool WaitAndAdmit(std::vector<std::shared_ptr<GenerateJob>>* admitted,
                    std::vector<std::shared_ptr<GenerateJob>>* expired) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the requests asked to stop or past their deadline (and, decoding,
  // the stalled ones).
  void RetireStoppedPrompts(Clock::time_point now);
  void RetireStoppedDecodes(Clock::time_point now);
  // The step's runs: a token per decoding stream not paused, then prompt
  // runs within the token budget, in PromptOrder.
  StepBatch BuildBatch(Clock::time_point now);
  // The prompts being processed in the order they are served (see
  // "Fairness between prompts" above).
  std::vector<Prefilling*> PromptOrder() const;
  // One Forward over the batch; on failure, each run alone.
  void RunBatch(StepBatch& batch);
  // Absorb the results: decode rows sample their next token, prompt runs
  // advance and a finished prompt joins the decoding set.
  void FinishDecodeRows(StepBatch& batch);
  void FinishPromptRuns(StepBatch& batch);
  // Counts for other threads (running(), paused()) and the metrics.
  void PublishCounts() ABSL_LOCKS_EXCLUDED(mu_);
  // Shutting down: ends what is in flight with UNAVAILABLE.
  void EndInFlight();
  // Admits a job: its sequence (a fresh one without a session), then the
  // engine applies the best reuse; the rest of the prompt joins the next
  // steps.
  void StartPrompt(std::shared_ptr<GenerateJob> job);
  // Holds `job` back while another prompt computes a prefix they share
  // (shared_prefix.h); true when held. The prompts being processed, as
  // SharedPrefixWaits sees them.
  bool HoldForSharedPrefix(const std::shared_ptr<GenerateJob>& job, const checkpoint::Prompt& prompt);
  std::vector<PrefixLeader> PrefixLeaders() const;
  // A prompt ended (result or error): stream PromptInfo and the first token.
  void PromptDone(std::unique_ptr<Prefilling> p, absl::StatusOr<checkpoint::PrefillResult> res);
  // Samples from `logits` and streams the token; true when the job is over
  // (then it has been finished).
  bool Step(Running& r, std::span<const float> logits);
  // The request is over: the final event when `status` is OK, the engine's
  // end of generation (or the park and release of a fresh sequence), then
  // the job finished with `status`.
  void Complete(Running& r, absl::Status status);
  void Retire(Running& r, absl::Status status);
  // A job that ends before it ran (stopped in the queue, or refused).
  void EndUnstarted(GenerateJob& job, absl::Status status);
  // Backpressure: whether `r` waits for its stream's writes; stops it (and
  // returns true) once it has waited stalled_stream without progress.
  bool Paused(Running& r, Clock::time_point now) const;
  bool Stalled(Running& r, Clock::time_point now);
  // Asks a request past its deadline to stop; true when it is stopping.
  // Not under mu_ (a stop wakes the loop through it).
  static bool Stopping(GenerateJob& job, Clock::time_point now);
  // Whether the loop has something to run now, and when it must look again
  // (the next deadline, or a paused stream's stall) otherwise (under mu_).
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Clock::time_point NextWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decoding requests waiting for their writes (loop thread); of them, the
  // ones waiting for a second or more without progress.
  size_t CountPaused() const;
  size_t CountIdle(Clock::time_point now) const;
  absl::Status StopStatus(const GenerateJob& job) const;

  const SchedulerModel model_;
  const SchedulerOptions options_;

  // The loop awaits HasWork() on mu_: any thread changing what HasWork
  // reads (including the jobs' atomics, see Submit's wake_scheduler)
  // releases mu_ afterwards so that the loop re-evaluates it.
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<GenerateJob>> queue_ ABSL_GUARDED_BY(mu_);
  size_t n_decoding_ ABSL_GUARDED_BY(mu_) = 0;  // decoding_.size() for other threads
  size_t n_paused_ ABSL_GUARDED_BY(mu_) = 0;

  // Owned by the loop thread (HasWork reads them under mu_ on that thread).
  struct Prefilling {
    std::unique_ptr<Running> r;
    std::unique_ptr<checkpoint::PrefillJob> job;
    absl::Status error;
    int32_t left_out = 0;  // steps in a row without a run (PromptOrder)
  };
  std::vector<std::unique_ptr<Prefilling>> prefilling_;
  std::vector<std::unique_ptr<Running>> decoding_;
  SharedPrefixWaits shared_prefix_waits_{options_.min_shared_prefix};
  // One step's Forward: decode rows first (each under a hold on its
  // sequence), then prompt runs; out[i] is runs[i]'s result.
  struct StepBatch {
    std::vector<SequenceRun> runs;
    std::vector<checkpoint::SequenceHold> holds;  // one per decode row
    std::vector<Running*> stepping;               // the decode rows' requests
    std::vector<Prefilling*> prompt_runs;
    std::vector<absl::StatusOr<RunLogits>> out;
  };

  std::thread thread_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_SCHEDULER_H_
