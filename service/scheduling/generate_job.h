// One Generate request as a scheduler runs it (scheduler.h), and how what
// it reports reaches the caller: events queued on the job, each followed by
// a wake-up (GenerateJob::on_progress), never polled for.
#ifndef CAIRN_SERVICE_SCHEDULING_GENERATE_JOB_H_
#define CAIRN_SERVICE_SCHEDULING_GENERATE_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "checkpoint/engine.h"
#include "service/scheduling/generate_events.h"
#include "service/scheduling/history.h"
#include "service/scheduling/sampler.h"

namespace cairn::service {

using Clock = std::chrono::steady_clock;

enum class StopReason : int { kNone = 0, kCancelled = 1, kDeadline = 2, kShutdown = 3, kStalled = 4 };

// Fields under "input" are set before Scheduler::Submit and read-only
// afterwards; the scheduler writes the rest. The caller reads events as the
// wake-ups come and the summary once done() is true.
struct GenerateJob {
  // --- input
  // A session's sequence: borrowed, exclusively the job's while it runs.
  // Null: the scheduler runs the request on a fresh sequence of `tenant`
  // (the prefix-cache partition), parks it in the checkpoint store when the
  // prompt was processed (CheckpointEngine::Park) and frees it before done.
  checkpoint::Sequence* seq = nullptr;
  std::string tenant;
  History prompt;  // the whole prompt (owns chunk rows)
  SamplingConfig sampling;
  int32_t max_tokens = 256;
  std::vector<TokenId> stop_tokens;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  // End-of-generation tokens that do not end this request (gpt-oss's
  // <|end|> between the messages of one turn).
  std::vector<TokenId> continue_tokens;
  bool stream_text = true;
  std::string session_id;
  Clock::time_point received = Clock::now();
  // The scheduler stops the request (StopReason::kDeadline) at this time.
  Clock::time_point deadline = Clock::time_point::max();
  // The wake-up: called on the scheduler's thread, with no lock held, after
  // each event it queues and once more when the job is done. May be empty.
  std::function<void()> on_progress;
  // Called on the scheduler's thread before a stalled request is stopped,
  // to end its stream, whose write the client never lets complete. May be
  // empty.
  std::function<void()> abort_stream;

  // --- control (any thread)
  // Asks the request to stop; the first reason wins.
  void RequestStop(StopReason reason);
  StopReason stop_reason() const { return static_cast<StopReason>(stop_.load()); }
  // The caller completed the write of one token delta (backpressure).
  void Acknowledge();
  int64_t acknowledged() const { return acknowledged_.load(); }

  // --- output (any thread)
  // The oldest event not taken yet, if any.
  std::optional<GenerateEvent> TakeEvent();
  // Finished and every event taken.
  bool done() const;
  absl::Status status() const;  // valid when done()

  // --- summary (valid when done)
  bool prefilled = false;         // the prompt was fully processed
  std::vector<TokenId> streamed;  // ids of every TokenGenerated event
  checkpoint::PrefillStats stats;

  // --- the scheduler's side
  void Emit(GenerateEvent event);        // queues it, then wakes the caller
  void Finish(absl::Status status);      // once; then wakes the caller
  std::function<void()> wake_scheduler;  // set by Submit

 private:
  void Wake() const {
    if (on_progress) on_progress();
  }
  mutable absl::Mutex mu_;
  std::deque<GenerateEvent> events_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> stop_{0};
  std::atomic<int64_t> acknowledged_{0};
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_GENERATE_JOB_H_
