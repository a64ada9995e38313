// PrefillJob: a prompt being processed on one sequence step by step, so that
// a scheduler can put its runs into the same Forward batch as other
// sequences' decode rows (CheckpointEngine::Prefill is the same loop for one
// sequence). Created by CheckpointEngine::StartPrefill, which already chose
// and applied the reuse (ReusePlanner) and planned the capture points
// (Capturer); the job hands out the remaining runs, keeps the checkpoints
// due as the runs are absorbed, and publishes the sequence at the end.
//
// Holds the sequence's mutex (engine calls on it wait) until Finish or
// destruction. Not thread-safe; must not outlive its engine.
#ifndef CAIRN_CHECKPOINT_PREFILL_JOB_H_
#define CAIRN_CHECKPOINT_PREFILL_JOB_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "checkpoint/engine_stats.h"
#include "checkpoint/policy.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/prompt.h"

namespace cairn::checkpoint {

class Capturer;
class CheckpointEngine;
class SequenceRegistry;
class SequenceMutex;
struct SequenceState;

struct PrefillResult {
  std::vector<float> logits;  // the last prompt row's, n_vocab values
  PrefillStats stats;
};

class PrefillJob {
 public:
  ~PrefillJob();  // finishes as cancelled when Finish was not called
  PrefillJob(const PrefillJob&) = delete;
  PrefillJob& operator=(const PrefillJob&) = delete;

  // True when nothing is left to run (Finish returns the logits).
  bool done() const;
  // The next run for Backend::Forward: up to max_tokens tokens or one whole
  // chunk; it asks for the last row's logits when it ends the prompt. Where
  // the backend snapshots inside a run (ModelInfo::snapshots_within_run)
  // the capture points inside it become its snapshot_rows; otherwise the
  // run ends at the next capture point. Valid until Absorbed or Finish.
  // Only while !done().
  SequenceRun NextRun(int32_t max_tokens);
  // After Forward absorbed NextRun's run (`logits`: its RunLogits, whose
  // snapshots are moved into the store): records it and keeps the due
  // checkpoints. FAILED_PRECONDITION when the memory did not advance by
  // that run.
  absl::Status Absorbed(RunLogits& logits);
  // Ends the job once: the result when done; otherwise `error` (CANCELLED
  // when OK), the sequence then holding the prompt prefix absorbed so far.
  absl::StatusOr<PrefillResult> Finish(absl::Status error = absl::OkStatus());

  // The prompt being processed, and how many of its symbols are absorbed
  // (restored or computed) so far.
  const Prompt& prompt() const { return prompt_; }
  size_t absorbed() const { return i_; }
  // Asks for a full checkpoint (restorable onto any sequence) after the
  // first `symbols` prompt symbols: a prefix another request shares and
  // waits for, so that it restores it instead of computing it again.
  // Captured like the planned points (the store may still decline it).
  // False, changing nothing, when checkpointing is off, or `symbols` is
  // already absorbed or beyond the prompt.
  bool AddSharedPoint(size_t symbols);

 private:
  friend class CheckpointEngine;
  // Locks the sequence (waits for engine calls on it).
  PrefillJob(std::shared_ptr<SequenceState> state, Capturer& capturer, SequenceRegistry& live, EngineCounters& counters,
             bool snapshots_within_run);
  // Captures the points planned at the symbols absorbed so far.
  void CaptureDue();
  // Which capture points inside the run [i_, end) the backend snapshots:
  // those the store would admit (fills snapshot_rows_ and _reasons_).
  void PlanSnapshotRows(size_t end);

  const std::shared_ptr<SequenceState> state_;
  Capturer& capturer_;
  SequenceRegistry& live_;
  EngineCounters& counters_;
  const bool snapshots_within_run_;
  std::unique_lock<SequenceMutex> lock_;  // of state_->mu, until Finish
  Prompt prompt_;
  IndexMatch match_;
  std::vector<uint64_t> excluded_;  // ids that failed to restore
  std::vector<CapturePoint> points_;
  size_t next_point_ = 0;
  size_t spaced_bytes_ = 0;  // checkpoint-scope bytes of the spaced points captured so far
  size_t i_ = 0;             // prompt symbols absorbed
  size_t run_end_ = 0;       // end of the run NextRun returned
  std::vector<TokenId> tokens_;
  std::vector<int32_t> snapshot_rows_;  // of that run, one per capture point inside it
  std::vector<CaptureReason> snapshot_reasons_;
  int32_t last_row_ = 0;
  std::chrono::steady_clock::time_point run_started_;
  PrefillResult result_;
  absl::Status error_;
  bool finished_ = false;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_PREFILL_JOB_H_
