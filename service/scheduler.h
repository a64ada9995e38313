// The per-model scheduler: continuous batching of every running sequence.
//
// Two threads per model:
// - the prefill thread takes admitted requests in order and brings each
//   sequence to its prompt through CheckpointEngine::Prefill (which finds
//   the best reuse, restores, and computes the rest in chunks of at most
//   --prefill-chunk tokens);
// - the decode thread runs steps: each step is ONE Backend::Forward over the
//   next token of every running sequence, so concurrent requests share the
//   weight reads.
// Both reach the backend through a FIFO turnstile (FairBackend in
// scheduler.cc): a decode step waits for at most one prompt chunk and a long
// prompt never starves decoding, so the per-step token budget is
// (running sequences + one prompt chunk). Prompt chunks are not fused into
// the decode step's Forward because prompt reuse (restores, cuts, shared
// prefixes) belongs to the checkpoint engine, which runs its own Forward.
//
// Cancellation and deadlines: the request's stop flag is checked by the
// prefill engine between chunks and by the decode thread before each step,
// so a request stops within one step. What the session holds afterwards is
// documented in inference.proto (GenerateRequest.session_id).
#ifndef CAIRN_SERVICE_SCHEDULER_H_
#define CAIRN_SERVICE_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "cairn/v1/inference.pb.h"
#include "checkpoint/engine.h"
#include "service/history.h"
#include "service/sampler.h"

namespace cairn::service {

class Metrics;
struct ServedModel;

using Clock = std::chrono::steady_clock;

enum class StopReason : int { kNone = 0, kCancelled = 1, kDeadline = 2, kShutdown = 3 };

// One Generate request as the scheduler runs it. Fields under "input" are
// set before Submit and read-only afterwards; "output" is written by the
// scheduler and read by the RPC handler through the event queue; the
// summary fields are valid once done() is true.
struct GenerateJob {
  // --- input
  ServedModel* model = nullptr;
  checkpoint::Sequence* seq = nullptr;  // exclusively the job's while it runs
  History prompt;                       // the whole prompt (owns chunk rows)
  SamplingConfig sampling;
  int32_t max_tokens = 256;
  std::vector<TokenId> stop_tokens;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  bool stream_text = true;
  std::string session_id;
  Clock::time_point received = Clock::now();

  // --- control (any thread)
  // Asks the request to stop; the first reason wins.
  void RequestStop(StopReason reason);
  StopReason stop_reason() const { return static_cast<StopReason>(stop_.load()); }

  // --- output (handler thread)
  // Waits up to `timeout` for events; returns them (possibly none).
  std::vector<v1::GenerateResponse> WaitEvents(std::chrono::milliseconds timeout);
  bool done() const;
  absl::Status status() const;  // valid when done()

  // --- summary (valid when done)
  bool prefilled = false;          // the prompt was fully processed
  std::vector<TokenId> streamed;   // ids of every TokenDelta sent
  checkpoint::PrefillStats stats;

  // --- scheduler internals
  void Emit(v1::GenerateResponse event);
  void Finish(absl::Status status);
  std::atomic<bool> cancel_flag{false};  // PrefillControl::cancel
  std::atomic<int> stop_{0};

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::GenerateResponse> events_;
  bool done_ = false;
  absl::Status status_;
};

struct SchedulerOptions {
  int32_t max_batch = 64;    // sequences decoding at once; others wait
  int32_t max_queue = 256;   // admitted requests waiting; beyond: RESOURCE_EXHAUSTED
  Metrics* metrics = nullptr;
};

class Scheduler final {
 public:
  // `model` (its backend, engine, tokenizer) must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(ServedModel* model,
                                                           const SchedulerOptions& options);
  // Stops both threads; jobs not finished end with UNAVAILABLE.
  ~Scheduler();

  // Admits a job. RESOURCE_EXHAUSTED when the queue is full; the job is
  // then untouched. Thread-safe.
  absl::Status Submit(std::shared_ptr<GenerateJob> job);

  size_t queue_depth() const;
  size_t running() const;

 private:
  struct Running;
  Scheduler(ServedModel* model, const SchedulerOptions& options);
  void PrefillLoop();
  void DecodeLoop();
  // Samples from `logits` and streams the token; true when the job is over
  // (then it has been finished).
  bool Step(Running& r, std::span<const float> logits);
  void Complete(Running& r, absl::Status status);
  absl::Status StopStatus(const GenerateJob& job) const;

  ServedModel* const model_;
  const SchedulerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<GenerateJob>> queue_;
  std::vector<std::unique_ptr<Running>> running_;   // decode set
  size_t prefilling_ = 0;
  // Jobs in the decode set, including those the decode thread is stepping
  // (running_ is empty while it steps): what max_batch bounds.
  size_t decoding_ = 0;

  std::thread prefill_thread_;
  std::thread decode_thread_;
};

// Wraps a backend so that Forward calls enter in arrival order (a ticket
// turnstile). std::mutex is not fair: without this a busy decode loop could
// starve the prefill thread or the reverse.
std::unique_ptr<Backend> MakeFairBackend(std::unique_ptr<Backend> inner);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULER_H_
